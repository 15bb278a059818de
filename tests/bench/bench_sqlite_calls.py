"""The SQLite store's own work per unit: its worker thread's CPU, its statements and the WAL frames its commits write.

    python tests/bench/bench_sqlite_calls.py [--src DIR] [--workload frontend|short] [--units 300] [--reps 5]
    python tests/bench/bench_sqlite_calls.py --before DIR [--rounds 8] [--workload ...] [--units 300] [--reps 3]
    valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \\
        python tests/bench/bench_sqlite_calls.py --src DIR --units N --reps 1 --quiet

First the adapter of `--src` (a directory: `git archive C adapter schema_tools tests/bench | tar -x -C DIR`; by
default this checkout) runs the workload in this process (`_floor_profile`'s bed: `frontend` is a frontend tool's
round trip, `short` one new run of a short reply), and the store calls of its last unit are recorded. Then those
calls are replayed through the public methods of a fresh `SQLiteStore`, `--units` times, each unit on a thread id
of its own, so the store does exactly the work of the engine's calls and nothing else runs:

- the worker thread's CPU per unit in the calls (`time.thread_time` around each call on the thread), the median of
  `--reps`, and the whole thread's (`schedstat`: its waits for calls and its answers to the loop too);
- SQL statements per unit (the connection's trace callback);
- WAL frames per unit: a pass with the automatic checkpoint off, the WAL file's growth over the units (a frame is
  a page and its 24-byte header), and the frames each call's commit wrote.

With `--before DIR`, this checkout (or `--src`) and DIR alternate, each round a process of each, and the paired
ratios of their worker CPU are printed with their spread: the CPU of one process drifts between processes more
than a cut moves it, so only pairs are compared. Under valgrind (instructions, every thread), the replay's own cost
is the difference of `--units N` and `--units 0` over `--reps` × N (`--quiet` skips the frames' pass).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

WARM = 300
"""Units replayed before each measured pass: the tables hold some hundreds of threads, their trees a few levels."""
CALLS = ("load", "find_message", "save", "save_and_append", "append_events", "read_events", "request_stop")
Recorded = tuple[str, tuple[Any, ...], dict[str, Any]]


async def record(workload: str, directory: str) -> list[Recorded]:
    """The store calls of the workload's last unit, in order (the thread id first in each)."""
    import _floor_profile as bed_of

    bed = bed_of.bed(directory)
    work = {"frontend": bed_of.frontend, "short": short}[workload]
    probe = bed_of.Probe()
    calls: list[Recorded] = []
    for name in CALLS:
        method = getattr(bed.store, name, None)
        if method is not None:
            setattr(bed.store, name, _recording(calls, name, method))
    for _ in range(3):
        calls.clear()
        await work(bed, probe)
    await bed.adapter.aclose()
    return list(calls)


async def short(bed: Any, probe: Any) -> None:
    import _floor_profile as bed_of
    from _server import SHORT_PROMPT

    user = {"id": bed_of._id("user"), "role": "user", "content": SHORT_PROMPT}
    async with probe.measured():
        bed_of._finished(await bed.client.post(bed_of._run_input(bed_of._id("thread"), [user]), probe), "success")
        await bed.settle()


def _recording(calls: list[Recorded], name: str, method: Any) -> Any:
    async def recorded(*args: Any, **kwargs: Any) -> Any:
        calls.append((name, args, kwargs))
        return await method(*args, **kwargs)

    return recorded


class Meter:
    """A replay store's worker thread, measured: CPU seconds, statements, the WAL's frames by call."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.cpu = 0.0
        self.statements = 0
        self.frames: Counter[str] = Counter()
        self.checkpoints = True
        guarded = store._guarded

        def measured(function: Any, *args: Any) -> Any:
            wal = store._path + "-wal"
            size = os.path.getsize(wal) if not self.checkpoints and os.path.exists(wal) else 0
            started = time.thread_time()
            try:
                return guarded(function, *args)
            finally:
                self.cpu += time.thread_time() - started
                if not self.checkpoints:
                    grown = os.path.getsize(wal) - size
                    self.frames[function.__name__] += grown // (4096 + 24)

        store._guarded = measured

    async def connect(self, checkpoints: bool) -> None:
        def traced() -> None:
            connection = self.store._connect()
            connection.set_trace_callback(self._count)
            if not checkpoints:
                connection.execute("PRAGMA wal_autocheckpoint = 0")

        self.checkpoints = checkpoints
        await self.store._call("the meter", traced)

    def _count(self, sql: str) -> None:
        self.statements += 1


def ran(store: Any) -> float:
    """The worker thread's CPU seconds so far, its waits for calls and its answers to the loop included."""
    thread = store._worker._thread
    return int(Path(f"/proc/self/task/{thread.native_id}/schedstat").read_text().split()[0]) / 1e9


async def replay(calls: list[Recorded], store: Any, units: int, prefix: str, busy: bool = False) -> None:
    spinning = asyncio.create_task(spin()) if busy else None
    try:
        await _replay(calls, store, units, prefix)
    finally:
        if spinning is not None:
            spinning.cancel()


async def spin() -> None:
    """The engine's share of the loop, roughly: Python work in slices, so the store's thread meets a held GIL."""
    while True:
        total = 0
        for number in range(2_000):  # some 50 us of bytecode
            total += number * number
        await asyncio.sleep(0)


