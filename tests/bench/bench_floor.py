"""Issue 32's per-run-cost rows, each against the floor, in one run.

    python tests/bench/bench_floor.py [--reps 7] [--sizes 0,100,1000] [--long 10000] [--only ROWS] [--check]
                                      [--before DIR]
    python tests/bench/bench_floor.py --profile [--runs 100] [--turns 1000]

The servers run under uvicorn in processes of their own (`_server.py`), the adapter on a SQLiteStore in a temp
dir; the client is httpx in this process. The floor is `_server.py`'s baseline: a bare Starlette app that parses
the `RunAgentInput` with `model_validate_json` and sends the events the adapter sent for the same request
(captured first) through `ag_ui.encoder.EventEncoder`, with no guarantees: nothing stored, no journal, no policy.
Every row is a ratio of two medians taken in this run, the two sides alternating, after a warm-up (the capture).
Rows, and the goals of issue 32:

- stream: one run of 2,000 text deltas; server CPU per 1,000 events (goal <= 0.7x).
- fixed: 100 concurrent runs of 50 deltas each, new threads; server CPU per run (goal <= 1.1x).
- round trip: a frontend tool's call, interrupt, resume entry, answer, on SQLite; server CPU (goal <= 1.3x).
- resume: the resume of that interrupt, the client resending a history of N prior turns; server CPU per prior turn,
  least squares over `--sizes` (goal <= 2x). With `--long N`, the same slope again with N added: the sizes
  `bench_growth.py` fits by default, which give a lower ratio (docs/benchmarks.md says why).
- rss: a fresh process of each serves the fixed workload once; peak RSS (VmHWM), median of three (goal <= 1.2x).

Each row also prints the spread of the ratios of the pairs (each adapter sample over the floor's beside it:
25th to 75th percentile) and the 1-minute load average when the row started. With `--before DIR` (a checkout
of another version: `git archive HEAD adapter schema_tools | tar -x -C DIR`) a second adapter, imported from DIR,
is measured in the same run against the same floor, so that before and after meet the same load.

`--profile` measures nothing over HTTP: it runs the adapter in this process under cProfile (`_floor_profile.py`)
and counts what each run calls.
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _growth import held_by_client, prior_turns
from _server import ROUND_TRIP_PROMPT, SOURCE, Server, calibrate, cpu_of, events_of, new_id
from bench_adapter import round_trip, stream_run
from bench_growth import Bench, _body, _resume_body, fixed, slope, trip

ROWS = ("stream", "fixed", "trip", "resume", "rss")
GOALS = {"stream": 0.7, "fixed": 1.1, "trip": 1.3, "resume": 2.0, "rss": 1.2}
"""Issue 32's goals: the adapter's figure over the floor's, at most."""


@dataclass
class Figure:
    """One row: each side's median, the spread of each adapter's ratios over the floor's sample beside it, the load.

    The sides are in bench order: the adapter, the `--before` adapter if any, then the floor.
    """

    label: str
    medians: list[float]
    pairs: list[list[float]]
    load: float
    goal: float | None = None

    def ratio(self, side: int = 0) -> float:
        return self.medians[side] / self.medians[-1]

    @property
    def met(self) -> bool | None:
        return None if self.goal is None else self.ratio() <= self.goal

    def line(self) -> str:
        line = f"{self.label:<52}"
        for side, pairs in enumerate(self.pairs):
            quartiles = statistics.quantiles(pairs, n=4) if len(pairs) > 1 else [self.ratio(side)] * 3
            spread = f"{quartiles[0]:.2f}-{quartiles[2]:.2f}"
            line += f" {self.medians[side]:>9.2f} {self.ratio(side):>6.2f}x {spread:>11}"
        verdict = "(info)" if self.goal is None else f"<= {self.goal:.1f}x {'met' if self.met else 'MISSED'}"
        return f"{line} {self.medians[-1]:>9.2f}  {self.load:>5.2f}  {verdict}"


def table(names: list[str], figures: list[Figure]) -> str:
    head = f"{'row':<52}" + "".join(f" {name:>9} {'ratio':>7} {'pairs p25-75':>11}" for name in names[:-1])
    head += f" {names[-1]:>9}  {'load':>5}  goal"
    return "\n".join([head, "-" * (len(head) + 16), *(figure.line() for figure in figures)])


