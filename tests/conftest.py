from __future__ import annotations

import asyncio
import gc
import os
import threading
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import httpx
import pytest
import uvicorn
from agui import ORDER, Client
from clock import Clock
from externals import in_ci, missing_chromium, missing_copilotkit, missing_framework, missing_node, missing_strands
from hypothesis import HealthCheck, settings
from offices import Office, OpenOffice, by_header
from starlette.applications import Starlette
from threaded_server import serve_in_thread, server_config
from upstreams.kit import UpstreamServer

from adapter import Adapter, FunctionTool, InputRequired, ToolContext, ToolError, create_app, tool
from adapter.backends import Call, Rule, ScriptedBackend

T = TypeVar("T")

# Hypothesis profiles: what every property test would otherwise say itself. A test states only its own
# budget (`@settings(max_examples=...)`) and the health checks it alone needs, added to the profile's.
# - local, a plain `python -m pytest`: no deadline (a loaded machine makes any example slow now and then)
#   and no too_slow health check, for the same reason; failing examples are kept in .hypothesis/ and replayed.
# - ci, under CI (`.ci/run` sets it): the same, derandomized (every run tries the same examples,
#   as Hypothesis's own "ci" profile, which this one replaces, does), without the example database, and
#   printing the blob that reproduces a failure (`@reproduce_failure`).
# - dev, `HYPOTHESIS_PROFILE=dev python -m pytest`: a quick local run, 10 examples for each test that
#   states no budget of its own (a stated budget is deliberate, and is kept).
# HYPOTHESIS_PROFILE picks any of them. Each is built on Hypothesis's defaults, whatever profile it loaded itself.
_LOCAL = settings(settings.get_profile("default"), deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("local", _LOCAL)
settings.register_profile("ci", _LOCAL, derandomize=True, database=None, print_blob=True)
settings.register_profile("dev", _LOCAL, max_examples=10)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if in_ci() else "local"))

_BOUND = 10.0  # seconds any server start, stop or cross-loop call may take
_KEEPALIVE = 2.0  # seconds a served run's stream may be silent before a keep-alive comment (the reads wait _BOUND)

RULES = [
    Rule(r"^hello$", reply="héllo 👍🏽 👨‍👩‍👧"),
    Rule(r"where is order (?P<order>\w+)", steps=[[Call("lookup_order", {"order_id": "{order}"})]]),
    Rule(r"stock of (?P<item>\w+)", steps=[[Call("check_stock", {"item": "{item}"})]]),
    Rule(r"go to (?P<page>\w+)", steps=[[Call("navigate", {"path": "/{page}"})]]),
    Rule(r"toast twice", steps=[[Call("show_toast", {"text": "one"}), Call("show_toast", {"text": "two"})]]),
    Rule(r"delete (?P<item>\w+)", steps=[[Call("confirm_action", {"action": "delete {item}"})]]),
    Rule(
        r"refund order (?P<order>\w+)",
        steps=[
            [Call("lookup_order", {"order_id": "{order}"})],
            [Call("refund_order", {"order_id": "{order}", "amount": 42.5})],
        ],
    ),
    Rule(r"email (?P<to>\S+)", steps=[[Call("send_email", {"to": "{to}", "subject": "s", "body": "b"})]]),
    Rule(
        r"three emails",
        steps=[[Call("send_email", {"to": f"p{i}@x.io", "subject": "s", "body": "b"}) for i in range(3)]],
    ),
    Rule(
        r"two emails",
        steps=[[Call("send_email", {"to": f"p{i}@x.io", "subject": "s", "body": "b"}) for i in range(2)]],
    ),
    Rule(
        r"do everything",
        steps=[
            [
                Call("lookup_order", {"order_id": "A17"}),
                Call("check_stock", {"item": "lamp"}),
                Call("navigate", {"path": "/orders"}),
                Call("send_email", {"to": "boss@x.io", "subject": "s", "body": "b"}),
            ]
        ],
    ),
    Rule(r"reserve (?P<item>\w+)", steps=[[Call("reserve_stock", {"item": "{item}"})]]),
    Rule(r"sign (?P<doc>\w+)", steps=[[Call("sign_document", {"doc": "{doc}"})]]),
    Rule(r"^audit", steps=[[Call("audit", {"note": "n"})]]),
    Rule(r"gated audit", steps=[[Call("gated_audit", {"note": "n"})]]),
    Rule(r"bad arguments", steps=[[Call("lookup_order", {"order_id": 17})]]),
    Rule(r"explode", steps=[[Call("explode")]]),
    Rule(r"refuse", steps=[[Call("refuse")]]),
    Rule(r"mystery", steps=[[Call("no_such_tool", {"x": 1})]]),
]


