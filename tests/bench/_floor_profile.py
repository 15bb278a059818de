"""Where a run's cost goes, in this process: `bench_floor.py --profile`.

Each workload drives the adapter's ASGI app directly (no socket, no HTTP parser, which the floor pays too) on a
SQLiteStore in a temp dir, three times: a warm-up, a pass that reads the process's CPU (every thread), and a pass
under cProfile (the event loop's thread and the store's worker thread) with exact counters. cProfile counts a
coroutine again at each resumption, so what must be counted exactly is counted by wrappers instead, each call
with the adapter frames it came from: the store's calls, the `authorize` policy, schema validation (`validate`,
and `canonical_json`, its cache key), `EngineConfig.tool_schemas`, `View.shown` and the parsed-thread cache.
Large bodies are parsed inline here (the edge parses them on a worker thread), so that the profile sees them.

Workloads: `stream` (one run, 2,000 deltas); `fixed` (100 concurrent runs of 50 deltas); `frontend` (a client
tool's call, interrupt, resume entry, answer); `approval` (an approval-gated tool's call, interrupt, approval with
`editedArgs`, the tool run); `approval-api` (the same, the approval through `Adapter.resume`); `resume-0` and
`resume-N` (only the resume of `frontend`, the client resending N prior turns; their difference per turn is what
a prior turn costs). Then the cost of the pieces the report's recommendations would remove, and the garbage
collector's share of resumes on threads no resume read before, with the parsed-thread cache and without (`churn`,
each in a process of its own).
"""

from __future__ import annotations

import asyncio
import cProfile
import functools
import gc
import importlib
import inspect
import json
import os
import pstats
import re
import sqlite3
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from _growth import held_by_client, prior_turns
from _server import MAX_BODY, NAVIGATE, ROUND_TRIP_PROMPT, SHORT_PROMPT, SHORT_TEXT, STREAM_PROMPT, STREAM_TEXT

import adapter
import schema_tools
from adapter import Adapter, Limits, create_app, tool

# Private on purpose: the profile counts calls of the engine's own pieces (policy, config, parsed threads).
from adapter._run._access import Access, View
from adapter._run._config import EngineConfig
from adapter._thread._cache import ParsedStore
from adapter.backends import Call, Rule, ScriptedBackend
from adapter.client import parse_sse
from adapter.stores import SQLiteStore, ThreadChange

Body = dict[str, Any]
ADAPTER = str(Path(adapter.__file__).parent) + os.sep
SCHEMA_TOOLS = str(Path(schema_tools.__file__).parent) + os.sep
OURS = (ADAPTER, SCHEMA_TOOLS)
ROOT = str(Path(adapter.__file__).parent.parent) + os.sep
PLUMBING = (
    *(f"{os.sep}{package}{os.sep}" for package in ("asyncio", "anyio", "concurrent", "starlette")),
    *("threading.py", "selectors.py", "queue.SimpleQueue", "select.epoll", "_contextvars.Context"),
)
"""What the profile's top lists leave out: the event loop, threads, and Starlette's layers (the floor's too)."""
STORE_CALLS = (
    "load",
    "load_or_create",
    "save",
    "save_and_append",
    "append_events",
    "read_events",
    "find_message",
    "request_stop",
)


class Calls:
    """Exact call counts, by what was called and the adapter frames it was called from."""

    def __init__(self) -> None:
        self.counts: Counter[tuple[str, str]] = Counter()
        self.on = False
        self.installed = False
        self.profile: cProfile.Profile | None = None
        """The event loop's thread's profile while it runs: paused while a call is counted."""

    def record(self, name: str, skip: tuple[str, ...]) -> None:
        if not self.on:
            return
        if self.profile is not None:
            self.profile.disable()  # the counting is not the adapter's work
        self.counts[(name, _site(skip))] += 1
        if self.profile is not None:
            self.profile.enable()

    def wrap(self, owner: Any, attribute: str, name: str, skip: tuple[str, ...]) -> None:
        """Count each call of `owner.attribute` (a function, sync or async) from here on."""
        original = getattr(owner, attribute)
        if inspect.iscoroutinefunction(original):

            @functools.wraps(original)
            async def counted_async(*args: Any, **kwargs: Any) -> Any:
                self.record(name, skip)
                return await original(*args, **kwargs)

            setattr(owner, attribute, counted_async)
        else:

            @functools.wraps(original)
            def counted(*args: Any, **kwargs: Any) -> Any:
                self.record(name, skip)
                return original(*args, **kwargs)

            setattr(owner, attribute, counted)