async def alternate(benches: list[Bench], work: Callable[[Bench], Awaitable[Any]], reps: int) -> list[list[Any]]:
    """`work` on each side in turn, `reps` times: the samples of each side, in bench order."""
    samples: list[list[Any]] = [[] for _ in benches]
    for _ in range(reps):
        for bench, kept in zip(benches, samples, strict=True):
            kept.append(await work(bench))
    return samples


def figure(label: str, samples: list[list[float]], load: float, goal: float | None = None) -> Figure:
    """The row of `samples` (one list per side, the floor's last)."""
    floor = samples[-1]
    pairs = [[a / b for a, b in zip(ours, floor, strict=True)] for ours in samples[:-1]]
    return Figure(label, [statistics.median(side) for side in samples], pairs, load, goal)


async def stream(bench: Bench) -> float:
    cost, raw = await cpu_of(bench.server, stream_run(bench.server))
    return 1000 * float(cost) / len(events_of(raw))


async def resume_full(bench: Bench, size: int) -> float:
    """The CPU ms of a resume whose client resends the whole history: `size` prior turns, then the interrupt."""
    sent = [*prior_turns(size), {"id": new_id("user"), "role": "user", "content": ROUND_TRIP_PROMPT}]
    thread = new_id("thread")
    first = await bench.post(f"new:{size}", _body(thread, sent))
    body = _resume_body(thread, held_by_client(sent, first), first)
    cost, _ = await cpu_of(bench.server, bench.post(f"resume-full:{size}", body))
    return float(cost)


async def resume_rows(benches: list[Bench], sizes: list[int], long: int | None, reps: int) -> list[Figure]:
    """The resume's slope per prior turn over `sizes`, then over `sizes` and `long`; the ms at each size."""
    load = os.getloadavg()[0]
    everything = [*sizes, *([long] if long else [])]
    at: dict[int, list[list[float]]] = {}
    for size in everything:
        at[size] = await alternate(benches, lambda b, n=size: resume_full(b, n), reps)  # type: ignore[misc]

    def fitted(over: list[int], label: str, goal: float | None) -> Figure:
        sides = range(len(benches))
        per_rep = [[slope(over, [at[n][side][rep] for n in over]) for rep in range(reps)] for side in sides]
        medians = [slope(over, [statistics.median(at[n][side]) for n in over]) for side in sides]
        pairs = [[a / b for a, b in zip(ours, per_rep[-1], strict=True)] for ours in per_rep[:-1]]
        return Figure(label, medians, pairs, load, goal)

    rows = [fitted(sizes, f"resume, µs CPU / prior turn, N = {','.join(map(str, sizes))}", GOALS["resume"])]
    if long:
        rows.append(fitted(everything, f"resume, µs CPU / prior turn, N = {','.join(map(str, everything))}", None))
    rows += [figure(f"resume, ms CPU at {size} turns", at[size], load) for size in everything]
    return rows


async def measure(benches: list[Bench], args: argparse.Namespace) -> list[Figure]:
    rows: list[Figure] = []
    if "stream" in args.only:
        load = os.getloadavg()[0]
        samples = await alternate(benches, stream, args.reps)
        rows.append(figure("stream, ms CPU / 1,000 events", samples, load, GOALS["stream"]))
    if "fixed" in args.only:
        load = os.getloadavg()[0]
        samples = await alternate(benches, fixed, args.reps)
        rows.append(figure("fixed, ms CPU / run (100 concurrent x 50 deltas)", samples, load, GOALS["fixed"]))
    if "trip" in args.only:
        load = os.getloadavg()[0]
        samples = await alternate(benches, trip, args.reps * 3)
        rows.append(figure("round trip on SQLite, ms CPU (call, interrupt, resume)", samples, load, GOALS["trip"]))
    if "resume" in args.only:
        rows += await resume_rows(benches, args.sizes, args.long or None, args.reps)
    return rows


async def capture(adapter: Bench, args: argparse.Namespace) -> None:
    """Each workload once on an adapter: the event lists the floor replays (the first adapter's), and a warm-up."""
    adapter.captured.setdefault("stream", events_of(await stream_run(adapter.server)))
    await fixed(adapter)
    first, second = await round_trip(adapter.server)
    adapter.captured.setdefault("interrupt", first)
    adapter.captured.setdefault("resume", second)
    for size in [*args.sizes, *([args.long] if args.long else [])]:
        await resume_full(adapter, size)


