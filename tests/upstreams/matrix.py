"""The framework matrix: our adapter in front of each framework's AG-UI server, over a link the tests can cut.

tests/backends/test_upstream_frameworks.py runs every case against each framework that supports it: Pydantic AI and
LangGraph in this process, Strands, Google ADK and CrewAI in processes and virtualenvs of their own
(`<name>_server.py`, each started once a session by the `servers` fixture of tests/conftest.py).
tests/backends/test_upstream_approvals.py, tests/backends/test_upstream_llamaindex.py and
tests/backends/test_upstream_shapes.py take their frameworks, `Wrapped` and helpers from here; a module that uses
the `framework`, `thread` or `wrapped` fixture imports it by name (and lists it in `__all__`, so that the import is
not an unused one).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from ag_ui.core import Interrupt, RunAgentInput
from agui import collect, new_id, run_input, user
from replica_process import BOUND
from starlette.types import ASGIApp

from adapter import Adapter
from adapter.backends import AGUIUpstream, gated_call_ids

# Private on purpose: the tests put a Link they can cut between AGUIUpstream and an in-process framework, so they
# need the streaming transport AGUIUpstream itself uses for an ASGI app (it never offers its transport).
from adapter.client._asgi import StreamingASGITransport
from adapter.stores import SQLiteStore
from upstreams.kit import Link, UpstreamServer
from upstreams.langgraph_agent import LangGraphUpstream
from upstreams.pydantic_agent import PydanticAgent


@dataclass
class Framework:
    """One wrapped framework: how to reach it, and the files its approval-gated tool really deleted."""

    name: str
    url: str
    transport: Callable[[], httpx.AsyncBaseTransport]
    executions: Callable[[], list[str]]
    answers_schema: bool = True
    """Its approval interrupt carries a `responseSchema` (ag-ui-adk's and ag-ui-crewai's have none)."""

    @property
    def deleted(self) -> list[str]:
        return self.executions()


def in_process(name: str, app: ASGIApp, deleted: list[str]) -> Framework:
    return Framework(name, "http://upstream/", lambda: StreamingASGITransport(app), lambda: list(deleted))


def pydantic_ai() -> Framework:
    agent = PydanticAgent()
    return in_process("pydantic_ai", agent.app, agent.deleted)


def langgraph() -> Framework:
    agent = LangGraphUpstream()
    return in_process("langgraph", agent.app, agent.deleted)


def served(name: str, server: UpstreamServer) -> Framework:
    server.clear()
    schema = name not in ("adk", "crewai")
    return Framework(name, server.url, httpx.AsyncHTTPTransport, server.deleted, answers_schema=schema)


def server_of(request: pytest.FixtureRequest, name: str) -> UpstreamServer:
    started: dict[str, UpstreamServer] = request.getfixturevalue("servers")
    if name not in started:
        started[name] = UpstreamServer.start(name)
    return started[name]


SERVED = [
    pytest.param("strands", marks=pytest.mark.needs_strands),
    pytest.param("adk", marks=pytest.mark.needs_adk),
    pytest.param("crewai", marks=pytest.mark.needs_crewai),
]


@pytest.fixture(params=["pydantic_ai", "langgraph", *SERVED])
def framework(request: pytest.FixtureRequest) -> Framework:
    if request.param in ("strands", "adk", "crewai"):
        return served(request.param, server_of(request, request.param))
    make: Callable[[], Framework] = {"pydantic_ai": pydantic_ai, "langgraph": langgraph}[request.param]
    return make()


@pytest.fixture
def thread() -> str:
    """A thread id of its own: the Strands server lives as long as the session, with every thread in it."""
    return new_id("thread")


@dataclass
class Wrapped:
    """Our adapter in front of a framework, over a link we can cut."""

    framework: Framework
    link: Link
    adapter: Adapter

    async def run(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        return await collect(self.adapter.run(RunAgentInput.model_validate(body)), resumed="resume" in body)

    async def ask(self, thread: str, text: str, **extra: Any) -> list[dict[str, Any]]:
        """A new message, sent with the conversation so far, as a client keeps it."""
        stored = await self.adapter.thread(thread)
        history = [m for m in stored["messages"] if m["role"] != "activity"] if stored else []
        return await self.run(run_input(thread, [*history, user(text)], **extra))

    async def answer(self, thread: str, *entries: dict[str, Any], **extra: Any) -> list[dict[str, Any]]:
        return await self.run(run_input(thread, [], resume=list(entries), **extra))

    async def open_interrupts(self, thread: str) -> list[dict[str, Any]]:
        stored = await self.adapter.thread(thread)
        assert stored is not None
        interrupts: list[dict[str, Any]] = stored["interrupts"]
        return interrupts


def wrap(framework: Framework, store: SQLiteStore | None = None, link: Link | None = None) -> Wrapped:
    link = link or Link(framework.transport())
    # A framework's server may take seconds to answer on a loaded machine: httpx's 5 s default is not a bound here.
    backend = AGUIUpstream(framework.url, client=httpx.AsyncClient(transport=link, timeout=BOUND))
    return Wrapped(framework, link, Adapter(backend, store=store, frontend_outcome="interrupt"))  # clients that resume


@pytest.fixture
async def wrapped(framework: Framework) -> AsyncIterator[Wrapped]:
    each = wrap(framework)
    yield each
    await each.adapter.aclose()


def interrupts_of(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    assert events[-1]["type"] == "RUN_FINISHED", events[-1]
    assert events[-1]["outcome"]["type"] == "interrupt", events[-1]
    interrupts: list[dict[str, Any]] = events[-1]["outcome"]["interrupts"]
    return interrupts


def text_of(events: list[dict[str, Any]]) -> str:
    return "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")


def error_of(events: list[dict[str, Any]]) -> str:
    assert events[-1]["type"] == "RUN_ERROR", events[-1]
    code: str = events[-1]["code"]
    return code


APPROVE = {"approved": True}


def gated(events: list[dict[str, Any]], tool: str = "delete_file") -> str:
    """The gated call an interrupted run made, checked against what its interrupt says it gates, if anything.

    Pydantic AI, LangGraph and Strands name it by toolCallId, ag-ui-adk through metadata, ag-ui-crewai not at all.
    """
    call_id: str
    (call_id,) = [e["toolCallId"] for e in events if e["type"] == "TOOL_CALL_START" and e["toolCallName"] == tool]
    for interrupt in interrupts_of(events):
        assert gated_call_ids(Interrupt.model_validate(interrupt)) in ([], [call_id])
    return call_id


def held(events: list[dict[str, Any]]) -> list[str]:
    """The calls an interrupted run holds open: the gated one, and the confirmation call its interrupt names."""
    named = [i["toolCallId"] for i in interrupts_of(events) if i.get("toolCallId")]
    return sorted({gated(events), *named})


def said(content: str) -> str:
    """A tool's result as text, as frameworks wrap it: a JSON string, or ADK's {"result": ...}."""
    try:
        value = json.loads(content)
    except ValueError:
        return content
    return str(value["result"]) if isinstance(value, dict) and "result" in value else str(value)
