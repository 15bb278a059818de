"""The event loop's iterations per unit of work, and what runs in each: where a run's hand-offs cost a loop turn.

    python tests/bench/bench_loop.py [--workload frontend|fixed|stream] [--units 20] [--list 1] [--http]
                                     [--src DIR]

Counts, per unit (a frontend round trip: two requests; a fixed run: one of 100 concurrent runs of 50 deltas; one
stream of 2,000 deltas), the loop's iterations (`_run_once`: each an `epoll_wait` and the loop's bookkeeping), the
callbacks they run, the tasks started and the timers set. `--list N` prints the last N units' iterations one by
one: each callback, and for a task's step the coroutine and where it was suspended, so a chain of hand-offs (a
task that wakes another, which wakes a third) shows as one iteration each.

In process (the default): `_floor_profile`'s bed, the ASGI app driven directly (no socket). `--http`: the
adapter's bench server (`_server.adapter_app`) under uvicorn on this process's loop, the client in a thread of
its own (its loop is not counted), as `bench_floor.py` serves it. Tasks are made `asyncio.tasks._PyTask` (the
Python implementation, so that a step names its task): the same scheduling as the C task, slower, so only the
counts mean anything here, not the time. `--src DIR`: the adapter of another checkout (`git archive C adapter
schema_tools tests/bench | tar -x -C DIR`).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import CoroutineType, FrameType
from typing import Any


@dataclass
class Trace:
    """What the loop ran while on: one list of callbacks per iteration."""

    on: bool = False
    iterations: list[list[str]] = field(default_factory=list)
    tasks: Counter[str] = field(default_factory=Counter)
    timers: Counter[str] = field(default_factory=Counter)


TRACE = Trace()
ROOT = str(Path(__file__).resolve().parents[2]) + os.sep


def _where(frame: FrameType | None) -> str:
    if frame is None:
        return "?"
    file = frame.f_code.co_filename
    for prefix in (ROOT, *sys.path[:3]):
        if prefix and file.startswith(prefix):
            file = file[len(prefix) :].lstrip(os.sep)
            break
    else:
        file = file.rsplit(os.sep, 2)[-2] + os.sep + file.rsplit(os.sep, 1)[-1] if os.sep in file else file
    return f"{file}:{frame.f_lineno} {frame.f_code.co_name}"


def _suspended(coro: Any) -> str:
    """The innermost frame a coroutine waits in (walking `cr_await` through coroutines and async generators)."""
    frame = None
    while coro is not None:
        inner = getattr(coro, "cr_frame", None) or getattr(coro, "ag_frame", None) or getattr(coro, "gi_frame", None)
        if inner is None:
            break
        frame = inner
        coro = getattr(coro, "cr_await", None) or getattr(coro, "ag_await", None) or getattr(coro, "gi_yieldfrom", None)
    return _where(frame)


def _describe(callback: Any) -> str:
    owner = getattr(callback, "__self__", None)
    if isinstance(owner, asyncio.Task | asyncio.tasks._PyTask):  # type: ignore[attr-defined]
        coro = owner.get_coro()
        name = getattr(coro, "__qualname__", type(coro).__name__) if isinstance(coro, CoroutineType) else repr(coro)
        what = "step" if "step" in getattr(callback, "__name__", "") else "wakeup"
        return f"task {name} {what} from {_suspended(coro)}"
    name = getattr(callback, "__qualname__", None) or repr(callback)
    if owner is not None and not name.startswith(type(owner).__name__):
        name = f"{type(owner).__name__}.{name}"
    return name


def install(loop: asyncio.AbstractEventLoop) -> None:
    """Count the loop's iterations, callbacks, tasks and timers while `TRACE.on`."""
    run_once = loop._run_once  # type: ignore[attr-defined]
    call_at = loop.call_at

    def counted_run_once() -> None:
        if TRACE.on:
            TRACE.iterations.append([])
        run_once()

    original_run = asyncio.events.Handle._run

    def run(handle: asyncio.Handle) -> None:
        if TRACE.on and TRACE.iterations:
            TRACE.iterations[-1].append(_describe(handle._callback))  # type: ignore[attr-defined]
        original_run(handle)

    def task(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Future[Any]:
        if TRACE.on:
            TRACE.tasks[getattr(coro, "__qualname__", repr(coro))] += 1
        made: asyncio.Future[Any] = asyncio.tasks._PyTask(coro, loop=loop, **kwargs)  # type: ignore[attr-defined]
        return made

    def timer(when: float, callback: Any, *args: Any, **kwargs: Any) -> asyncio.TimerHandle:
        if TRACE.on:
            TRACE.timers[_describe(callback)] += 1
        return call_at(when, callback, *args, **kwargs)

    loop._run_once = counted_run_once  # type: ignore[attr-defined]
    loop.call_at = timer  # type: ignore[method-assign,assignment]
    loop.set_task_factory(task)
    asyncio.events.Handle._run = run  # type: ignore[method-assign,assignment]


@dataclass
class Unit:
    iterations: list[list[str]]
    tasks: Counter[str]
    timers: Counter[str]


async def _units(work: Callable[[], Awaitable[None]], count: int, warm: int = 3) -> list[Unit]:
    for _ in range(warm):
        await work()
    units = []
    for _ in range(count):
        TRACE.iterations, TRACE.tasks, TRACE.timers = [], Counter(), Counter()
        TRACE.on = True
        await work()
        TRACE.on = False
        units.append(Unit(TRACE.iterations, TRACE.tasks, TRACE.timers))
    return units


async def in_process(workload: str, count: int) -> list[Unit]:
    import _floor_profile as bed_of

    iteration = {"frontend": bed_of.frontend, "fixed": bed_of.concurrent, "stream": bed_of.one_stream}[workload]
    with tempfile.TemporaryDirectory(prefix="agui-loop-") as directory:
        bed = bed_of.bed(directory)
        probe = bed_of.Probe()
        try:
            return await _units(lambda: iteration(bed, probe), count)
        finally:
            await bed.adapter.aclose()


async def over_http(workload: str, count: int) -> list[Unit]:
    import socket

    import httpx
    import uvicorn
    from _server import (
        KEEP_ALIVE_SECONDS,
        MOUNT,
        NAVIGATE,
        ROUND_TRIP_PROMPT,
        SHORT_PROMPT,
        STREAM_PROMPT,
        adapter_app,
        events_of,
        new_id,
        outcome_of,
        run_input,
    )

    if workload == "fixed":
        raise SystemExit("--http counts the frontend and stream workloads (one client thread, one request at a time)")
    with tempfile.TemporaryDirectory(prefix="agui-loop-") as directory:
        app = adapter_app(str(Path(directory, "loop.db")))
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
        config.timeout_keep_alive = KEEP_ALIVE_SECONDS
        server = uvicorn.Server(config)
        serving = asyncio.ensure_future(server.serve(sockets=[sock]))
        while not server.started:
            await asyncio.sleep(0.01)
        client = httpx.Client(base_url=url, timeout=30.0, trust_env=False)
        headers = {"content-type": "application/json", "accept": "text/event-stream"}

        def post(body: dict[str, Any]) -> list[dict[str, Any]]:
            import json

            response = client.post(f"{MOUNT}/", content=json.dumps(body).encode(), headers=headers)
            response.raise_for_status()
            return events_of(response.content)

        def round_trip() -> None:
            user = {"id": new_id("user"), "role": "user", "content": ROUND_TRIP_PROMPT}
            thread = new_id("thread")
            first = post(run_input(thread, [user], tools=[NAVIGATE]))
            (interrupt,) = outcome_of(first)["interrupts"]
            snapshot = [e for e in first if e["type"] == "MESSAGES_SNAPSHOT"][-1]["messages"]
            entry = {"interruptId": interrupt["id"], "status": "resolved", "payload": {"navigated": True}}
            outcome_of(post(run_input(thread, snapshot, tools=[NAVIGATE], resume=[entry])))

        def stream() -> None:
            user = {"id": new_id("user"), "role": "user", "content": STREAM_PROMPT}
            outcome_of(post(run_input(new_id("thread"), [user])))

        del SHORT_PROMPT
        unit = {"frontend": round_trip, "stream": stream}[workload]

        async def work() -> None:
            done = asyncio.get_running_loop().create_future()

            def client_side() -> None:
                try:
                    unit()
                except BaseException as exc:
                    done.get_loop().call_soon_threadsafe(done.set_exception, exc)
                else:
                    done.get_loop().call_soon_threadsafe(done.set_result, None)

            threading.Thread(target=client_side).start()
            await done

        try:
            # The thread's start and its answer cost the loop a wake each: counted, and named `done`'s.
            return await _units(work, count)
        finally:
            client.close()
            server.should_exit = True
            await serving


def report(units: list[Unit], listed: int) -> None:
    for number, unit in enumerate(units[-listed:] if listed else [], start=len(units) - listed + 1):
        print(f"--- unit {number}: {len(unit.iterations)} iterations")
        for index, callbacks in enumerate(unit.iterations, start=1):
            print(f"{index:3d} " + ("\n    ".join(callbacks) if callbacks else "(nothing ran: a wake or a timeout)"))
    count = len(units)
    lengths = sorted(len(unit.iterations) for unit in units)
    tasks: Counter[str] = sum((unit.tasks for unit in units), Counter())
    timers: Counter[str] = sum((unit.timers for unit in units), Counter())
    ran = sum(len(callbacks) for unit in units for callbacks in unit.iterations)
    print(f"\nper unit, {count} units: iterations median {lengths[count // 2]} (min {lengths[0]}, max {lengths[-1]})")
    print(f"  callbacks {ran / count:.1f}, tasks {tasks.total() / count:.2f}, timers {timers.total() / count:.2f}")
    print("  tasks: " + ", ".join(f"{name} {n / count:.2f}" for name, n in tasks.most_common()))
    print("  timers: " + ", ".join(f"{name} {n / count:.2f}" for name, n in timers.most_common()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--workload", choices=("frontend", "fixed", "stream"), default="frontend")
    parser.add_argument("--units", type=int, default=20)
    parser.add_argument("--list", type=int, default=0, help="print the last N units' iterations one by one")
    parser.add_argument("--http", action="store_true", help="over HTTP: uvicorn in this process, the client a thread")
    parser.add_argument("--src", help="the adapter of another checkout (a directory)")
    args = parser.parse_args()
    if args.src:
        sys.path[:0] = [args.src, os.path.join(args.src, "tests", "bench")]
    else:
        sys.path.insert(0, str(Path(__file__).parent))
    import adapter

    print(f"adapter: {adapter.__file__}")

    async def main_async() -> list[Unit]:
        install(asyncio.get_running_loop())
        return await (over_http if args.http else in_process)(args.workload, args.units)

    report(asyncio.run(main_async()), args.list)


if __name__ == "__main__":
    main()
