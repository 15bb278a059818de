"""Issue 43's rows, each against its floor, in one run: the durable-journal floor and the bare one.

    python tests/bench/bench_floor.py [--reps 7] [--sizes 0,100,1000] [--long 10000] [--only ROWS] [--check]
                                      [--before COMMIT_OR_DIR] [--gc]
    python tests/bench/bench_floor.py --profile [--runs 100] [--turns 1000]

The servers run under uvicorn in processes of their own (`_server.py`), the adapter on a SQLiteStore in a temp
dir; the client is httpx in this process. Two floors replay the events the adapter sent for the same request
(captured first) through `ag_ui.encoder.EventEncoder`, after parsing the `RunAgentInput` with `model_validate_json`:

- the bare floor (`_server.py`'s baseline): nothing more. It stores nothing, so a goal against it would ask for
  durability for free; it is the floor of the rows that measure no store work (streaming, a prior turn, memory).
- the durable-journal floor (`_journal_floor.py`): the same, plus the least store work a server with this
  adapter's guarantees must do, on SQLite the way `SQLiteStore` does it (2 hops for a short run, 4 for a
  frontend-tool round trip). It does not load before a run, claim before a side effect, ask a policy or validate
  schemas: that is the adapter's own work, which the ratios against it measure.

Every row is a ratio of two medians taken in this run, the sides alternating, after a warm-up (the capture). Rows,
and the goals of issue 43:

- stream: one run of 2,000 text deltas; server CPU per 1,000 events, against the bare floor (goal <= 0.5x).
- fixed: 100 concurrent runs of 50 deltas each, new threads; server CPU per run, against the durable-journal floor
  (goal <= 1.0x).
- trip: a frontend tool's call, interrupt, resume entry, answer, on SQLite; server CPU, against the durable-journal
  floor (goal <= 1.3x).
- resume: the resume of that interrupt, the client resending a history of N prior turns; server CPU per prior turn,
  least squares over `--sizes`, against the bare (stateless) floor (goal <= 1.5x). With `--long N`, the same slope
  again with N added, for information.
- new: the new run before that resume, which sends the whole history; CPU per prior turn against the bare floor
  (goal <= 2x).
- rss: a fresh process of each serves the fixed workload once; peak RSS (VmHWM), median of three, against the bare
  floor (goal <= 1.2x); the durable-journal floor's own ratio is printed beside it.

The fixed and trip rows print the ratio against the bare floor too, for information. Each row also prints the
spread of the ratios of the pairs (each adapter sample over its floor's sample beside it: 25th to 75th percentile)
and the 1-minute load average when the row started. With `--before COMMIT_OR_DIR` a second adapter is measured in
the same run against the same floors, so that before and after meet the same load: a directory is a checkout of
another version, anything else a commit of this repository, exported with `git archive` to a temp dir.

With `--gc` each row also prints, for every side, the cyclic garbage collector's collections of each generation per
sample and their CPU ms per sample (the servers' `GET /__gc`, read around each sample, outside its CPU reading).

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
import subprocess
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
GOALS = {"stream": 0.5, "fixed": 1.0, "trip": 1.3, "resume": 1.5, "new": 2.0, "rss": 1.2}
"""Issue 43's goals: the adapter's figure over its floor's, at most."""
JOURNAL, BARE = "journal", "bare"
"""The floors' names: the durable-journal floor and the bare one."""


