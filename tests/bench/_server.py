"""The servers the benchmarks compare, each run in its own process: `python _server.py KIND ...`.

- `adapter`: the adapter under test, mounted at /agui, on a ScriptedBackend and a SQLiteStore.
- `baseline`: a bare Starlette endpoint at /agui/ that parses the `RunAgentInput`, then replays the
  adapter's own captured event lists through `ag_ui.encoder.EventEncoder` in a `StreamingResponse`.
  Each event object is built per request from its captured JSON, as a real endpoint builds its events.
- `journal`: the durable-journal floor, the baseline plus the least store work the adapter's guarantees need, on
  SQLite (`_journal_floor.py`).

Both apps get the same bench-only routes: `GET /__cpu` answers the process's CPU seconds
(`time.process_time()`, every thread), `GET /__rss` its peak resident set in kB (VmHWM),
`GET /__gc` the cyclic garbage collector's collections of each generation since the process started and their CPU
seconds (the collecting thread's), `GET /__threads` the name of each live thread by its native id (`bench_threads.py`
reads each one's CPU), `POST /__profile/start` and `/__profile/stop` switch cProfile on the event loop's thread on
and off (stop writes the stats to `--profile-out`).

The child binds 127.0.0.1 port 0 itself and prints `PORT <n>` on stdout once it listens. The
benchmarks start it through `Server`, below with the other client-side helpers they share.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import gc
import json
import os
import select
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import uvicorn
from ag_ui.core import Event, RunAgentInput
from ag_ui.encoder import EventEncoder
from pydantic import TypeAdapter
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Mount, Route

KEEP_ALIVE_SECONDS = 75  # as examples/serving.py: longer than any client pool keeps an idle connection

WORDS = 2_000
STREAM_TEXT = " ".join(f"w{i}" for i in range(WORDS))
"""The reply of workload A: split into one delta per word by the ScriptedBackend."""
STREAM_PROMPT = "stream please"
ROUND_TRIP_PROMPT = "go to orders"
SHORT_PROMPT = "fifty please"
SHORT_TEXT = " ".join(f"d{i}" for i in range(50))
"""The reply of the fixed-cost workload: 50 deltas."""
KIND_HEADER = "x-bench-kind"
"""Names the captured event list the baseline replays, where the input alone does not tell."""
NAVIGATE = {
    "name": "navigate",
    "description": "The client's page navigation.",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
}
"""The client-declared frontend tool of workload B."""
MOUNT = "/agui"
MAX_BODY = 64 * 1024 * 1024

_EVENT: TypeAdapter[Any] = TypeAdapter(Event)


def adapter_app(db_path: str | None, *, journal: bool = True) -> Starlette:
    import adapter as package
    from adapter import Adapter, create_app
    from adapter.backends import Call, Rule, ScriptedBackend
    from adapter.stores import TurnStore

    backend = ScriptedBackend(
        [
            Rule(rf"^{STREAM_PROMPT}$", reply=STREAM_TEXT),
            Rule(rf"^{SHORT_PROMPT}$", reply=SHORT_TEXT),
            Rule(r"go to (\w+)", steps=[[Call("navigate", {"path": "/{1}"})]], reply="Opened it."),
        ],
        # The scripted backend records requests for tests; a long benchmark would keep their histories alive,
        # and the garbage collector's passes over that heap would be charged to the adapter.
        keep_requests=1,
    )
    # Only the store it serves is imported, as an app on one database imports it (the doors defer the others).
    store: TurnStore
    if db_path is None:
        from adapter.stores import MemoryStore

        store = MemoryStore()
    elif db_path.startswith("postgresql://"):
        from adapter.stores import PostgresStore

        store = PostgresStore(db_path)
    else:
        from adapter.stores import SQLiteStore

        store = SQLiteStore(db_path)
    if not journal:
        store = _without_journals(store)
    # The workloads answer with a resume; bodies of the 10,000-turn growth workload are several MB.
    if hasattr(package, "Limits"):
        adapter = Adapter(
            backend, store=store, frontend_outcome="interrupt", limits=package.Limits(max_body_bytes=MAX_BODY)
        )
        app = create_app(adapter)
    else:  # a checkout from before `Limits` (`--before`): the body's bound was create_app's own option
        adapter = Adapter(backend, store=store, frontend_outcome="interrupt")
        app = create_app(adapter, max_body_bytes=MAX_BODY)  # type: ignore[call-arg]
    return _with_bench_routes(Mount(MOUNT, app=app), on_shutdown=adapter.aclose)


def _without_journals(store: Any) -> Any:
    """The same store, but the adapter finds no journal in it (`append_events` is not callable), so it keeps none:
    runs are driven and numbered alike, and nothing is written to the journal (bench_journal.py's "without")."""

    class Unjournaled(type(store)):  # type: ignore[misc]
        append_events = None

    store.__class__ = Unjournaled
    return store


def _kind_of(request: Request, run_input: RunAgentInput) -> str:
    """The captured event list a floor replays for this request."""
    return request.headers.get(KIND_HEADER) or (
        "resume" if run_input.resume else "interrupt" if run_input.tools else "stream"
    )


def baseline_app(events_path: str) -> Starlette:
    captured: dict[str, list[dict[str, Any]]] = json.loads(Path(events_path).read_text())
    encoder = EventEncoder()

    async def replay(events: list[dict[str, Any]]) -> AsyncIterator[str]:
        for event in events:
            yield encoder.encode(_EVENT.validate_python(event))

    async def run(request: Request) -> Response:
        run_input = RunAgentInput.model_validate_json(await request.body())
        kind = _kind_of(request, run_input)
        headers = {"cache-control": "no-store", "x-accel-buffering": "no"}
        return StreamingResponse(replay(captured[kind]), media_type=encoder.get_content_type(), headers=headers)

    inner = Starlette(routes=[Route("/", run, methods=["POST"])])
    return _with_bench_routes(Mount(MOUNT, app=inner))


def journal_app(db_path: str, events_path: str) -> Starlette:
    from _journal_floor import journal_floor_app

    inner, close = journal_floor_app(db_path, events_path, _kind_of)
    return _with_bench_routes(Mount(MOUNT, app=inner), on_shutdown=close)


class _Collections:
    """Counts the collector's collections of each generation, and the CPU seconds of the thread that made them."""

    def __init__(self) -> None:
        self.counts = {f"gen{generation} {what}": 0.0 for generation in range(3) for what in ("collections", "seconds")}
        self.started = 0.0
        gc.callbacks.append(self.collected)

    def collected(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self.started = time.thread_time()
            return
        self.counts[f"gen{info['generation']} collections"] += 1
        self.counts[f"gen{info['generation']} seconds"] += time.thread_time() - self.started


def _with_bench_routes(mount: BaseRoute, on_shutdown: Any = None) -> Starlette:
    profilers: list[cProfile.Profile] = []
    collections = _Collections()

    async def cpu(request: Request) -> Response:
        return PlainTextResponse(repr(time.process_time()))

    async def rss(request: Request) -> Response:
        status = Path("/proc/self/status").read_text()
        peak = next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:"))
        return PlainTextResponse(peak)  # kB

    async def collected(request: Request) -> Response:
        return PlainTextResponse(json.dumps(collections.counts))

    async def threads(request: Request) -> Response:
        return PlainTextResponse(json.dumps({thread.native_id: thread.name for thread in threading.enumerate()}))

    async def profile_start(request: Request) -> Response:
        profilers.append(cProfile.Profile())
        profilers[-1].enable()
        return PlainTextResponse("on")

    async def profile_stop(request: Request) -> Response:
        profiler = profilers.pop()
        profiler.disable()
        profiler.dump_stats(request.app.state.profile_out)
        return PlainTextResponse("off")

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        if on_shutdown is not None:
            await on_shutdown()

    return Starlette(
        routes=[
            Route("/__cpu", cpu),
            Route("/__rss", rss),
            Route("/__gc", collected),
            Route("/__threads", threads),
            Route("/__profile/start", profile_start, methods=["POST"]),
            Route("/__profile/stop", profile_stop, methods=["POST"]),
            mount,
        ],
        lifespan=lifespan,
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Serve one side of the adapter benchmark.")
    parser.add_argument("kind", choices=["adapter", "baseline", "journal"])
    parser.add_argument("--db", help="SQLite file or postgresql:// URL (adapter, journal); a MemoryStore without it")
    parser.add_argument("--events", help="captured event lists, JSON (baseline, journal)")
    parser.add_argument("--profile-out", default="server.pstats")
    parser.add_argument("--no-journal", action="store_true", help="the adapter keeps no run journal (adapter)")
    args = parser.parse_args(argv)
    if args.kind == "adapter":
        app = adapter_app(args.db, journal=not args.no_journal)
    elif args.kind == "journal":
        app = journal_app(args.db, args.events)
    else:
        app = baseline_app(args.events)
    app.state.profile_out = args.profile_out
    # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY only on sockets whose proto says TCP, and without
    # it a response written in two parts waits out the client's delayed ACK (40 ms) on a kept-alive connection.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    server = uvicorn.Server(
        uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on", timeout_keep_alive=KEEP_ALIVE_SECONDS)
    )
    if not os.environ.get("BENCH_NO_FREEZE"):
        # Both sides are served as examples/serving.py serves the adapter: start-up's objects frozen.
        gc.collect()
        gc.freeze()
    asyncio.run(server.serve(sockets=[sock]))


# The client side, shared by the benchmarks: a server in its child process, and the CPU it spends on a piece of work.

_START_TIMEOUT = 30.0
SOURCE = Path(__file__).resolve().parents[2]
_HEADERS = {"content-type": "application/json", "accept": "text/event-stream"}
T = TypeVar("T")


class Server:
    """One benchmark server in a child process (this file, run as a script), reachable over loopback."""

    def __init__(self, kind: str, *options: str, name: str | None = None, src: Path = SOURCE) -> None:
        self.kind = kind
        self.name = name or kind
        """Names this server's samples: two adapters (`bench_growth.py --before`) are told apart by it."""
        # The adapter is imported from `src` (this checkout by default), never from an installed copy.
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), os.environ.get("PYTHONPATH", "")])}
        command = [sys.executable, __file__, kind, *options]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)
        self.url = f"http://127.0.0.1:{self._port()}"
        # httpx only in the client: the servers (this file as a script) hold no client library, the floor none.
        import httpx

        # Idle connections expire before uvicorn's 5 s keep-alive timeout closes them under the client.
        limits = httpx.Limits(keepalive_expiry=2.0)
        self.http = httpx.AsyncClient(base_url=self.url, timeout=30.0, trust_env=False, limits=limits)
        self.probe_ms = 0.0

    def _port(self) -> int:
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], _START_TIMEOUT)
        line = self.process.stdout.readline() if ready else ""
        if not line.startswith("PORT "):
            self.process.kill()
            raise RuntimeError(f"the {self.kind} server did not start: {line!r}")
        return int(line.split()[1])

    async def wait_ready(self) -> None:
        import httpx

        for _ in range(100):
            try:
                await self.cpu()
                return
            except httpx.TransportError:
                await asyncio.sleep(0.05)
        raise RuntimeError(f"the {self.kind} server does not answer")

    async def cpu(self) -> float:
        response = await self.http.get("/__cpu")
        response.raise_for_status()
        return float(response.text)

    async def collections(self) -> dict[str, float]:
        """The collector's collections of each generation since the server started, and their CPU seconds."""
        response = await self.http.get("/__gc")
        response.raise_for_status()
        return dict(json.loads(response.text))

    async def peak_rss_mb(self) -> float:
        """The process's peak resident set (VmHWM), MB."""
        response = await self.http.get("/__rss")
        response.raise_for_status()
        return float(response.text) / 1024

    async def post(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> bytes:
        content = json.dumps(body).encode()
        sent = {**_HEADERS, **(headers or {})}
        async with self.http.stream("POST", f"{MOUNT}/", content=content, headers=sent) as response:
            raw = b"".join([chunk async for chunk in response.aiter_raw()])
        if response.status_code != 200:
            raise RuntimeError(f"{self.kind}: {response.status_code} {raw[:300]!r}")
        return raw

    async def aclose(self) -> None:
        await self.http.aclose()
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)


