"""The rss row's burst in process: how much memory 100 concurrent runs hold at their peak, and what it is.

    python tests/bench/bench_memory.py [--before COMMIT_OR_DIR] [--reps 5] [--anatomy]

The rss row (`bench_floor.py`) reads a server's peak resident set, which moves by a megabyte or two from process to
process (arenas, the load); the Python heap's peak moves much less. Here the bench's adapter app (`_server.py`, on a
SQLiteStore in a temp dir) serves the fixed workload (100 concurrent runs of 50 deltas, each on a new thread) through
its ASGI interface in this process, no server nor client in between, and `tracemalloc` gives the heap's peak above
what it held before the burst, after a warm-up run. With `--anatomy`, one more burst is traced with its allocations'
stacks, a snapshot taken at each new high (about every 100 KB), and the peak's blocks are told by the innermost
adapter frame that allocated them. `--before` measures another checkout too; each burst runs in a fresh process,
the sides alternating.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import tracemalloc
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_floor import checkout

RUNS = 100
SHORT_PROMPT = "fifty please"  # as _server.SHORT_PROMPT, which this file imports only in its child process

KINDS: list[tuple[str, Callable[[str, int], bool]]] = [
    ("events the model step made (`_run/_translate.py`)", lambda path, line: path == "_run/_translate.py"),
    ("the scripted backend's deltas (held by the step)", lambda path, line: path.startswith("backends/")),
    ("the journal entries' wire JSON (`_wire.py`)", lambda path, line: path == "_wire.py"),
    (
        "the journal: its entries' `JournalEvent`s, `LiveRun` (`_sessions`)",
        lambda path, line: path.startswith("_sessions/"),
    ),
    ("the SSE response (`_edge/_sse.py`)", lambda path, line: path.startswith("_edge/_sse")),
    ("Starlette below the sub-app, per request (`_edge/_http.py`)", lambda path, line: path.startswith("_edge/_http")),
    ("the parsed `RunAgentInput` (`_edge/_input.py`)", lambda path, line: path.startswith("_edge/_input")),
    ("store calls waiting for the SQLite thread (`stores`)", lambda path, line: path.startswith("stores/")),
    ("the run: `Run`, `Step`, the stop's reader, the handle (`_run`, `_thread`)", lambda path, line: True),
]
"""How the peak's blocks are told apart: by the innermost frame of `adapter/` that allocated them, first match."""


def _body() -> bytes:
    message = {"id": uuid.uuid4().hex, "role": "user", "content": SHORT_PROMPT}
    run_input = {"threadId": uuid.uuid4().hex, "runId": uuid.uuid4().hex, "messages": [message]}
    return json.dumps({**run_input, "tools": [], "context": [], "state": {}, "forwardedProps": {}}).encode()


async def post(app: Any, raw: bytes) -> bytes:
    """POST one run input to the ASGI app; its last body chunk (a finished run's ends with RUN_FINISHED)."""
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode())]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},  # as uvicorn's h11 protocol says
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/agui/",
        "raw_path": b"/agui/",
        "root_path": "",
        "query_string": b"",
        "headers": headers,
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
        "state": {},
    }
    asked = False
    ended = asyncio.Event()
    last = [b""]

    async def receive() -> dict[str, Any]:
        nonlocal asked
        if not asked:
            asked = True
            return {"type": "http.request", "body": raw, "more_body": False}
        await ended.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            if message.get("body"):
                last[0] = message["body"]  # the last chunk only: a client that kept every one would be measured too
            if not message.get("more_body"):
                ended.set()

    await app(scope, receive, send)
    return last[0]


async def burst(app: Any) -> None:
    ends = await asyncio.gather(*(post(app, _body()) for _ in range(RUNS)))
    assert all(b"RUN_FINISHED" in end for end in ends), ends[:1]


