"""Benchmark the adapter against a bare Starlette + EventEncoder endpoint, over real HTTP.

    python tests/bench/bench_adapter.py [--check] [--profile] [--reps N] [--round-trips N]

Each server runs under uvicorn on 127.0.0.1 in a process of its own (see `_server.py`); the client
is httpx in this process. The baseline replays the event lists the adapter produced, captured once
at the start, so both sides send the same events.

- A, streaming: one run whose reply is 2,000 words, so 2,000 TEXT_MESSAGE_CONTENT events. Measured:
  server CPU (`time.process_time()` deltas read through `GET /__cpu`) per 1,000 events, median of
  `--reps` runs. Target: adapter <= 1.3x baseline.
- B, frontend-tool round trip: run 1 calls the client's `navigate` tool and ends in an interrupt,
  run 2 resumes it and finishes; the adapter keeps the turn in a SQLiteStore in a temp dir.
  Measured: wall-clock ms per round trip, median of `--round-trips`. Target: adapter < 2x baseline.

The two sides alternate, after a warm-up, so drift hits both alike. CPU is the whole server
process's (every thread, so SQLite's worker too), less the measured cost of the two `/__cpu` reads.
Exit status is 0 unless `--check` is given and a target is missed. `--profile` then runs each
workload on both servers under cProfile (event loop thread only) and prints where the time goes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pstats
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _server import (
    NAVIGATE,
    ROUND_TRIP_PROMPT,
    STREAM_PROMPT,
    WORDS,
    Sample,
    Server,
    calibrate,
    events_of,
    new_id,
    outcome_of,
    run_input,
    sample,
)

CPU_TARGET = 1.3
ROUND_TRIP_TARGET = 2.0
_CONTENT = b'"type":"TEXT_MESSAGE_CONTENT"'


async def stream_run(server: Server) -> bytes:
    """Workload A: one run streaming WORDS deltas; the raw SSE body."""
    user = {"id": new_id("user"), "role": "user", "content": STREAM_PROMPT}
    raw = await server.post(run_input(new_id("thread"), [user]))
    if raw.count(_CONTENT) != WORDS:
        raise RuntimeError(f"{server.kind}: {raw.count(_CONTENT)} text deltas, expected {WORDS}")
    return raw


async def round_trip(server: Server) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Workload B: a frontend call that interrupts, then its resume; the events of both runs."""
    thread_id = new_id("thread")
    user = {"id": new_id("user"), "role": "user", "content": ROUND_TRIP_PROMPT}
    first = events_of(await server.post(run_input(thread_id, [user], tools=[NAVIGATE])))
    outcome = outcome_of(first)
    if outcome["type"] != "interrupt":
        raise RuntimeError(f"{server.kind}: run 1 ended in {outcome}, expected an interrupt")
    (interrupt,) = outcome["interrupts"]
    snapshot = [event for event in first if event["type"] == "MESSAGES_SNAPSHOT"][-1]["messages"]
    entry = {"interruptId": interrupt["id"], "status": "resolved", "payload": {"navigated": True}}
    second = events_of(await server.post(run_input(thread_id, snapshot, tools=[NAVIGATE], resume=[entry])))
    if outcome_of(second)["type"] != "success":
        raise RuntimeError(f"{server.kind}: run 2 ended in {outcome_of(second)}, expected success")
    return first, second


async def capture(adapter: Server) -> dict[str, list[dict[str, Any]]]:
    """The adapter's event lists for both workloads, for the baseline to replay."""
    stream = events_of(await stream_run(adapter))
    first, second = await round_trip(adapter)
    return {"stream": stream, "interrupt": first, "resume": second}


async def alternate(
    servers: list[Server], work: Callable[[Server], Awaitable[object]], *, warmup: int, reps: int
) -> dict[str, list[Sample]]:
    """Run `work` on each server in turn, `warmup` unrecorded times and then `reps` recorded ones."""
    for _ in range(warmup):
        for server in servers:
            await work(server)
    samples: dict[str, list[Sample]] = {server.kind: [] for server in servers}
    for _ in range(reps):
        for server in servers:
            samples[server.kind].append(await sample(server, work))
    return samples


def median(samples: list[Sample], field: str) -> float:
    return float(statistics.median(getattr(s, field) for s in samples))


@dataclass
class Row:
    workload: str
    metric: str
    adapter: float
    baseline: float
    target: tuple[str, float] | None = None
    """The ratio the adapter must keep to: ("<=", 1.3) or ("<", 2.0); None for an informational row."""

    @property
    def ratio(self) -> float:
        return self.adapter / self.baseline

    @property
    def met(self) -> bool | None:
        if self.target is None:
            return None
        op, limit = self.target
        return self.ratio <= limit if op == "<=" else self.ratio < limit

    def line(self) -> str:
        verdict = "(info)"
        if self.target is not None:
            verdict = f"{self.target[0]} {self.target[1]:.1f}x {'met' if self.met else 'MISSED'}"
        numbers = f"{self.adapter:>9.2f} {self.baseline:>9.2f} {self.ratio:>6.2f}x"
        return f"{self.workload:<28} {self.metric:<22} {numbers}  {verdict}"


