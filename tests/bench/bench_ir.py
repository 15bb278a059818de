"""Instructions per unit of `_floor_profile`'s workload, under valgrind: a measure a loaded machine does not move.

    valgrind --tool=cachegrind --cache-sim=no --fair-sched=yes --cachegrind-out-file=/dev/null \\
        python tests/bench/bench_ir.py SRC frontend UNITS

Runs three units to warm up, then UNITS more, with the adapter of the checkout SRC (a directory: `git archive C
adapter schema_tools tests/bench | tar -x -C SRC`). Its `I refs` with UNITS = 0 and with UNITS = N, their difference
over N, is what a unit costs in user-space instructions, every thread's: the kernel's share (a syscall's work, a
thread's wake-up) is not counted, and a unit whose work depends on timing (the fixed workload's batches and polls)
varies more than the round trip does. docs/benchmarks.md gives the figures it measured.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile


async def units(workload: str, count: int) -> None:
    import _floor_profile as bed_of

    work = {"frontend": bed_of.frontend, "fixed": bed_of.concurrent, "stream": bed_of.one_stream}[workload]
    with tempfile.TemporaryDirectory(prefix="agui-ir-") as directory:
        bed = bed_of.bed(directory)
        probe = bed_of.Probe()
        for _ in range(3):
            await work(bed, probe)
        for _ in range(count):
            await work(bed, probe)
        await bed.adapter.aclose()


if __name__ == "__main__":
    source, workload, count = sys.argv[1:]
    sys.path[:0] = [source, os.path.join(source, "tests", "bench")]
    import adapter

    if not adapter.__file__ or not adapter.__file__.startswith(os.path.abspath(source)):
        raise SystemExit(f"the adapter of {source} did not load ({adapter.__file__})")
    asyncio.run(units(workload, int(count)))