async def measure(reps: int, anatomy: bool) -> dict[str, Any]:
    """In the child process: the heap's peak above its start, KiB, for each burst; and the peak's anatomy."""
    import _server

    result: dict[str, Any] = {"peaks": [], "anatomy": {}}
    with tempfile.TemporaryDirectory(prefix="agui-memory-") as tmp:
        app = _server.adapter_app(str(Path(tmp, "turns.db")))
        async with app.router.lifespan_context(app):
            await post(app, _body())  # the warm-up: what a first run imports and opens
            for _ in range(reps):
                gc.collect()
                tracemalloc.start()
                start = tracemalloc.get_traced_memory()[0]
                await burst(app)
                result["peaks"].append((tracemalloc.get_traced_memory()[1] - start) / 1024)
                tracemalloc.stop()
            if anatomy:
                result["anatomy"] = await _anatomy(app)
    return result


async def _anatomy(app: Any) -> dict[str, float]:
    gc.collect()
    tracemalloc.start(30)
    before = tracemalloc.take_snapshot()
    peak: list[tracemalloc.Snapshot] = []

    async def watch() -> None:
        high = 0
        while True:
            now = tracemalloc.get_traced_memory()[0]
            if now > high + 100_000:
                high = now
                peak[:] = [tracemalloc.take_snapshot()]
            await asyncio.sleep(0)

    watcher = asyncio.ensure_future(watch())
    await burst(app)
    watcher.cancel()
    tracemalloc.stop()
    kinds: collections.Counter[str] = collections.Counter()
    for stat in peak[0].compare_to(before, "traceback"):
        kinds[_kind(list(stat.traceback))] += stat.size_diff
    return {kind: size / 1024 for kind, size in kinds.most_common()}


def _kind(frames: list[tracemalloc.Frame]) -> str:
    if any("importlib" in frame.filename for frame in frames):
        return "imports"
    for frame in reversed(frames):
        if f"{os.sep}adapter{os.sep}" in frame.filename:
            path = frame.filename.rsplit(f"{os.sep}adapter{os.sep}", 1)[1]
            return next(kind for kind, matches in KINDS if matches(path, frame.lineno))
    return "the harness and the event loop (this file's tasks, the snapshots)"


def run_child(src: Path, reps: int, anatomy: bool) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), os.environ.get("PYTHONPATH", "")])}
    command = [sys.executable, __file__, "--child", "--reps", str(reps), *(["--anatomy"] if anatomy else [])]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True, cwd=Path(__file__).parent)
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--before", help="another checkout (a directory) or a commit of this repository")
    parser.add_argument("--reps", type=int, default=5, help="bursts per side, each in a fresh process")
    parser.add_argument("--anatomy", action="store_true", help="tell the peak's blocks apart by what made them")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(asyncio.run(measure(args.reps, args.anatomy))))
        return 0
    source = Path(__file__).resolve().parents[2]
    with tempfile.TemporaryDirectory(prefix="agui-memory-src-") as tmp:
        sides = {"adapter": source, **({"before": checkout(args.before, tmp)} if args.before else {})}
        # A fresh process per burst, the sides alternating: both meet the same load, and neither the other's leftovers.
        results: dict[str, dict[str, Any]] = {name: {"peaks": [], "anatomy": {}} for name in sides}
        for rep in range(args.reps):
            for name, src in sides.items():
                one = run_child(src, 1, args.anatomy and rep == 0)
                results[name]["peaks"] += one["peaks"]
                results[name]["anatomy"] = results[name]["anatomy"] or one["anatomy"]
    for name, result in results.items():
        peaks = result["peaks"]
        print(
            f"{name}: heap peak above start, {RUNS} concurrent runs: median {statistics.median(peaks):.0f} KiB", end=""
        )
        print(f" ({', '.join(f'{peak:.0f}' for peak in peaks)})")
        for kind, kib in result["anatomy"].items():
            print(f"  {kib:8.0f} KiB  {kind}")
    print(f"(load average {os.getloadavg()[0]:.2f} at the end, on {os.cpu_count()} CPUs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