def table(rows: list[Row]) -> str:
    head = f"{'workload':<28} {'metric':<22} {'adapter':>9} {'baseline':>9} {'ratio':>7}  target"
    return "\n".join([head, "-" * len(head), *(row.line() for row in rows)])


async def verify(baseline: Server, captured: dict[str, list[dict[str, Any]]]) -> int:
    """Check the baseline sends what the adapter sent; the events in one streaming run."""
    stream = events_of(await stream_run(baseline))
    first, second = await round_trip(baseline)
    for kind, events in (("stream", stream), ("interrupt", first), ("resume", second)):
        if [e["type"] for e in events] != [e["type"] for e in captured[kind]]:
            raise RuntimeError(f"the baseline's {kind} events differ from the adapter's")
    return len(stream)


async def measure(adapter: Server, baseline: Server, args: argparse.Namespace, events_per_run: int) -> list[Row]:
    servers = [adapter, baseline]
    for server in servers:
        await calibrate(server)
    a = await alternate(servers, stream_run, warmup=2, reps=args.reps)
    b = await alternate(servers, round_trip, warmup=10, reps=args.round_trips)
    per_k = 1000 / events_per_run
    cpu_a = [median(a[server.kind], "cpu_ms") * per_k for server in servers]
    label_a, label_b = f"A: stream {WORDS} deltas", "B: frontend-tool round trip"

    def both(samples: dict[str, list[Sample]], field: str) -> tuple[float, float]:
        return median(samples["adapter"], field), median(samples["baseline"], field)

    return [
        Row(label_a, "CPU ms / 1,000 events", cpu_a[0], cpu_a[1], target=("<=", CPU_TARGET)),
        Row(label_a, "wall ms / run", *both(a, "wall_ms")),
        Row(label_b, "wall ms / round trip", *both(b, "wall_ms"), target=("<", ROUND_TRIP_TARGET)),
        Row(label_b, "CPU ms / round trip", *both(b, "cpu_ms")),
    ]


async def profile(servers: list[Server], out: Path, reps: int) -> None:
    """Profile each server's event loop thread on each workload and print where the time goes."""
    for name, work, count in (("A (streaming)", stream_run, reps), ("B (round trip)", round_trip, reps * 5)):
        for server in servers:
            (await server.http.post("/__profile/start")).raise_for_status()
            for _ in range(count):
                await work(server)
            (await server.http.post("/__profile/stop")).raise_for_status()
            print(f"\n=== {server.kind} server, workload {name}, {count} runs: top by own time ===")
            stats = pstats.Stats(str(out))
            stats.sort_stats("tottime").print_stats(20 if server.kind == "adapter" else 10)
            if server.kind == "adapter":
                print(f"=== adapter server, workload {name}: adapter frames by cumulative time ===")
                stats.sort_stats("cumulative").print_stats(r"/adapter/", 20)
            out.unlink()


async def main_async(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="agui-bench-") as tmp:
        pstats_out = Path(tmp, "server.pstats")
        adapter = Server("adapter", "--db", str(Path(tmp, "turns.db")), "--profile-out", str(pstats_out))
        servers = [adapter]
        try:
            await adapter.wait_ready()
            events = Path(tmp, "events.json")
            captured = await capture(adapter)
            events.write_text(json.dumps(captured))
            baseline = Server("baseline", "--events", str(events), "--profile-out", str(pstats_out))
            servers.append(baseline)
            await baseline.wait_ready()
            events_per_run = await verify(baseline, captured)
            load, started = os.getloadavg()[0], time.perf_counter()
            rows = await measure(adapter, baseline, args, events_per_run)
            print(table(rows))
            print(
                f"\n(A: {events_per_run} events a run; medians of {args.reps} runs and {args.round_trips} round trips "
                f"per side, alternating; {time.perf_counter() - started:.1f} s; "
                f"load average before: {load:.2f} on {os.cpu_count()} CPUs)"
            )
            if args.profile:
                await profile(servers, pstats_out, max(args.reps // 4, 2))
        finally:
            for server in servers:
                await server.aclose()
    missed = [row for row in rows if row.met is False]
    print("all targets met" if not missed else "missed: " + ", ".join(f"{r.workload} {r.metric}" for r in missed))
    return 1 if args.check and missed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--profile", action="store_true", help="profile both servers afterwards")
    parser.add_argument("--reps", type=int, default=10, help="streaming runs measured per side (>= 3)")
    parser.add_argument("--round-trips", type=int, default=40, help="round trips measured per side (>= 30)")
    args = parser.parse_args(argv)
    if args.reps < 3 or args.round_trips < 30:
        parser.error("--reps must be at least 3 and --round-trips at least 30")
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