@dataclass
class Figure:
    """One row: each side's median by name, each adapter's ratios over its floor's sample beside it, the load.

    `adapters` are in bench order (this checkout's, then `--before`'s); `floor` is the side the goal is against.
    """

    label: str
    adapters: list[str]
    medians: dict[str, float]
    pairs: dict[str, list[float]]
    floor: str
    load: float
    goal: float | None = None

    def ratio(self, side: str, floor: str | None = None) -> float:
        return self.medians[side] / self.medians[floor or self.floor]

    @property
    def met(self) -> bool | None:
        return None if self.goal is None else self.ratio(self.adapters[0]) <= self.goal

    def line(self) -> str:
        line = f"{self.label:<56}"
        for side in self.adapters:
            pairs = self.pairs[side]
            quartiles = statistics.quantiles(pairs, n=4) if len(pairs) > 1 else [self.ratio(side)] * 3
            spread = f"{quartiles[0]:.2f}-{quartiles[2]:.2f}"
            line += f" {self.medians[side]:>9.2f} {self.ratio(side):>6.2f}x {spread:>11}"
        for floor in (JOURNAL, BARE):
            line += f" {self.medians[floor]:>9.2f}" if floor in self.medians else f" {'-':>9}"
        verdict = "(info)" if self.goal is None else f"<= {self.goal:.1f}x {'met' if self.met else 'MISSED'}"
        return f"{line}  {self.floor:>7}  {self.load:>5.2f}  {verdict}{self.aside()}"

    def aside(self) -> str:
        """The ratios against the bare floor of a row whose goal is against the durable-journal one, or the
        durable-journal floor's own against the bare one."""
        if BARE not in self.medians or JOURNAL not in self.medians:
            return ""
        if self.floor == BARE:
            return f"  (journal floor: {self.ratio(JOURNAL):.2f}x)"
        return f"  (vs bare: {', '.join(f'{self.ratio(side, BARE):.2f}x' for side in self.adapters)})"


def table(adapters: list[str], figures: list[Figure]) -> str:
    head = f"{'row':<56}" + "".join(f" {name:>9} {'ratio':>7} {'pairs p25-75':>11}" for name in adapters)
    head += f" {JOURNAL:>9} {BARE:>9}  {'vs':>7}  {'load':>5}  goal"
    return "\n".join([head, "-" * (len(head) + 16), *(figure.line() for figure in figures)])


COLLECTED: dict[str, dict[str, list[float]]] = {}
"""With `--gc`: per row label, each side's collector figures summed over the row's samples, and their count."""


async def alternate(
    benches: list[Bench], work: Callable[[Bench], Awaitable[Any]], reps: int, collected: str | None = None
) -> dict[str, list[Any]]:
    """`work` on each side in turn, `reps` times: the samples of each side, by name.

    `collected`: the row's label, to sum each side's collections over its samples in `COLLECTED` (`--gc`).
    """
    samples: dict[str, list[Any]] = {bench.server.name: [] for bench in benches}
    for _ in range(reps):
        for bench in benches:
            if collected is None:
                samples[bench.server.name].append(await work(bench))
                continue
            before = await bench.server.collections()
            samples[bench.server.name].append(await work(bench))
            after = await bench.server.collections()
            sums = COLLECTED.setdefault(collected, {}).setdefault(bench.server.name, [0.0] * 7)
            for generation in range(3):
                for at, key in ((generation, "collections"), (3 + generation, "seconds")):
                    name = f"gen{generation} {key}"
                    sums[at] += after.get(name, 0.0) - before.get(name, 0.0)
            sums[6] += 1
    return samples


def collections_table() -> str:
    """`COLLECTED` per sample: each generation's collections and their CPU ms, each side of each row."""
    head = "".join(f" {f'gen{g}':>6} {'ms':>6}" for g in range(3))
    lines = [f"{'collections per sample':<56} {'side':>9}{head} {'all ms':>7}"]
    for label, sides in COLLECTED.items():
        for side, sums in sides.items():
            n = sums[6]
            cells = "".join(f" {sums[g] / n:>6.2f} {1000 * sums[3 + g] / n:>6.2f}" for g in range(3))
            lines.append(f"{label:<56} {side:>9}{cells} {1000 * sum(sums[3:6]) / n:>7.2f}")
    return "\n".join(lines)


def figure(
    label: str, adapters: list[str], samples: dict[str, list[float]], floor: str, load: float, goal: float | None
) -> Figure:
    """The row of `samples` (one list per side), its ratios against `floor`."""
    pairs = {side: [a / b for a, b in zip(samples[side], samples[floor], strict=True)] for side in adapters}
    medians = {side: statistics.median(values) for side, values in samples.items()}
    return Figure(label, adapters, medians, pairs, floor, load, goal)


