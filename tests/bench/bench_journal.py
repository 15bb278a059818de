"""What journaling a run costs: server CPU per event, the same adapter with and without its run journal.

    python tests/bench/bench_journal.py [--reps 15] [--db sqlite|memory|postgresql://...] [--src DIR] [--check]

Two adapter servers (`_server.py`) on the same kind of store, each in its own process: one journals every
run (the default: each event numbered, kept in memory and appended to the store in batches), the other
keeps no journal (its store offers none, so runs are driven and numbered alike but nothing is written).
Workload: bench_adapter.py's A, one run streaming 2,000 text deltas. Measured: server CPU per 1,000
events (`time.process_time()` of the whole process, every thread, so SQLite's worker too), the median of
`--reps` runs per side, the sides alternating after a warm-up. Target: journaling adds at most 10%.
`--src DIR` measures the adapter of another checkout (a copy of an older `adapter/` package), so that runs
of this one and that one can alternate under the same load.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _server import SOURCE, Server, calibrate, events_of, sample
from bench_adapter import stream_run

TARGET = 1.10


async def main_async(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="agui-bench-journal-") as tmp:

        def db(name: str) -> list[str]:
            if args.db == "memory":
                return []
            return ["--db", args.db if args.db.startswith("postgresql://") else str(Path(tmp, f"{name}.db"))]

        journaled = Server("adapter", *db("journaled"), name="journaled", src=args.src)
        plain = Server("adapter", *db("plain"), "--no-journal", name="plain", src=args.src)
        servers = [journaled, plain]
        try:
            for server in servers:
                await server.wait_ready()
                await calibrate(server)
            events = len(events_of(await stream_run(journaled)))
            for _ in range(3):
                for server in servers:
                    await stream_run(server)
            load, started = os.getloadavg()[0], time.perf_counter()
            cpu: dict[str, list[float]] = {server.name: [] for server in servers}
            for _ in range(args.reps):
                for server in servers:
                    cpu[server.name].append((await sample(server, stream_run)).cpu_ms * 1000 / events)
        finally:
            for server in servers:
                await server.aclose()
    with_journal, without = statistics.median(cpu["journaled"]), statistics.median(cpu["plain"])
    ratio = with_journal / without
    print(f"{'adapter':<22} {'CPU ms / 1,000 events':>22}")
    print(f"{'with its journal':<22} {with_journal:>22.2f}")
    print(f"{'without':<22} {without:>22.2f}")
    print(f"\nratio {ratio:.3f} (target <= {TARGET:.2f}: {'met' if ratio <= TARGET else 'MISSED'})")
    print(
        f"({events} events a run, store {args.db}, adapter from {args.src}; medians of {args.reps} runs per side,"
        " alternating;"
        f" {time.perf_counter() - started:.1f} s; load average before: {load:.2f} on {os.cpu_count()} CPUs)"
    )
    return 1 if args.check and ratio > TARGET else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--reps", type=int, default=15, help="runs measured per side (>= 3)")
    parser.add_argument("--db", default="sqlite", help="sqlite (a temp file), memory, or a postgresql:// URL")
    parser.add_argument("--src", type=Path, default=SOURCE, help="the checkout whose adapter/ is measured")
    parser.add_argument("--check", action="store_true", help="exit 1 when the target is missed")
    args = parser.parse_args(argv)
    if args.reps < 3:
        parser.error("--reps must be at least 3")
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