async def _replay(calls: list[Recorded], store: Any, units: int, prefix: str) -> None:
    for _ in range(units):
        thread_id = f"{prefix}-{uuid.uuid4()}"  # random, as clients' ids are: a new thread lands anywhere in a key
        for name, args, kwargs in calls:
            await getattr(store, name)(thread_id, *args[1:], **kwargs)


async def measure(
    calls: list[Recorded], directory: str, units: int, reps: int, *, frames: bool, busy: bool
) -> dict[str, Any]:
    from adapter.stores import SQLiteStore

    cpu: list[float] = []
    whole: list[float] = []
    statements = 0
    for rep in range(reps):
        store = SQLiteStore(str(Path(directory, f"cpu-{rep}.db")))
        meter = Meter(store)
        await meter.connect(checkpoints=True)
        await replay(calls, store, WARM, "warm")
        meter.cpu, meter.statements = 0.0, 0
        started = ran(store)
        await replay(calls, store, units, "unit", busy)
        whole.append((ran(store) - started) / max(units, 1))
        cpu.append(meter.cpu / max(units, 1))
        statements = meter.statements
        await store.close()
    meter.frames.clear()
    if frames:
        store = SQLiteStore(str(Path(directory, "frames.db")))
        meter = Meter(store)
        await meter.connect(checkpoints=False)
        await replay(calls, store, WARM, "warm")
        meter.frames.clear()
        await replay(calls, store, units, "unit")
        await store.close()
    per_unit = max(units, 1)
    return {
        "cpu_us": [round(1e6 * c, 1) for c in cpu],
        "thread_us": [round(1e6 * c, 1) for c in whole],
        "statements": statements / per_unit,
        "frames": {name: round(count / per_unit, 2) for name, count in meter.frames.items()},
        "frames_total": round(sum(meter.frames.values()) / per_unit, 2),
    }


def compare(options: argparse.Namespace) -> None:
    """Both checkouts in alternating processes; the paired ratios of their worker CPU (after over before)."""
    sides = {"after": os.path.abspath(options.src), "before": os.path.abspath(options.before)}
    figures: dict[str, list[dict[str, Any]]] = {side: [] for side in sides}
    for round_ in range(options.rounds):
        order = list(sides) if round_ % 2 == 0 else list(sides)[::-1]
        for side in order:
            command = [sys.executable, __file__, "--src", sides[side], "--workload", options.workload, "--json"]
            command += ["--units", str(options.units), "--reps", str(options.reps)] + ["--busy"] * options.busy
            output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
            figures[side].append(json.loads(output.splitlines()[-1]))
    cpu = {side: [statistics.median(f["cpu_us"]) for f in figures[side]] for side in sides}
    ratios = sorted(a / b for a, b in zip(cpu["after"], cpu["before"], strict=True))
    quartiles = statistics.quantiles(ratios, n=4)
    for side in sides:
        last = figures[side][-1]
        print(
            f"{side} ({sides[side]}): worker CPU per unit median {statistics.median(cpu[side]):.1f} us, "
            f"statements {last['statements']:.1f}, WAL frames {last['frames_total']} {last['frames']}"
        )
    print(
        f"{options.workload}: after / before, paired median {statistics.median(ratios):.3f} "
        f"({quartiles[0]:.3f}-{quartiles[2]:.3f}), {options.rounds} rounds; load {os.getloadavg()[0]:.1f}"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", default=str(Path(__file__).resolve().parents[2]))
    parser.add_argument("--workload", choices=("frontend", "short"), default="frontend")
    parser.add_argument("--units", type=int, default=300)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--quiet", action="store_true", help="measure, print nothing (under valgrind)")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON line")
    parser.add_argument("--busy", action="store_true", help="keep the loop busy meanwhile, as the engine would")
    parser.add_argument("--before", help="a checkout to compare with, in alternating processes")
    parser.add_argument("--rounds", type=int, default=8)
    options = parser.parse_args()
    if options.before:
        compare(options)
        return
    source = os.path.abspath(options.src)
    sys.path[:0] = [source, os.path.join(source, "tests", "bench")]
    import adapter

    if not adapter.__file__ or not adapter.__file__.startswith(source):
        raise SystemExit(f"the adapter of {source} did not load ({adapter.__file__})")
    with tempfile.TemporaryDirectory(prefix="agui-sqlite-calls-") as directory:
        calls = await record(options.workload, directory)
        result = await measure(
            calls, directory, options.units, options.reps, frames=not options.quiet, busy=options.busy
        )
    if options.quiet:
        return
    if options.json:
        print(json.dumps(result))
        return
    print(f"{options.workload} from {source}: {len(calls)} calls a unit ({', '.join(c[0] for c in calls)})")
    print(f"  worker CPU per unit, us: median {statistics.median(result['cpu_us']):.1f} of {result['cpu_us']}")
    print(f"  the whole worker thread, us: median {statistics.median(result['thread_us']):.1f}")
    print(f"  statements per unit: {result['statements']:.1f}")
    print(f"  WAL frames per unit: {result['frames_total']} {result['frames']}")
    print(f"  load average: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    asyncio.run(main())