async def stream(bench: Bench) -> float:
    cost, raw = await cpu_of(bench.server, stream_run(bench.server))
    return 1000 * float(cost) / len(events_of(raw))


async def full_history(bench: Bench, size: int) -> tuple[float, float]:
    """The CPU ms of a new run whose client sends `size` prior turns and calls its tool, then of its resume, the
    client resending the whole history."""
    sent = [*prior_turns(size), {"id": new_id("user"), "role": "user", "content": ROUND_TRIP_PROMPT}]
    thread = new_id("thread")
    new, first = await cpu_of(bench.server, bench.post(f"new:{size}", _body(thread, sent)))
    body = _resume_body(thread, held_by_client(sent, first), first)
    resume, _ = await cpu_of(bench.server, bench.post(f"resume-full:{size}", body))
    return float(new), float(resume)


async def history_rows(
    benches: list[Bench], adapters: list[str], sizes: list[int], long: int | None, reps: int
) -> list[Figure]:
    """The full-history resume's and new run's slopes per prior turn over `sizes` (then with `long`, for the
    resume), against the bare floor; the resume's ms at each size."""
    load = os.getloadavg()[0]
    everything = [*sizes, *([long] if long else [])]
    at: dict[int, dict[str, list[tuple[float, float]]]] = {}
    for size in everything:
        at[size] = await alternate(benches, lambda b, n=size: full_history(b, n), reps)  # type: ignore[misc]
    names = [bench.server.name for bench in benches]

    def fitted(over: list[int], which: int, label: str, goal: float | None) -> Figure:
        per_rep = {n: [slope(over, [at[s][n][rep][which] for s in over]) for rep in range(reps)] for n in names}
        medians = {n: slope(over, [statistics.median(x[which] for x in at[s][n]) for s in over]) for n in names}
        pairs = {a: [x / y for x, y in zip(per_rep[a], per_rep[BARE], strict=True)] for a in adapters}
        return Figure(label, adapters, medians, pairs, BARE, load, goal)

    listed = ",".join(map(str, sizes))
    rows = [fitted(sizes, 1, f"resume, µs CPU / prior turn, N = {listed}", GOALS["resume"])]
    if long:
        rows.append(fitted(everything, 1, f"resume, µs CPU / prior turn, N = {','.join(map(str, everything))}", None))
    rows.append(fitted(sizes, 0, f"new run, µs CPU / prior turn, N = {listed}", GOALS["new"]))
    for size in everything:
        resumes = {n: [x[1] for x in samples] for n, samples in at[size].items()}
        rows.append(figure(f"resume, ms CPU at {size} turns", adapters, resumes, BARE, load, None))
    return rows


async def measure(benches: list[Bench], args: argparse.Namespace) -> list[Figure]:
    named = {bench.server.name: bench for bench in benches}
    adapters = [name for name in named if name not in (JOURNAL, BARE)]

    def sides(*floors: str) -> list[Bench]:
        return [named[name] for name in [*adapters, *floors]]

    rows: list[Figure] = []
    if "stream" in args.only:
        load = os.getloadavg()[0]
        label = "stream, ms CPU / 1,000 events"
        samples = await alternate(sides(BARE), stream, args.reps, label if args.gc else None)
        rows.append(figure(label, adapters, samples, BARE, load, GOALS["stream"]))
    if "fixed" in args.only:
        load = os.getloadavg()[0]
        label = "fixed, ms CPU / run (100 concurrent x 50 deltas)"
        samples = await alternate(sides(JOURNAL, BARE), fixed, args.reps, label if args.gc else None)
        rows.append(figure(label, adapters, samples, JOURNAL, load, GOALS["fixed"]))
    if "trip" in args.only:
        load = os.getloadavg()[0]
        label = "round trip on SQLite, ms CPU (call, interrupt, resume)"
        samples = await alternate(sides(JOURNAL, BARE), trip, args.reps * 3, label if args.gc else None)
        rows.append(figure(label, adapters, samples, JOURNAL, load, GOALS["trip"]))
    if "resume" in args.only:
        rows += await history_rows(sides(BARE), adapters, args.sizes, args.long or None, args.reps)
    return rows


