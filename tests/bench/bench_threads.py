"""Where the full-history resume's cost per prior turn goes over HTTP, thread by thread of the server process.

    python tests/bench/bench_threads.py [--reps 9] [--turns 1000] [--before COMMIT_OR_DIR]

The resume row of `bench_floor.py` (a new run on a thread of N prior turns that calls the client's tool, then its
resume with the whole history), at N = 0 and N = `--turns`, on the adapter (and `--before`'s) and on the bare floor,
the sides alternating. For each resume alone (the new run before it is not counted), the CPU each thread of the
server process spent, read from `/proc/<pid>/task/<tid>/schedstat` (ns, user and system) before and after, each
thread named by the server (`GET /__threads`): the event loop's `MainThread`, the worker threads a large body is
parsed on, the store's own thread. A side's figure per thread is the median over `--reps` at each size; per prior
turn is their difference over `--turns`. Also printed: the events the adapter's resume sent, and the body's size.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from _growth import held_by_client, prior_turns
from _server import ROUND_TRIP_PROMPT, SOURCE, Server, new_id, thread_cpu_ns
from bench_floor import checkout
from bench_growth import Bench, _body, _resume_body

Threads = dict[str, int]
"""CPU ns by thread name (threads of one name summed)."""


async def names(server: Server) -> dict[int, str]:
    response = await server.http.get("/__threads")
    response.raise_for_status()
    return {int(native): name for native, name in json.loads(response.text).items()}


def _group(name: str) -> str:
    """Thread names without their numbers: the worker threads of one pool are one group."""
    return name.rstrip("0123456789_- ") or name


async def threads_ns(server: Server) -> Threads:
    """Each thread's CPU ns so far, by its group."""
    named = await names(server)
    spent: Threads = defaultdict(int)
    for tid, ns in thread_cpu_ns(server.process.pid).items():
        spent[_group(named.get(tid, "other"))] += ns
    return spent


async def resume_once(bench: Bench, size: int) -> Threads:
    """A new run on a thread of `size` prior turns, then its resume: the resume's CPU ns by thread group."""
    sent = [*prior_turns(size), {"id": new_id("user"), "role": "user", "content": ROUND_TRIP_PROMPT}]
    thread = new_id("thread")
    first = await bench.post(f"new:{size}", _body(thread, sent))
    body = _resume_body(thread, held_by_client(sent, first), first)
    before = await threads_ns(bench.server)
    await bench.post(f"resume-full:{size}", body)
    after = await threads_ns(bench.server)
    return {name: after[name] - before.get(name, 0) for name in after}


def report(name: str, at: dict[int, list[Threads]], turns: int) -> str:
    groups = sorted({group for samples in at.values() for sample in samples for group in sample})

    def median(size: int, group: str | None) -> float:
        return statistics.median(sum(s.values()) if group is None else s.get(group, 0) for s in at[size])

    def per_turn(group: str | None) -> float:
        return (median(turns, group) - median(0, group)) / turns / 1000

    parts = [f"{group} {per_turn(group):.2f} ({median(turns, group) / 1e6:.2f} ms)" for group in groups]
    return f"  {name:<8} all {per_turn(None):.2f} ({median(turns, None) / 1e6:.2f} ms): " + ", ".join(parts)


async def main_async(args: argparse.Namespace) -> None:
    captured: dict[str, list[dict[str, object]]] = {}
    with tempfile.TemporaryDirectory(prefix="agui-threads-") as tmp:
        sources = [("adapter", SOURCE), *([("before", checkout(args.before, tmp))] if args.before else [])]
        servers = [Server("adapter", "--db", str(Path(tmp, f"{n}.db")), name=n, src=src) for n, src in sources]
        try:
            for server in servers:
                await server.wait_ready()
            benches = [Bench(server, captured) for server in servers]
            for bench in benches:  # a warm-up, and the events the bare floor replays
                for size in (0, args.turns):
                    await resume_once(bench, size)
            resumed = captured[f"resume-full:{args.turns}"]
            print(f"the adapter's resume at {args.turns} turns sent {[event['type'] for event in resumed]}")
            events = Path(tmp, "events.json")
            events.write_text(json.dumps(captured))
            servers.append(Server("baseline", "--events", str(events), name="bare"))
            await servers[-1].wait_ready()
            benches.append(Bench(servers[-1], captured))
            for size in (0, args.turns):
                await resume_once(benches[-1], size)
            load = os.getloadavg()[0]
            samples: dict[str, dict[int, list[Threads]]] = {b.server.name: {0: [], args.turns: []} for b in benches}
            for _ in range(args.reps):
                for size in (0, args.turns):
                    for bench in benches:
                        samples[bench.server.name][size].append(await resume_once(bench, size))
            head = f"µs CPU per prior turn by thread (ms at {args.turns} turns), medians of {args.reps}"
            print(f"{head}; load {load:.2f}")
            for name, at in samples.items():
                print(report(name, at, args.turns))
            print(f"load average at the end {os.getloadavg()[0]:.2f}")
        finally:
            for server in servers:
                await server.aclose()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--reps", type=int, default=9, help="resumes per side and size")
    parser.add_argument("--turns", type=int, default=1000, help="prior turns of the long resume")
    parser.add_argument("--before", help="also measure the adapter of this commit or checkout dir")
    asyncio.run(main_async(parser.parse_args()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