def thread_cpu_ns(pid: int) -> dict[int, int]:
    """CPU ns by native thread id of process `pid`: the time the scheduler ran each (`schedstat`), user and system."""
    spent: dict[int, int] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            spent[int(task.name)] = int((task / "schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            continue  # a thread that ended meanwhile
    return spent


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def run_input(thread_id: str, messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    body = {"threadId": thread_id, "runId": new_id("run"), "messages": messages, "tools": [], "context": []}
    return {**body, "protocolVersion": "1.0", **extra}


def events_of(raw: bytes) -> list[dict[str, Any]]:
    from adapter.client import parse_sse  # here, as the adapter's imports are: the baseline server runs without it

    return parse_sse(raw).events


def outcome_of(events: list[dict[str, Any]]) -> dict[str, Any]:
    finished = [event for event in events if event["type"] == "RUN_FINISHED"]
    if len(finished) != 1:
        raise RuntimeError(f"expected one RUN_FINISHED, got {[event['type'] for event in events]}")
    outcome: dict[str, Any] = finished[0].get("outcome", {"type": "success"})
    return outcome


@dataclass
class Sample:
    cpu_ms: float
    wall_ms: float


async def cpu_of(server: Server, work: Awaitable[T]) -> tuple[float, T]:
    """The server's CPU ms while `work` runs, less what the two `/__cpu` reads themselves cost; and its result."""
    before = await server.cpu()
    result = await work
    return (await server.cpu() - before) * 1000 - server.probe_ms, result


async def sample(server: Server, work: Callable[[Server], Awaitable[object]]) -> Sample:
    """One measured call of `work`: its server CPU (as `cpu_of`) and its wall time, the `/__cpu` reads left out."""

    async def timed() -> float:
        t0 = time.perf_counter()
        await work(server)
        return time.perf_counter() - t0

    cpu_ms, wall = await cpu_of(server, timed())
    return Sample(cpu_ms, wall * 1000)


async def calibrate(server: Server, reps: int = 20) -> None:
    """Measure the CPU a pair of `/__cpu` reads costs the server, to subtract it from every sample."""
    server.probe_ms = 0.0
    server.probe_ms = statistics.median([(await sample(server, _idle)).cpu_ms for _ in range(reps)])


async def _idle(server: Server) -> None:
    return None


if __name__ == "__main__":
    main()