@dataclass
class Kit:
    """Server tools whose every execution is recorded, so a test can prove what ran and with what."""

    calls: defaultdict[str, list[dict[str, Any]]] = field(default_factory=lambda: defaultdict(list))
    contexts: defaultdict[str, list[ToolContext]] = field(default_factory=lambda: defaultdict(list))
    delay: float = 0.0
    """Seconds the approval-gated tools take, to widen race windows."""

    def count(self, name: str) -> int:
        """How many times the tool ran."""
        return len(self.calls[name])

    @property
    def tools(self) -> list[FunctionTool]:
        """The tools, as an Adapter takes them."""
        kit = self

        @tool
        def lookup_order(order_id: str) -> dict[str, Any]:
            """Look an order up."""
            kit.calls["lookup_order"].append({"order_id": order_id})
            return {**ORDER, "order": order_id}

        @tool
        async def check_stock(item: str) -> str:
            """How many of an item are in stock."""
            kit.calls["check_stock"].append({"item": item})
            return f"12 {item} in stock"

        @tool(requires_approval=True)
        async def send_email(to: str, body: str, ctx: ToolContext, subject: str = "") -> str:
            """Send an email."""
            await asyncio.sleep(kit.delay)
            kit.calls["send_email"].append({"to": to, "body": body, "subject": subject})
            kit.contexts["send_email"].append(ctx)
            return f"sent to {to}"

        @tool(requires_approval=True)
        async def refund_order(order_id: str, amount: float) -> str:
            """Refund an order."""
            await asyncio.sleep(kit.delay)
            kit.calls["refund_order"].append({"order_id": order_id, "amount": amount})
            return f"refunded {amount} on {order_id}"

        @tool
        def reserve_stock(item: str, ctx: ToolContext) -> str:
            """Reserve stock; asks how many first."""
            kit.contexts["reserve_stock"].append(ctx)
            if not ctx.answered:
                raise InputRequired("How many?", response_schema={"type": "string", "minLength": 1})
            kit.calls["reserve_stock"].append({"item": item, "answer": ctx.answer})
            return f"reserved {ctx.answer} x {item}"

        @tool(external=True)
        def sign_document(doc: str) -> str:
            """Signed by a person, outside the server."""
            kit.calls["sign_document"].append({"doc": doc})
            return "never"

        @tool
        def audit(note: str, ctx: ToolContext) -> str:
            """Record a note."""
            kit.calls["audit"].append({"note": note})
            kit.contexts["audit"].append(ctx)
            return "noted"

        @tool(requires_approval=True)
        def gated_audit(note: str, ctx: ToolContext) -> str:
            """Record a note once approved; asks for a reason first."""
            kit.contexts["gated_audit"].append(ctx)
            if not ctx.answered:
                raise InputRequired("Why?")
            kit.calls["gated_audit"].append({"note": note, "answer": ctx.answer})
            return "noted"

        @tool
        def explode() -> str:
            """Always fails."""
            kit.calls["explode"].append({})
            raise RuntimeError("sk-secret-internals")

        @tool
        def refuse() -> str:
            """Fails with a message for the model."""
            kit.calls["refuse"].append({})
            raise ToolError("the warehouse is closed")

        return [
            lookup_order,
            check_stock,
            send_email,
            refund_order,
            reserve_stock,
            sign_document,
            audit,
            gated_audit,
            explode,
            refuse,
        ]


@dataclass
class Served:
    """An app served by uvicorn on 127.0.0.1 in its own thread and event loop, like a separate process."""

    url: str
    server: uvicorn.Server
    thread: threading.Thread
    loop: asyncio.AbstractEventLoop
    http: httpx.AsyncClient
    adapter: Adapter | None = None
    stopped: bool = False

    @property
    def client(self) -> Client:
        """A client for the sub-app."""
        return Client(self.http, self.url)

    async def call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine on the server's loop, where the adapter's store lives."""
        future = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        return await asyncio.wait_for(asyncio.wrap_future(future), _BOUND)

    async def stop(self, *, wait: bool = True) -> None:
        """Close the client and the adapter, then the server; `wait=False` leaves its shutdown to session end."""
        if self.stopped:
            return
        self.stopped = True
        await self.http.aclose()
        if self.adapter is not None:
            await self.call(self.adapter.aclose())
        self.server.should_exit = True
        if wait:
            await asyncio.to_thread(self.thread.join, _BOUND)
            assert not self.thread.is_alive(), "uvicorn did not stop"
        else:
            _STOPPING.append(self.thread)


_STOPPING: list[threading.Thread] = []
"""Servers told to exit at teardown: uvicorn's shutdown takes ~0.2 s, so they finish in the background."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the tests that drive Chromium; outside CI, skip those whose dependency is missing, saying how to fix it."""
    for item in items:
        if {"browser", "page"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.needs_chromium)
    if in_ci():
        return  # there, a missing dependency fails its tests (with the same message)
    missing = {
        "needs_node": missing_node(),
        "needs_copilotkit": missing_copilotkit(),
        "needs_chromium": missing_chromium(),
        "needs_strands": missing_strands(),
        **{f"needs_{name}": missing_framework(name) for name in ("adk", "crewai", "llamaindex")},
    }
    for item in items:
        for marker, problem in missing.items():
            if problem is not None and item.get_closest_marker(marker) is not None:
                item.add_marker(pytest.mark.skip(reason=f"{marker}: {problem}"))