def _site(skip: tuple[str, ...]) -> str:
    """The first three frames of the adapter (or schema_tools) on the stack outside `skip`, innermost first."""
    chain: list[str] = []
    frame: FrameType | None = sys._getframe(2)
    while frame is not None and len(chain) < 3:
        file = frame.f_code.co_filename
        if file.startswith(OURS) and not file.startswith(skip):
            where = f"{file[len(ROOT) :]}:{frame.f_lineno} {frame.f_code.co_name}"
            if not chain or chain[-1] != where:
                chain.append(where)
        frame = frame.f_back
    return " < ".join(chain) or "(outside the adapter)"


def counting_policy(calls: Calls) -> Callable[[str | None, str | None, Any], bool]:
    """The default `owner_only` policy, each call counted with its action."""
    # Made once: a `Path` built at each call cost 10 us, four times a round trip, charged to the adapter.
    skip = (str(Path(ADAPTER, "_run", "_access.py")),)

    def authorize(principal: str | None, owner: str | None, action: Any) -> bool:
        if calls.on:
            calls.record(f"authorize({action})", skip)
        return owner is None or principal == owner

    return authorize


CALLS = Calls()
"""The one set of counters: the classes' wrappers are installed once per process."""

_TABLE = re.compile(r"\bagui_\w+")


