"""One change, before and after, in process: two checkouts' adapters on one workload, in alternating rounds.

    python tests/bench/bench_ab.py --before COMMIT_OR_DIR [--after COMMIT_OR_DIR]
                                   [--workload frontend|fixed|stream|resume] [--rounds 15] [--units 20]

Each side is a process of its own (this script as `child`), importing the adapter of its checkout: `--after` (this
one by default) and `--before`, each a directory as it is, or a commit of this repository exported with
`git archive` to a temp dir: `--before C~1 --after C` measures the commit C alone. Each
drives `_floor_profile`'s workload on the ASGI app directly (no socket, no HTTP parser, the same SQLiteStore bed as
`bench_floor.py --profile`), so a change of a few percent of the engine's own work is not lost in what the HTTP
benchmarks add around it. A round is `--units` units on each side in turn, each side's figure the median CPU of a
unit (every thread of its process); after one round to warm up, the medians of `--rounds` rounds, and the spread
of the rounds' after/before ratios (25th, 50th and 75th percentile: on a loaded machine the paired median is the
steadier figure, each round's two sides having run under the same load).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import IO

from _server import SOURCE
from bench_floor import checkout

WORKLOADS = ("frontend", "fixed", "stream", "resume")
RESUMED_TURNS = 1000  # the resume workload's prior turns, as `bench_floor.py --profile`'s resume row


async def child() -> None:
    """Serve rounds read from stdin (`WORKLOAD UNITS`): print the median CPU ms of a unit for each."""
    import _floor_profile as bed_of

    import adapter

    work = {
        "frontend": bed_of.frontend,
        "fixed": bed_of.concurrent,
        "stream": bed_of.one_stream,
        "resume": bed_of.resumed(RESUMED_TURNS),  # the resume alone: its first run is not measured
    }
    with tempfile.TemporaryDirectory(prefix="agui-ab-") as directory:
        bed = bed_of.bed(directory)
        print("ready", adapter.__file__, flush=True)
        for line in sys.stdin:
            name, units = line.split()
            probe = bed_of.Probe()
            for _ in range(int(units)):
                await work[name](bed, probe)
            print(1000 * statistics.median(probe.cpu), flush=True)
        await bed.adapter.aclose()


class Side:
    """One checkout's adapter in a child process."""

    def __init__(self, src: Path) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), str(Path(__file__).parent)])}
        command = [sys.executable, __file__, "child"]
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        ready, _, imported = self._stdout().readline().strip().partition(" ")
        if ready != "ready" or not Path(imported).is_relative_to(src.resolve()):
            raise RuntimeError(f"the adapter of {src} did not start (imported: {imported or 'nothing'})")

    def _stdout(self) -> IO[str]:
        assert self.process.stdout is not None
        return self.process.stdout

    def round(self, workload: str, units: int) -> float:
        assert self.process.stdin is not None
        self.process.stdin.write(f"{workload} {units}\n")
        self.process.stdin.flush()
        return float(self._stdout().readline())

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=60)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--before", required=True, help="the other adapter: a commit or a checkout's directory")
    parser.add_argument("--after", help="this adapter instead of this checkout's: a commit or a directory")
    parser.add_argument("--workload", choices=WORKLOADS, default="frontend")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--units", type=int, default=20, help="units of the workload per side and round")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="agui-ab-src-") as tmp:
        later = checkout(args.after, tmp, "after") if args.after else SOURCE
        sides = {"after": Side(later), "before": Side(checkout(args.before, tmp, "before"))}
        try:
            for side in sides.values():
                side.round(args.workload, args.units)
            figures: dict[str, list[float]] = {name: [] for name in sides}
            for _ in range(args.rounds):
                for name, side in sides.items():
                    figures[name].append(side.round(args.workload, args.units))
        finally:
            for side in sides.values():
                side.close()
    after, before = statistics.median(figures["after"]), statistics.median(figures["before"])
    ratios = statistics.quantiles([a / b for a, b in zip(figures["after"], figures["before"], strict=True)], n=4)
    print(
        f"{args.workload}: after {after:.3f} ms, before {before:.3f} ms CPU per unit: {after / before:.3f}x "
        f"(rounds {ratios[0]:.3f}-{ratios[2]:.3f}, median {ratios[1]:.3f}); load average {os.getloadavg()[0]:.2f}"
    )
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["child"]:
        asyncio.run(child())
    else:
        sys.exit(main())