@pytest.fixture(scope="module", autouse=True)
def _collect_what_the_module_left() -> Iterator[None]:
    """Collect a module's garbage when it ends, so that what it leaked (an unclosed socket, a coroutine never
    awaited) is reported at its own last teardown, not in whichever later test the collector happens to run."""
    yield
    gc.collect()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    deadline = time.monotonic() + _BOUND
    for thread in _STOPPING:
        thread.join(max(0.0, deadline - time.monotonic()))


class Serve(Protocol):
    def __call__(self, app: Adapter | Starlette, **options: Any) -> Awaitable[Served]: ...


@pytest.fixture
async def serve() -> AsyncIterator[Serve]:
    """Serve an Adapter (through `create_app`) or any Starlette app over real HTTP; stopped at teardown."""
    started: list[Served] = []

    async def start(app: Adapter | Starlette, **options: Any) -> Served:
        adapter = app if isinstance(app, Adapter) else None
        # A run's stream is never silent for longer than a keep-alive: far less than the client's read timeout,
        # so a run that is slow on a loaded machine (a long check on a worker thread) is not taken for a dead one.
        options.setdefault("keepalive_interval", _KEEPALIVE)
        asgi = create_app(app, **options) if isinstance(app, Adapter) else app
        config = server_config(asgi, lifespan="off", timeout_graceful_shutdown=2)
        started_server = await asyncio.to_thread(serve_in_thread, config, bound=_BOUND)
        server, thread, loop = started_server.server, started_server.thread, started_server.loop
        served = Served(started_server.url, server, thread, loop, httpx.AsyncClient(timeout=_BOUND), adapter)
        started.append(served)
        return served

    yield start
    for served in started:
        await served.stop(wait=False)


@pytest.fixture
def kit() -> Kit:
    return Kit()


@pytest.fixture
def clock() -> Clock:
    return Clock()


def scripted(rules: Sequence[Rule] = RULES) -> ScriptedBackend:
    """The scenario backend: one rule per scenario of seed 002 and AGUI-RULES."""
    return ScriptedBackend(rules)


@pytest.fixture
def backend() -> ScriptedBackend:
    return scripted()


@pytest.fixture
def make_backend() -> Callable[[], ScriptedBackend]:
    """Fresh scenario backends, for tests that build more than one adapter."""
    return scripted


class MakeAdapter(Protocol):
    def __call__(self, **options: Any) -> Adapter: ...


@pytest.fixture
def make_adapter(kit: Kit, backend: ScriptedBackend) -> MakeAdapter:
    """An Adapter over the scenario backend and the spied tools; options go to `Adapter`, but `clock` (for tests)."""

    def make(**options: Any) -> Adapter:
        options.setdefault("tools", kit.tools)
        clock = options.pop("clock", None)
        adapter = Adapter(options.pop("backend", backend), **options)
        if clock is not None:
            adapter.config.use_clock(clock)
        return adapter

    return make


class Connect(Protocol):
    def __call__(self, **options: Any) -> Awaitable[Client]: ...


@pytest.fixture
def connect(serve: Serve, make_adapter: MakeAdapter) -> Connect:
    """Serve a fresh scenario adapter (options go to `Adapter`) and return a client for it."""

    async def start(**options: Any) -> Client:
        served = await serve(make_adapter(**options))
        return served.client

    return start


@pytest.fixture(scope="session")
def servers() -> Iterator[dict[str, UpstreamServer]]:
    """The wrapped frameworks' servers (tests/upstreams), each started the first time a test needs it
    (`upstreams.matrix.server_of`) and shared by every module of the session."""
    started: dict[str, UpstreamServer] = {}
    yield started
    for server in started.values():
        server.stop()


@pytest.fixture
async def offices(serve: Serve) -> AsyncIterator[list[Office]]:
    """Every office a test opens (tests/offices.py), closed at teardown."""
    opened: list[Office] = []
    yield opened
    for place in opened:
        await place.close()


@pytest.fixture
def office(offices: list[Office], serve: Serve, make_adapter: MakeAdapter) -> OpenOffice:
    """Serve a scenario adapter (options go to `Adapter`) whose callers name themselves in `x-user`."""

    async def start(**options: Any) -> Office:
        offices.append(Office(await serve(make_adapter(**options), principal=by_header)))
        return offices[-1]

    return start