async def capture(adapter: Bench, args: argparse.Namespace) -> None:
    """Each workload once on an adapter: the event lists the floors replay (the first adapter's), and a warm-up."""
    adapter.captured.setdefault("stream", events_of(await stream_run(adapter.server)))
    await fixed(adapter)
    first, second = await round_trip(adapter.server)
    adapter.captured.setdefault("interrupt", first)
    adapter.captured.setdefault("resume", second)
    for size in [*args.sizes, *([args.long] if args.long else [])]:
        await full_history(adapter, size)


async def memory(starts: list[Callable[[], Server]], captured: dict[str, list[dict[str, Any]]]) -> Figure:
    """Peak RSS of fresh processes after one batch of the fixed workload, three of each side, alternating."""
    load = os.getloadavg()[0]
    samples: dict[str, list[float]] = {}
    for _ in range(3):
        for start in starts:
            server = start()
            try:
                await server.wait_ready()
                await fixed(Bench(server, captured))
                samples.setdefault(server.name, []).append(await server.peak_rss_mb())
            finally:
                await server.aclose()
    adapters = [name for name in samples if name not in (JOURNAL, BARE)]
    return figure("rss, peak MB after 100 concurrent runs", adapters, samples, BARE, load, GOALS["rss"])


def adapters(tmp: str, before: Path | None) -> list[Callable[[], Server]]:
    """How to start each adapter under test, each time on a new SQLite file: this checkout's, and `--before`'s."""
    count = iter(range(1_000_000))

    def start(name: str, src: Path) -> Callable[[], Server]:
        return lambda: Server("adapter", "--db", str(Path(tmp, f"{name}-{next(count)}.db")), name=name, src=src)

    return [start("adapter", SOURCE), *([start("before", before)] if before else [])]


def floors(tmp: str, events: Path) -> list[Callable[[], Server]]:
    """How to start the two floors, replaying `events`: the durable-journal one on a new SQLite file each time."""
    count = iter(range(1_000_000))

    def journal() -> Server:
        return Server(
            "journal", "--db", str(Path(tmp, f"journal-{next(count)}.db")), "--events", str(events), name=JOURNAL
        )

    return [journal, functools.partial(Server, "baseline", "--events", str(events), name=BARE)]


def checkout(source: str, tmp: str, name: str = "before") -> Path:
    """An adapter to measure: a directory as it is, or a commit of this repository exported into `tmp`/`name`."""
    if Path(source).is_dir():
        return Path(source)
    target = Path(tmp, name)
    target.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(SOURCE), "archive", source, "adapter", "schema_tools"], check=True, capture_output=True
    )
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive.stdout, check=True)
    return target


async def main_async(args: argparse.Namespace) -> int:
    captured: dict[str, list[dict[str, Any]]] = {}
    started, loads = time.perf_counter(), os.getloadavg()
    rows: list[Figure] = []
    with tempfile.TemporaryDirectory(prefix="agui-floor-") as tmp:
        starts = adapters(tmp, checkout(args.before, tmp) if args.before else None)
        servers = [start() for start in starts]
        try:
            for server in servers:
                await server.wait_ready()
                await capture(Bench(server, captured), args)
            events = Path(tmp, "events.json")
            events.write_text(json.dumps(captured))
            servers += [start() for start in floors(tmp, events)]
            for server in servers:
                await server.wait_ready()
                await calibrate(server)
            rows = await measure([Bench(server, captured) for server in servers], args)
        finally:
            for server in servers:
                await server.aclose()
        if "rss" in args.only:
            # The floors hold the events they replay: for this row, only the ones they send here.
            only_fixed = Path(tmp, "fixed-events.json")
            only_fixed.write_text(json.dumps({"fixed": captured["fixed"]}))
            rows.append(await memory([*starts, *floors(tmp, only_fixed)], captured))
    print(table([s.name for s in servers if s.name not in (JOURNAL, BARE)], rows))
    if COLLECTED:
        print("\n" + collections_table())
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
    parser.add_argument("--before", help="also measure the adapter of this commit or checkout dir, in the same run")
    parser.add_argument("--gc", action="store_true", help="also print each side's collections per sample and row")
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
