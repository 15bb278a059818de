"""Benchmark what a request costs as its thread grows, against a stateless bare-Starlette baseline.

    python tests/bench/bench_growth.py [--check] [--profile] [--reps N] [--sizes 0,100,1000] [--long 10000]
                                       [--before DIR]

The servers run under uvicorn in processes of their own (`_server.py`), the adapter on a SQLiteStore
in a temp dir; the client is httpx in this process. Every figure is server CPU (`GET /__cpu` deltas,
every thread of the process), median of `--reps` samples, the sides alternating. With `--before DIR`
(a checkout of another version, e.g. `git archive main | tar -x -C DIR`) a second adapter imported
from DIR is measured in the same run, so that before and after meet the same load; each row then
reports both ratios against the one baseline.

The baseline parses the `RunAgentInput` and replays the event list the adapter produced for the same
request (captured first, per workload and size). Having no store, it is always sent the full history:
that is what a stateless target needs. Workloads:

- growth: a thread with N prior turns (a turn: user, assistant tool call, tool result, assistant text;
  about 600 B). `new`: a new run with the full history that calls the client's `navigate` tool and
  ends in an interrupt; `resume-full`: its resume, with the history as the client holds it;
  `resume-empty`: the resume of another such thread with `messages: []`; `next`: once the first
  thread's resume finished, a new run on it with the full history (the store already holds it).
  Slope: least squares over the sizes, µs per prior turn. Target: each slope <= 2x the baseline's.
  `--long` adds one more size for `resume-full` and `next` only (the steady state of a long thread).
- payload: a new run whose history holds one user message of 768 KB, against one without it: CPU per
  KB of body. Target <= 1.5x.
- fixed: 100 concurrent runs of 50 text deltas each: CPU per run. Target <= 1.1x.
- round trip: frontend call, interrupt, resume with the snapshot, success; CPU per round trip. Target
  <= 1.3x.
- memory: a fresh process of each server serves 100 concurrent runs of 50 deltas; its peak resident
  set (VmHWM) afterwards, median of three fresh processes. Target <= 1.2x.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from _growth import Rows, held_by_client, prior_turns, settled_messages
from _server import (
    KIND_HEADER,
    NAVIGATE,
    ROUND_TRIP_PROMPT,
    SHORT_PROMPT,
    SOURCE,
    Server,
    calibrate,
    cpu_of,
    events_of,
    new_id,
    outcome_of,
    run_input,
)
from bench_adapter import round_trip

PAYLOAD_KB = 768
REQUESTS = ("new", "resume-full", "resume-empty", "next")
CONCURRENT = 100
TARGETS = {"slope": 2.0, "payload": 1.5, "fixed": 1.1, "round trip": 1.3, "rss": 1.2}
LONG_REQUESTS = ("resume-full", "next")

Body = dict[str, Any]


class Bench:
    """Posts bodies to a server and records, for the adapter, the events the baseline will replay."""

    def __init__(self, server: Server, captured: dict[str, list[dict[str, Any]]]) -> None:
        self.server = server
        self.captured = captured
        self.capturing = server.name == "adapter"

    async def post(self, kind: str, body: Body, baseline_body: Body | None = None) -> list[dict[str, Any]]:
        if self.server.kind == "baseline" and baseline_body is not None:
            body = baseline_body
        events = events_of(await self.server.post(body, {KIND_HEADER: kind}))
        if self.capturing:
            self.captured.setdefault(kind, events)
        return events


async def growth(bench: Bench, size: int, requests: tuple[str, ...] = REQUESTS) -> dict[str, float]:
    """One sample of the growth requests at `size` prior turns: CPU ms of each."""
    history = prior_turns(size)
    cost: dict[str, float] = {}
    sent = [*history, {"id": new_id("user"), "role": "user", "content": ROUND_TRIP_PROMPT}]
    thread = new_id("thread")
    cost["new"], first = await cpu_of(bench.server, bench.post(f"new:{size}", _body(thread, sent)))
    held = held_by_client(sent, first)
    full = _resume_body(thread, held, first)
    cost["resume-full"], resumed = await cpu_of(bench.server, bench.post(f"resume-full:{size}", full))
    after = [*held, *settled_messages(resumed), {"id": new_id("user"), "role": "user", "content": ROUND_TRIP_PROMPT}]
    cost["next"], _ = await cpu_of(bench.server, bench.post(f"next:{size}", _body(thread, after)))
    if "resume-empty" not in requests:
        return cost
    other = new_id("thread")
    again = await bench.post(f"new:{size}", _body(other, sent))
    empty = _resume_body(other, [], again)
    stateless = _resume_body(other, held_by_client(sent, again), again)
    cost["resume-empty"], _ = await cpu_of(bench.server, bench.post(f"resume-empty:{size}", empty, stateless))
    return cost


def _body(thread_id: str, messages: list[dict[str, Any]]) -> Body:
    return run_input(thread_id, messages, tools=[NAVIGATE])


def _resume_body(thread_id: str, messages: list[dict[str, Any]], first: list[dict[str, Any]]) -> Body:
    outcome = outcome_of(first)
    if outcome["type"] != "interrupt":
        raise RuntimeError(f"the new run ended in {outcome}, expected an interrupt")
    entries = [
        {"interruptId": i["id"], "status": "resolved", "payload": {"navigated": True}} for i in outcome["interrupts"]
    ]
    return run_input(thread_id, messages, tools=[NAVIGATE], resume=entries)


async def payload(bench: Bench, kb: int) -> float:
    padding = [{"id": new_id("user"), "role": "user", "content": "x" * (kb * 1024)}] if kb else []
    ask = {"id": new_id("user"), "role": "user", "content": SHORT_PROMPT}
    body = run_input(new_id("thread"), [*padding, {"id": "r0", "role": "assistant", "content": "ok"}, ask])
    cost, _ = await cpu_of(bench.server, bench.post(f"payload:{kb}", body))
    return cost


async def fixed(bench: Bench) -> float:
    def body() -> Body:
        return run_input(new_id("thread"), [{"id": new_id("user"), "role": "user", "content": SHORT_PROMPT}])

    async def together() -> None:
        # Started only once awaited, after the first CPU reading (gather would start the runs at once).
        await asyncio.gather(*(bench.post("fixed", body()) for _ in range(CONCURRENT)))

    cost, _ = await cpu_of(bench.server, together())
    return float(cost) / CONCURRENT


async def trip(bench: Bench) -> float:
    cost, _ = await cpu_of(bench.server, round_trip(bench.server))
    return float(cost)


def slope(sizes: list[int], costs: list[float]) -> float:
    """Least-squares µs per prior turn."""
    mean_x, mean_y = statistics.fmean(sizes), statistics.fmean(costs)
    num = sum((x - mean_x) * (y - mean_y) for x, y in zip(sizes, costs, strict=True))
    return 1000 * num / sum((x - mean_x) ** 2 for x in sizes)


async def alternate(benches: list[Bench], work: Callable[[Bench], Awaitable[Any]], reps: int) -> dict[str, list[Any]]:
    samples: dict[str, list[Any]] = {b.server.name: [] for b in benches}
    for _ in range(reps):
        for bench in benches:
            samples[bench.server.name].append(await work(bench))
    return samples


async def measure(benches: list[Bench], sizes: list[int], long: int | None, reps: int) -> Rows:
    names = [b.server.name for b in benches]
    rows = Rows(names)
    per_size: dict[str, dict[str, list[float]]] = {name: {} for name in names}
    for size in [*sizes, *([long] if long else [])]:
        wanted = LONG_REQUESTS if size == long else REQUESTS
        samples = await alternate(benches, lambda b, n=size, w=wanted: growth(b, n, w), reps)  # type: ignore[misc]
        for name, runs in samples.items():
            for request in wanted:
                per_size[name].setdefault(request, []).append(statistics.median(r[request] for r in runs))
    for request in REQUESTS:
        xs = [*sizes, long] if long and request in LONG_REQUESTS else sizes
        label = f"growth {request}"
        rows.add(label, "µs CPU / prior turn", {n: slope(xs, per_size[n][request]) for n in names}, TARGETS["slope"])
        rows.add(label, f"ms CPU at {xs[-1]} turns", {n: per_size[n][request][-1] for n in names})
    small = await alternate(benches, lambda b: payload(b, 0), reps)
    large = await alternate(benches, lambda b: payload(b, PAYLOAD_KB), reps)
    per_kb = {n: 1000 * (statistics.median(large[n]) - statistics.median(small[n])) / PAYLOAD_KB for n in names}
    rows.add("payload", "µs CPU / KB of body", per_kb, TARGETS["payload"])
    fixed_runs = await alternate(benches, fixed, reps)
    rows.add(f"fixed: {CONCURRENT} runs x 50 deltas", "ms CPU / run", _medians(fixed_runs), TARGETS["fixed"])
    trips = await alternate(benches, trip, reps * 3)
    rows.add("frontend round trip, SQLite", "ms CPU / round trip", _medians(trips), TARGETS["round trip"])
    return rows


def _medians(samples: dict[str, list[float]]) -> dict[str, float]:
    return {name: statistics.median(values) for name, values in samples.items()}


async def peak_memory(
    starts: list[Callable[[], Server]], captured: dict[str, list[dict[str, Any]]]
) -> dict[str, float]:
    """Peak RSS (MB) of fresh processes after one batch of concurrent runs: the median of three per server."""
    peaks: dict[str, list[float]] = {}
    for _ in range(3):
        for start in starts:
            server = start()
            try:
                await server.wait_ready()
                await fixed(Bench(server, captured))
                peaks.setdefault(server.name, []).append(await server.peak_rss_mb())
            finally:
                await server.aclose()
    return _medians(peaks)


async def capture(adapter: Bench, sizes: list[int], long: int | None) -> None:
    """Run every workload once on an adapter: the event lists the baseline replays, and a warm-up."""
    for size in sizes:
        await growth(adapter, size)
    if long:
        await growth(adapter, long, LONG_REQUESTS)
    for kb in (0, PAYLOAD_KB):
        await payload(adapter, kb)
    await fixed(adapter)
    first, second = await round_trip(adapter.server)
    adapter.captured.update(interrupt=first, resume=second)


async def profile(server: Server, out: Path, size: int) -> None:
    import pstats

    (await server.http.post("/__profile/start")).raise_for_status()
    for _ in range(3):
        await growth(Bench(server, {}), size)
    (await server.http.post("/__profile/stop")).raise_for_status()
    print(f"\n=== adapter, growth at {size} turns, 3 samples: adapter frames by cumulative time ===")
    stats = pstats.Stats(str(out))
    stats.sort_stats("cumulative").print_stats(r"/adapter/", 30)
    stats.sort_stats("tottime").print_stats(15)


def adapters(tmp: str, before: Path | None, out: Path) -> list[Callable[[], Server]]:
    """How to start each adapter under test: this checkout's, and the `--before` one's."""
    count = iter(range(1_000_000))

    def start(name: str, src: Path) -> Callable[[], Server]:
        db = str(Path(tmp, f"{name}-{next(count)}.db"))
        return lambda: Server("adapter", "--db", db, "--profile-out", str(out), name=name, src=src)

    return [start("adapter", SOURCE), *([start("before", before)] if before else [])]


async def main_async(args: argparse.Namespace) -> int:
    sizes = [int(s) for s in args.sizes.split(",")]
    long = args.long or None
    captured: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="agui-bench-") as tmp:
        out = Path(tmp, "server.pstats")
        starts = adapters(tmp, args.before, out)
        servers = [start() for start in starts]
        try:
            for server in servers:
                await server.wait_ready()
                await capture(Bench(server, captured), sizes, long)
            events = Path(tmp, "events.json")
            events.write_text(json.dumps(captured))
            baseline_start = functools.partial(Server, "baseline", "--events", str(events))
            servers.append(baseline_start())
            await servers[-1].wait_ready()
            for server in servers:
                await calibrate(server)
            load, started = os.getloadavg()[0], time.perf_counter()
            rows = await measure([Bench(server, captured) for server in servers], sizes, long, args.reps)
            if args.profile:
                await profile(servers[0], out, sizes[-1])
        finally:
            for server in servers:
                await server.aclose()
        # The baseline holds the events it replays: for this row, only the ones it sends here.
        only_fixed = Path(tmp, "fixed-events.json")
        only_fixed.write_text(json.dumps({"fixed": captured["fixed"]}))
        fixed_baseline = functools.partial(Server, "baseline", "--events", str(only_fixed))
        rss = await peak_memory([*starts, fixed_baseline], captured)
        rows.add(f"memory: {CONCURRENT} concurrent runs", "peak RSS MB", rss, TARGETS["rss"])
    print(rows.table())
    print(
        f"\n(medians of {args.reps} samples per side, alternating; {time.perf_counter() - started:.0f} s; "
        f"load average before: {load:.2f} on {os.cpu_count()} CPUs)"
    )
    missed = [row for row in rows.of("adapter") if row.met is False]
    print("all targets met" if not missed else "missed: " + ", ".join(f"{r.workload} {r.metric}" for r in missed))
    return 1 if args.check and missed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--profile", action="store_true", help="profile the adapter at the largest size")
    parser.add_argument("--reps", type=int, default=5, help="samples per side and size (>= 3)")
    parser.add_argument("--sizes", default="0,100,1000", help="prior turns, comma-separated")
    parser.add_argument("--long", type=int, default=10_000, help="one more size for resume-full and next (0: none)")
    parser.add_argument("--before", type=Path, help="also measure the adapter of this checkout, in the same run")
    args = parser.parse_args(argv)
    if args.reps < 3:
        parser.error("--reps must be at least 3")
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
