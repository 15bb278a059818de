"""The store thread's CPU per frontend-tool round trip over HTTP, beside the durable-journal floor's writer thread.

    python tests/bench/bench_store_thread.py [--before COMMIT_OR_DIR] [--trips 200] [--rounds 3]

The servers of `bench_floor.py` (`_server.py`: the adapter on a SQLiteStore, the durable-journal floor replaying the
adapter's captured events), each in its own process; the client is httpx in this one. Each round sends `--trips`
round trips to each server in turn and reads every thread's CPU (the scheduler's run time in ns,
`/proc/PID/task/TID/schedstat`) before and after: the store's thread (the adapter's worker, the floor's executor
thread) and the whole process, per round trip. With `--before`, a second adapter (a commit of this repository or a
checkout dir) is measured in the same rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
from pathlib import Path

import bench_floor
from _server import Server, thread_cpu_ns
from bench_adapter import round_trip


def threads(pid: int) -> dict[int, float]:
    """CPU seconds by thread id (`thread_cpu_ns`)."""
    return {tid: ns / 1e9 for tid, ns in thread_cpu_ns(pid).items()}


def store_and_process(pid: int, start: dict[int, float], end: dict[int, float]) -> tuple[float, float]:
    """The store thread's CPU seconds and the process's: the store's is the busiest thread but the loop's (`pid`).

    Python 3.11 names no native thread, so the store's worker (the floor's executor thread) is found by its work.
    """
    spent = {tid: end[tid] - start.get(tid, 0.0) for tid in end}
    others = [seconds for tid, seconds in spent.items() if tid != pid]
    return max(others, default=0.0), sum(spent.values())


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="agui-store-thread-") as tmp:
        before = bench_floor.checkout(args.before, tmp) if args.before else None
        servers = [start() for start in bench_floor.adapters(tmp, before)]
        try:
            for server in servers:
                await server.wait_ready()
            first, second = await round_trip(servers[0])
            captured = {"interrupt": first, "resume": second}
            events = Path(tmp, "events.json")
            events.write_text(json.dumps(captured))
            floor = Server("journal", "--db", f"{tmp}/journal.db", "--events", str(events), name="journal")
            servers.append(floor)
            await floor.wait_ready()
            for server in servers:
                for _ in range(30):
                    await round_trip(server)
            store: dict[str, list[float]] = {server.name: [] for server in servers}
            total: dict[str, list[float]] = {server.name: [] for server in servers}
            for round_ in range(args.rounds):
                order = servers if round_ % 2 == 0 else servers[::-1]
                for server in order:
                    pid = server.process.pid
                    start = threads(pid)
                    for _ in range(args.trips):
                        await round_trip(server)
                    thread, process = store_and_process(pid, start, threads(pid))
                    store[server.name].append(1000 * thread / args.trips)
                    total[server.name].append(1000 * process / args.trips)
        finally:
            for server in servers:
                await server.aclose()
    print(f"ms CPU per round trip, median of {args.rounds} rounds of {args.trips}; load {os.getloadavg()[0]:.1f}")
    for name in store:
        rounds = ", ".join(f"{s:.2f}/{t:.2f}" for s, t in zip(store[name], total[name], strict=True))
        medians = statistics.median(store[name]), statistics.median(total[name])
        print(f"  {name:8} store thread {medians[0]:.3f}, process {medians[1]:.2f}  (rounds, store/process: {rounds})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", help="also measure the adapter of this commit or checkout dir")
    parser.add_argument("--trips", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    asyncio.run(main(parser.parse_args()))