async def memory(starts: list[Callable[[], Server]], captured: dict[str, list[dict[str, Any]]]) -> Figure:
    """Peak RSS of fresh processes after one batch of the fixed workload, three of each side, alternating."""
    load = os.getloadavg()[0]
    samples: list[list[float]] = [[] for _ in starts]
    for _ in range(3):
        for start, kept in zip(starts, samples, strict=True):
            server = start()
            try:
                await server.wait_ready()
                await fixed(Bench(server, captured))
                kept.append(await server.peak_rss_mb())
            finally:
                await server.aclose()
    return figure("rss, peak MB after 100 concurrent runs", samples, load, GOALS["rss"])


def adapters(tmp: str, before: Path | None) -> list[Callable[[], Server]]:
    """How to start each adapter under test, each time on a new SQLite file: this checkout's, and `--before`'s."""
    count = iter(range(1_000_000))

    def start(name: str, src: Path) -> Callable[[], Server]:
        return lambda: Server("adapter", "--db", str(Path(tmp, f"{name}-{next(count)}.db")), name=name, src=src)

    return [start("adapter", SOURCE), *([start("before", before)] if before else [])]


async def main_async(args: argparse.Namespace) -> int:
    captured: dict[str, list[dict[str, Any]]] = {}
    started, loads = time.perf_counter(), os.getloadavg()
    rows: list[Figure] = []
    with tempfile.TemporaryDirectory(prefix="agui-floor-") as tmp:
        starts = adapters(tmp, args.before)
        servers = [start() for start in starts]
        try:
            for server in servers:
                await server.wait_ready()
                await capture(Bench(server, captured), args)
            events = Path(tmp, "events.json")
            events.write_text(json.dumps(captured))
            servers.append(Server("baseline", "--events", str(events), name="floor"))
            await servers[-1].wait_ready()
            for server in servers:
                await calibrate(server)
            rows = await measure([Bench(server, captured) for server in servers], args)
        finally:
            for server in servers:
                await server.aclose()
        if "rss" in args.only:
            # The floor holds the events it replays: for this row, only the ones it sends here.
            only_fixed = Path(tmp, "fixed-events.json")
            only_fixed.write_text(json.dumps({"fixed": captured["fixed"]}))
            floor = functools.partial(Server, "baseline", "--events", str(only_fixed), name="floor")
            rows.append(await memory([*starts, floor], captured))
    print(table([server.name for server in servers], rows))
    after = os.getloadavg()
    print(
        f"\n(medians of {args.reps} samples per side and row, {args.reps * 3} for the round trip, alternating; "
        f"{time.perf_counter() - started:.0f} s; load average {loads[0]:.2f}/{loads[1]:.2f} at the start, "
        f"{after[0]:.2f}/{after[1]:.2f} at the end, on {os.cpu_count()} CPUs)"
    )
    missed = [row.label for row in rows if row.met is False]
    print("all goals met" if not missed else "missed: " + "; ".join(missed))
    return 1 if args.check and missed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="exit 1 when a goal is missed")
    parser.add_argument("--reps", type=int, default=7, help="samples per side and row (>= 3)")
    parser.add_argument("--sizes", default="0,100,1000", help="prior turns of the resume row, comma-separated")
    parser.add_argument("--long", type=int, default=10_000, help="one more size, for a second slope (0: none)")
    parser.add_argument("--only", default=",".join(ROWS), help=f"rows to measure, of {','.join(ROWS)}")
    parser.add_argument("--before", type=Path, help="also measure the adapter of this checkout, in the same run")
    parser.add_argument("--profile", action="store_true", help="profile the adapter in this process instead")
    parser.add_argument("--runs", type=int, default=100, help="--profile: iterations per workload")
    parser.add_argument("--turns", type=int, default=1000, help="--profile: prior turns of the resume workload")
    args = parser.parse_args(argv)
    args.sizes = [int(size) for size in args.sizes.split(",")]
    args.only = set(args.only.split(","))
    if args.reps < 3 or not args.only <= set(ROWS):
        parser.error(f"--reps must be at least 3, and --only name rows of {','.join(ROWS)}")
    if args.profile:
        from _floor_profile import profile_all

        return asyncio.run(profile_all(args.runs, args.turns))
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