@asynccontextmanager
async def plumbing_counted(loop: asyncio.AbstractEventLoop, store: SQLiteStore) -> AsyncIterator[None]:
    """Count, while on, the tasks the loop starts, its timers, the hops to the store's thread and SQLite's statements.

    Each with where it came from, as `Calls` counts: a task no adapter frame started is one the loop starts itself
    (an async generator the collector finalizes, a callback). SQLite's statements are counted on the store's
    worker thread (the connection's trace callback), by verb and table, without the profile's pause.
    """
    calls, factory = CALLS, loop.get_task_factory()
    call_at, worker = loop.call_at, store._worker
    submit = worker._submit

    def task(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Future[Any]:
        calls.record("asyncio task", ())
        return factory(loop, coro, **kwargs) if factory is not None else asyncio.Task(coro, loop=loop, **kwargs)

    def timer(when: float, callback: Any, *args: Any, **kwargs: Any) -> asyncio.TimerHandle:
        calls.record("asyncio timer", ())
        return call_at(when, callback, *args, **kwargs)

    def submitted(call: Any) -> None:
        calls.record("store thread hop", ())
        submit(call)

    def statement(sql: str) -> None:
        if calls.on:
            words = sql.split(maxsplit=2)
            verb = " ".join(words[:2]) if words[:1] == ["BEGIN"] else words[0] if words else "?"
            table = _TABLE.search(sql)
            calls.counts[(f"SQL {verb} {table.group() if table else ''}".rstrip(), "(the store's thread)")] += 1

    connection: sqlite3.Connection = await store._call("the profile's look", store._connect)
    await store._call("the profile's tracing", connection.set_trace_callback, statement)  # the connection's thread
    loop.set_task_factory(task)
    loop.call_at = timer  # type: ignore[method-assign,assignment]
    worker._submit = submitted  # type: ignore[method-assign]
    try:
        yield
    finally:
        loop.set_task_factory(factory)
        del loop.call_at, worker._submit  # the class's own again
        await store._call("the profile's tracing", connection.set_trace_callback, None)


def instrument(store: SQLiteStore) -> None:
    """Count the store's calls, and (once per process) the pieces issue 32 suspects."""
    calls = CALLS
    stores = (str(Path(ADAPTER, "stores")),)
    for name in STORE_CALLS:
        if hasattr(store, name):  # an older checkout's store (`bench_ab.py --before`) lacks the newer calls
            calls.wrap(store, name, f"store.{name}", stores)
    if calls.installed:
        return
    calls.installed = True
    access = (str(Path(ADAPTER, "_run", "_access.py")),)
    calls.wrap(View, "shown", "View.shown", access)
    calls.wrap(View, "of", "View.of", access)
    calls.wrap(Access, "allows", "Access.allows", access)
    calls.wrap(EngineConfig, "tool_schemas", "EngineConfig.tool_schemas", (str(Path(ADAPTER, "_run", "_config.py")),))
    calls.wrap(ParsedStore, "conversation", "ParsedStore.conversation", (str(Path(ADAPTER, "_thread", "_cache.py")),))
    validate = importlib.import_module("schema_tools._validate")  # imported on first use: here, before it is
    calls.wrap(validate, "validate", "schema_tools validate", (SCHEMA_TOOLS,))
    calls.wrap(validate, "canonical_json", "schema_tools canonical_json", (SCHEMA_TOOLS,))


class Client:
    """Posts run inputs to an ASGI app in this process, as a server hands them over once it has read them."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def post(self, body: Body, probe: Probe) -> list[dict[str, Any]]:
        """The events the app sent; what the client does (encoding the body, parsing the events) is not measured."""
        with probe.outside():
            raw = json.dumps(body).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode())]
        scope = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.4"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": "/",
            "raw_path": b"/",
            "root_path": "",
            "query_string": b"",
            "headers": headers,
            "client": ("127.0.0.1", 50000),
            "server": ("127.0.0.1", 8000),
            "state": {},
        }
        chunks: list[bytes] = []
        status = 0
        asked = False

        async def receive() -> dict[str, Any]:
            nonlocal asked
            if not asked:
                asked = True
                return {"type": "http.request", "body": raw, "more_body": False}
            await asyncio.get_running_loop().create_future()  # the client stays: cancelled when the response ends
            raise AssertionError("unreachable")

        async def send(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))

        await self.app(scope, receive, send)
        if status != 200:
            raise RuntimeError(f"{status}: {b''.join(chunks)[:300]!r}")
        with probe.outside():
            return parse_sse(b"".join(chunks)).events


def _finished(events: list[dict[str, Any]], expected: str) -> dict[str, Any]:
    finished = [event for event in events if event["type"] == "RUN_FINISHED"]
    outcome: dict[str, Any] = finished[0].get("outcome", {"type": "success"}) if len(finished) == 1 else {}
    if outcome.get("type") != expected:
        raise RuntimeError(f"expected a run ending in {expected}, got {[e['type'] for e in events][-3:]}")
    return outcome


def _run_input(thread_id: str, messages: list[Body], **extra: Any) -> Body:
    body = {"threadId": thread_id, "runId": _id("run"), "messages": messages, "tools": [], "context": []}
    return {**body, "protocolVersion": "1.0", **extra}


def _id(prefix: str) -> str:
    return f"{prefix}-{os.urandom(6).hex()}"


@tool(requires_approval=True)
async def refund(order: str) -> str:
    """Refund an order (the approval workload's tool)."""
    return f"refunded {order}"


@dataclass
class Bed:
    """One adapter in this process, its app and its counters."""

    adapter: Adapter
    client: Client
    store: SQLiteStore

    async def settle(self) -> None:
        """Wait for the work the runs left behind (their journals' last appends)."""
        await self.adapter.config.background.wait()


def bed(directory: str) -> Bed:
    backend = ScriptedBackend(
        [
            Rule(rf"^{STREAM_PROMPT}$", reply=STREAM_TEXT),
            Rule(rf"^{SHORT_PROMPT}$", reply=SHORT_TEXT),
            Rule(r"go to (\w+)", steps=[[Call("navigate", {"path": "/{1}"})]], reply="Opened it."),
            Rule(r"refund (\w+)", steps=[[Call("refund", {"order": "{1}"})]], reply="Refunded."),
        ],
        keep_requests=1,
    )
    store = SQLiteStore(str(Path(directory, f"profile-{_id('db')}.db")))
    instrument(store)
    policy = counting_policy(CALLS)
    limits = Limits(max_body_bytes=MAX_BODY)
    handler = Adapter(
        backend, tools=[refund], store=store, frontend_outcome="interrupt", authorize=policy, limits=limits
    )
    return Bed(handler, Client(create_app(handler)), store)


# The workloads: each iteration measures what it runs inside `probe.measured()`.


@dataclass
class Probe:
    """Switches the measurement on for the parts of an iteration that count."""

    profiles: tuple[cProfile.Profile, cProfile.Profile, SQLiteStore] | None = None
    """The event loop's thread's profile, the store's worker thread's, and that store: on while measured, and the
    counters count then too."""
    cpu: list[float] = field(default_factory=list)
    """The process's CPU seconds (every thread) of each measured part: one per iteration."""
    excluded: float = 0.0
    """The CPU seconds of the client's own work within the measured part now going on (`outside`)."""
    gc: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    """The cyclic garbage collector while measured: collections of each generation, and their CPU seconds."""

    @asynccontextmanager
    async def measured(self) -> AsyncIterator[None]:
        started, self.excluded = time.process_time(), 0.0
        if self.profiles is not None:
            loop_profile, worker_profile, store = self.profiles
            await store._call("the profile's start", worker_profile.enable)
            loop_profile.enable()
        CALLS.on = self.profiles is not None
        CALLS.profile = self.profiles[0] if self.profiles is not None else None
        GC.probe = self
        try:
            yield
        finally:
            GC.probe = None
            CALLS.on, CALLS.profile = False, None
            if self.profiles is not None:
                loop_profile.disable()
                await store._call("the profile's end", worker_profile.disable)
            self.cpu.append(time.process_time() - started - self.excluded)

    @contextmanager
    def outside(self) -> Iterator[None]:
        """The client's own work: left out of the CPU, the profile, the counters and the collector's figures."""
        on, probe, started = CALLS.on, GC.probe, time.process_time()
        if self.profiles is not None and on:
            self.profiles[0].disable()
        CALLS.on, GC.probe = False, None
        try:
            yield
        finally:
            CALLS.on, GC.probe = on, probe
            if self.profiles is not None and on:
                self.profiles[0].enable()
            self.excluded += time.process_time() - started


class Collector:
    """Charges each collection of the cyclic garbage collector to the probe measuring (its thread's CPU time)."""

    def __init__(self) -> None:
        self.probe: Probe | None = None
        self.started = 0.0
        gc.callbacks.append(self.collected)

    def collected(self, phase: str, info: dict[str, int]) -> None:
        probe = self.probe
        if probe is None:
            return
        if phase == "start":
            self.started = time.thread_time()
            return
        probe.gc[f"gen{info['generation']} collections"] += 1
        probe.gc[f"gen{info['generation']} seconds"] += time.thread_time() - self.started


GC = Collector()


Iteration = Callable[[Bed, Probe], Awaitable[None]]


async def one_stream(bed: Bed, probe: Probe) -> None:
    user = {"id": _id("user"), "role": "user", "content": STREAM_PROMPT}
    async with probe.measured():
        _finished(await bed.client.post(_run_input(_id("thread"), [user]), probe), "success")
        await bed.settle()


async def concurrent(bed: Bed, probe: Probe) -> None:
    def body() -> Body:
        return _run_input(_id("thread"), [{"id": _id("user"), "role": "user", "content": SHORT_PROMPT}])

    bodies = [body() for _ in range(100)]
    async with probe.measured():
        for events in await asyncio.gather(*(bed.client.post(b, probe) for b in bodies)):
            _finished(events, "success")
        await bed.settle()


async def frontend(bed: Bed, probe: Probe) -> None:
    thread = _id("thread")
    user = {"id": _id("user"), "role": "user", "content": ROUND_TRIP_PROMPT}
    async with probe.measured():
        first = await bed.client.post(_run_input(thread, [user], tools=[NAVIGATE]), probe)
        (interrupt,) = _finished(first, "interrupt")["interrupts"]
        snapshot = [e for e in first if e["type"] == "MESSAGES_SNAPSHOT"][-1]["messages"]
        entry = {"interruptId": interrupt["id"], "status": "resolved", "payload": {"navigated": True}}
        second = await bed.client.post(_run_input(thread, snapshot, tools=[NAVIGATE], resume=[entry]), probe)
        _finished(second, "success")
        await bed.settle()


def _approval_entry(interrupt: dict[str, Any]) -> Body:
    payload = {"approved": True, "editedArgs": {"order": "o2"}}
    return {"interruptId": interrupt["id"], "status": "resolved", "payload": payload}


async def approval(bed: Bed, probe: Probe) -> None:
    thread = _id("thread")
    user = {"id": _id("user"), "role": "user", "content": "refund o1"}
    async with probe.measured():
        first = await bed.client.post(_run_input(thread, [user]), probe)
        (interrupt,) = _finished(first, "interrupt")["interrupts"]
        snapshot = [e for e in first if e["type"] == "MESSAGES_SNAPSHOT"][-1]["messages"]
        second = await bed.client.post(_run_input(thread, snapshot, resume=[_approval_entry(interrupt)]), probe)
        _finished(second, "success")
        await bed.settle()


async def approval_api(bed: Bed, probe: Probe) -> None:
    thread = _id("thread")
    user = {"id": _id("user"), "role": "user", "content": "refund o1"}
    async with probe.measured():
        first = await bed.client.post(_run_input(thread, [user]), probe)
        (interrupt,) = _finished(first, "interrupt")["interrupts"]
        types = [event.type async for event in bed.adapter.resume(thread, [_approval_entry(interrupt)])]
        if types[-1] != "RUN_FINISHED":
            raise RuntimeError(f"the approval through Adapter.resume ended with {types[-3:]}")
        await bed.settle()


def resumed(turns: int) -> Iteration:
    """Only the resume of `frontend`, its client resending `turns` prior turns (the first run is not measured)."""

    async def one(bed: Bed, probe: Probe) -> None:
        body = await interrupted(bed, probe, turns)
        async with probe.measured():
            _finished(await bed.client.post(body, probe), "success")
            await bed.settle()

    return one


async def interrupted(bed: Bed, probe: Probe, turns: int) -> Body:
    """A new thread of `turns` prior turns whose client tool waits; the resume that answers it, the history resent."""
    thread = _id("thread")
    sent = [*prior_turns(turns), {"id": _id("user"), "role": "user", "content": ROUND_TRIP_PROMPT}]
    first = await bed.client.post(_run_input(thread, sent, tools=[NAVIGATE]), probe)
    (interrupt,) = _finished(first, "interrupt")["interrupts"]
    entry = {"interruptId": interrupt["id"], "status": "resolved", "payload": {"navigated": True}}
    await bed.settle()
    return _run_input(thread, held_by_client(sent, first), tools=[NAVIGATE], resume=[entry])


# Reporting.


@dataclass
class Result:
    """One workload's measurements, per iteration unit (a run, or a round trip)."""

    name: str
    units: int
    cpu_ms: float
    load: float
    stats: pstats.Stats
    counts: Counter[tuple[str, str]] = field(default_factory=Counter)
    gc: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    """The garbage collector during the unprofiled pass, over all its units."""

    def per(self, value: float) -> float:
        return value / self.units


async def measure(name: str, iteration: Iteration, runs: int, unit: int, directory: str) -> Result:
    """Warm up, read the CPU of `runs` iterations, then profile and count `runs` more."""
    gc.collect()  # what earlier workloads left is not collected during this one
    test_bed = bed(directory)
    try:
        warm = Probe()
        for _ in range(max(runs // 5, 2)):
            await iteration(test_bed, warm)
        load = os.getloadavg()[0]
        timed = Probe()
        for _ in range(runs):
            await iteration(test_bed, timed)
        # Each thread's own CPU time, not the wall clock: on a loaded machine the wall clock charges a function
        # for the time its thread waited for a CPU or for the GIL.
        loop_profile, worker_profile = cProfile.Profile(time.thread_time), cProfile.Profile(time.thread_time)
        profiled = Probe((loop_profile, worker_profile, test_bed.store))
        CALLS.counts = Counter()
        async with plumbing_counted(asyncio.get_running_loop(), test_bed.store):
            for _ in range(runs):
                await iteration(test_bed, profiled)
    finally:
        await test_bed.adapter.aclose()
    stats = pstats.Stats(loop_profile)
    stats.add(worker_profile)
    cpu_ms = 1000 * statistics.median(timed.cpu) / unit
    return Result(name, runs * unit, cpu_ms, load, stats, CALLS.counts, timed.gc)


def _where(function: tuple[str, int, str]) -> str:
    file, line, name = function
    for root in OURS:
        if file.startswith(root):
            file = str(Path(file).relative_to(Path(root).parent))
    return f"{file}:{line}({name})" if line else name


def _plumbing(function: tuple[str, int, str]) -> bool:
    file, _, name = function
    return any(part in file or part in name for part in PLUMBING) or file.endswith("_floor_profile.py")


def report(result: Result) -> None:
    print(
        f"\n=== {result.name}: {result.cpu_ms:.3f} ms CPU per unit (median, every thread, unprofiled), "
        f"load {result.load:.2f}"
    )
    collected = ", ".join(
        f"gen{g}: {result.per(result.gc[f'gen{g} collections']):.2f} collections, "
        f"{result.per(result.gc[f'gen{g} seconds']) * 1000:.3f} ms"
        for g in range(3)
    )
    print(f"the garbage collector per unit (unprofiled): {collected}")
    totals: Counter[str] = Counter()
    for (name, _), count in result.counts.items():
        totals["SQL statements" if name.startswith("SQL ") else name] += count
    plumbing = ("asyncio task", "asyncio timer", "store thread hop", "SQL statements")
    print("plumbing per unit (profiled pass): " + ", ".join(f"{result.per(totals[n]):.2f} {n}" for n in plumbing))
    print("exact calls per unit (where from: innermost adapter frame first):")
    for (name, where), count in sorted(result.counts.items(), key=lambda item: (item[0][0], -item[1])):
        print(f"  {result.per(count):>7.2f}  {name:<28} {where}")
    raw: dict[Any, Any] = result.stats.stats  # type: ignore[attr-defined]
    rows = [(function, row) for function, row in raw.items() if not _plumbing(function)]
    rows.sort(key=lambda item: item[1][3], reverse=True)
    print(
        "top 15 by cumulative CPU time, per unit (loop and store threads; asyncio's and Starlette's frames left out):"
    )
    print(f"  {'ncalls':>8} {'tottime µs':>10} {'cumtime µs':>10}  function")
    for function, (_, ncalls, tottime, cumtime, _) in rows[:15]:
        per = result.per
        print(f"  {per(ncalls):>8.1f} {per(tottime) * 1e6:>10.1f} {per(cumtime) * 1e6:>10.1f}  {_where(function)}")


def per_turn(small: Result, large: Result, turns: int) -> None:
    """What grows with the history: each function's calls and own time per prior turn, the largest first."""
    before: dict[Any, Any] = small.stats.stats  # type: ignore[attr-defined]
    after: dict[Any, Any] = large.stats.stats  # type: ignore[attr-defined]
    grown = []
    for function, row in after.items():
        old = before.get(function, (0, 0, 0.0, 0.0, {}))
        calls = (large.per(row[1]) - small.per(old[1])) / turns
        own = (large.per(row[2]) - small.per(old[2])) / turns
        grown.append((own, calls, function))
    grown.sort(key=lambda item: item[0], reverse=True)
    cost = (large.cpu_ms - small.cpu_ms) * 1000 / turns
    print(f"\n=== per prior turn of the full-history resume: {cost:.1f} µs CPU (medians, unprofiled, every thread)")
    print(f"  {'calls':>7} {'own µs':>7}  function (own time per prior turn, largest first), then its main callers")
    for own, calls, function in grown[:25]:
        print(f"  {calls:>7.2f} {own * 1e6:>7.2f}  {_where(function)}")
        callers: dict[Any, Any] = after[function][4]
        old_callers: dict[Any, Any] = before.get(function, (0, 0, 0.0, 0.0, {}))[4]
        by_caller = []
        for caller, row in callers.items():
            old = old_callers.get(caller, (0, 0, 0.0, 0.0))
            by_caller.append(
                (
                    (large.per(row[2]) - small.per(old[2])) / turns,
                    (large.per(row[1]) - small.per(old[1])) / turns,
                    caller,
                )
            )
        for caller_own, caller_calls, caller in sorted(by_caller, key=lambda item: item[0], reverse=True)[:2]:
            if caller_own > 0.05e-6:
                print(f"  {caller_calls:>7.2f} {caller_own * 1e6:>7.2f}      from {_where(caller)}")


# The pieces a cut would remove, each timed alone.


async def pieces(directory: str, turns: int) -> None:
    """The CPU (every thread) of one store call of each kind, and of the small per-run pieces, per call."""
    store = SQLiteStore(str(Path(directory, "pieces.db")))
    thread = _id("thread")
    version = await store.save(thread, ThreadChange(title="t"), expected_version=0)
    n = 300

    async def cpu_per(make: Callable[[], Awaitable[Any]]) -> float:
        started = time.process_time()
        for _ in range(n):
            await make()
        return (time.process_time() - started) / n * 1e6

    print(f"\n=== pieces, µs CPU per call (every thread), load {os.getloadavg()[0]:.2f}")
    print(f"  store.load (a thread of no message)          {await cpu_per(lambda: store.load(thread)):>8.1f}")

    async def save() -> None:
        nonlocal version
        version = await store.save(thread, ThreadChange(grants=None), expected_version=version)

    print(f"  store.save (a head record)                   {await cpu_per(save):>8.1f}")
    from adapter.stores import JournalEvent

    seq = iter(range(1, 10**6))

    async def append() -> None:
        await store.append_events(thread, "run-1", [JournalEvent(next(seq), '{"type":"RUN_STARTED"}')])

    print(f"  store.append_events (one event)              {await cpu_per(append):>8.1f}")
    await store.close()

    config = Adapter(ScriptedBackend([]), tools=[refund]).config
    view = View(config.access, None, None)
    from ag_ui.core import TextMessageContentEvent

    event = TextMessageContentEvent(message_id="m", delta="x")
    print(f"  await View.shown (reads: the event as is)    {await cpu_per(lambda: view.shown(event, None)):>8.2f}")
    started = time.process_time()
    for _ in range(n * 100):
        config.tool_schemas()
    print(f"  EngineConfig.tool_schemas (one tool)         {(time.process_time() - started) / (n * 100) * 1e6:>8.2f}")
    schema = dict(refund.parameters)
    started = time.process_time()
    for _ in range(n * 10):
        schema_tools.validate({"order": "o2"}, schema)
    print(f"  schema_tools.validate (one string property)  {(time.process_time() - started) / (n * 10) * 1e6:>8.2f}")
    canonical = importlib.import_module("schema_tools._validate").canonical_json
    started = time.process_time()
    for _ in range(n * 10):
        canonical(schema)
    print(f"  its cache key, canonical_json of that schema {(time.process_time() - started) / (n * 10) * 1e6:>8.2f}")
    started = time.process_time()
    for _ in range(n * 10):
        await config.access.allows(None, None, "run")
    print(f"  Access.allows (owner_only)                   {(time.process_time() - started) / (n * 10) * 1e6:>8.2f}")
    await per_turn_pieces(directory, turns)


async def per_turn_pieces(directory: str, turns: int) -> None:
    """What a resume of `turns` prior turns pays per turn for the pieces every such resume walks, each timed alone."""
    from ag_ui.core import RunAgentInput

    # Private on purpose: each per-turn piece of a resume, timed alone.
    from adapter._edge._input import check_depth, check_limits, parse_run_input
    from adapter._thread._handle import RecordHandle

    test_bed = bed(directory)
    probe = Probe()
    body = await interrupted(test_bed, probe, turns)
    raw = json.dumps(body).encode()
    _finished(await test_bed.client.post(body, probe), "success")
    await test_bed.settle()
    thread, store, parsed = body["threadId"], test_bed.store, test_bed.adapter.config.parsed
    run_input = RunAgentInput.model_validate_json(raw)

    async def per_turn_async(make: Callable[[], Awaitable[Any]], n: int = 15) -> float:
        samples = []
        for _ in range(n):
            started = time.process_time()
            await make()
            samples.append(time.process_time() - started)
        return statistics.median(samples) / turns * 1e6

    def per_turn_sync(make: Callable[[], Any], n: int = 15) -> float:
        samples = []
        for _ in range(n):
            started = time.process_time()
            make()
            samples.append(time.process_time() - started)
        return statistics.median(samples) / turns * 1e6

    async def cached_load() -> None:
        await RecordHandle(ParsedStore(store, parsed), thread).load()

    print(f"\n=== pieces of the resume of {turns} prior turns, µs CPU per prior turn (every thread), medians")
    print(f"  the edge: parse_run_input (all of it)                {per_turn_sync(lambda: parse_run_input(raw)):>7.2f}")
    validated = per_turn_sync(lambda: RunAgentInput.model_validate_json(raw))
    print(f"    of which RunAgentInput.model_validate_json (floor) {validated:>7.2f}")
    print(f"    of which check_depth (the body's nesting)          {per_turn_sync(lambda: check_depth(raw)):>7.2f}")
    print(
        f"    of which check_limits (ids, repeated ids)          {per_turn_sync(lambda: check_limits(run_input)):>7.2f}"
    )
    every = await per_turn_async(lambda: store.load(thread))
    print(f"  store.load of the whole thread ({turns * 4 + 3} messages)        {every:>7.2f}")
    print(f"  RecordHandle.load, the parsed-thread cache warm      {await per_turn_async(cached_load):>7.2f}")
    await test_bed.adapter.aclose()


def parse_inline() -> None:
    """Parse large bodies on the event loop's thread, where the profile sees them (the edge uses a worker thread)."""
    import adapter._edge._input as edge  # private on purpose: its worker-thread hop is patched out

    async def inline(function: Callable[..., Any], *args: Any) -> Any:
        return function(*args)

    edge.run_in_threadpool = inline  # type: ignore[attr-defined,assignment]


async def churn(turns: int, max_chars: int | None, rounds: int = 30) -> str:
    """Resumes of `turns` prior turns, each on a thread no resume read before: the collector's cost per resume.

    Run in a process of its own (`main`): a full collection walks the whole process, whatever adapter owns the heap.
    """
    parse_inline()
    with tempfile.TemporaryDirectory(prefix="agui-churn-") as directory:
        test_bed = bed(directory)
        if max_chars is not None:
            test_bed.adapter.config.parsed.max_chars = max_chars
        for _ in range(rounds // 3):  # the first resumes fill the parsed-thread cache
            await resumed(turns)(test_bed, Probe())
        probe = Probe()
        for _ in range(rounds):
            await resumed(turns)(test_bed, probe)
        await test_bed.adapter.aclose()
    cache = "the default" if max_chars is None else str(max_chars)
    return (
        f"  parsed-thread cache max_chars={cache:<12} CPU per resume: median {statistics.median(probe.cpu) * 1000:6.1f}"
        f" ms, mean {statistics.fmean(probe.cpu) * 1000:6.1f} ms; full collections "
        f"{probe.gc['gen2 collections'] / rounds:.2f} per resume, {probe.gc['gen2 seconds'] / rounds * 1000:5.1f} ms"
    )


async def churns(turns: int) -> None:
    """`churn` with the parsed-thread cache and without, each in a fresh process, twice, alternating."""
    print(f"\n=== {turns}-turn resumes on new threads, each in a fresh process, load {os.getloadavg()[0]:.2f}")
    for _ in range(2):
        for max_chars in ("default", "0"):
            child = await asyncio.create_subprocess_exec(
                sys.executable, __file__, "churn", str(turns), max_chars, stdout=asyncio.subprocess.PIPE
            )
            out, _ = await child.communicate()
            print(out.decode().rstrip())


async def profile_all(runs: int, turns: int) -> int:
    parse_inline()
    loads = os.getloadavg()
    print(f"(in process, {runs} iterations per workload; load average {loads[0]:.2f}/{loads[1]:.2f} at the start)")
    with tempfile.TemporaryDirectory(prefix="agui-profile-") as directory:
        workloads: list[tuple[str, Iteration, int, int]] = [
            ("stream: one run of 2,000 deltas (unit: a run)", one_stream, max(runs // 10, 5), 1),
            ("fixed: 100 concurrent runs x 50 deltas (unit: a run)", concurrent, max(runs // 20, 3), 100),
            ("frontend round trip (unit: a round trip)", frontend, runs, 1),
            ("approval round trip, with editedArgs (unit: a round trip)", approval, runs, 1),
            ("approval round trip, the approval through Adapter.resume", approval_api, runs, 1),
        ]
        for name, iteration, count, unit in workloads:
            report(await measure(name, iteration, count, unit, directory))
        small = await measure("resume only, 0 prior turns", resumed(0), max(runs // 2, 10), 1, directory)
        large = await measure(f"resume only, {turns} prior turns", resumed(turns), max(runs // 10, 5), 1, directory)
        report(small)
        report(large)
        per_turn(small, large, turns)
        await pieces(directory, turns)
    await churns(turns)
    return 0


if __name__ == "__main__":  # `churn TURNS MAX_CHARS`, in a process of its own (`churns`)
    _, turns, max_chars = sys.argv[1:]
    print(asyncio.run(churn(int(turns), None if max_chars == "default" else int(max_chars))))
