"""What the tests of Agno and Microsoft Agent Framework share: a framework that leaves its approval call open.

Both run behind `AGUIUpstream` in a process of their own (`agno_server.py` in .venv-agno, `maf_server.py` in
.venv-maf), with our adapter in front of them served over real HTTP (`Adapter(frontend_outcome="pending")`, a
SQLite store). The rule they hold the adapter to: a call the upstream left open stays open. The adapter never
invents its answer; the client's answer reaches the framework; the stored thread holds each call once and answers
it at most once, even when the framework restates the call as it continues. tests/upstreams/APPROVALS.md records
what each framework streams (tests/upstreams/transcripts/).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from agui import Reply, Thread, new_id, run_input
from externals import in_ci, missing_framework

from adapter import Adapter, HistoryMode
from adapter.backends import AGUIUpstream
from adapter.stores import SQLiteStore
from upstreams.kit import UpstreamServer

if TYPE_CHECKING:
    from conftest import Serve, Served

INVENTED = ("The upstream agent returned no result for this call.", "No result was recorded for this tool call.")
"""The adapter's own words for a call nobody answered: never an answer to a call the upstream left open."""

HISTORIES: list[HistoryMode] = ["client", "server"]


def needs(name: str) -> list[pytest.MarkDecorator]:
    """The framework's marker, and its skip outside CI when its virtualenv is missing (conftest's, for the others)."""
    problem = missing_framework(name)
    skip = pytest.mark.skipif(problem is not None and not in_ci(), reason=f"needs_{name}: {problem}")
    return [getattr(pytest.mark, f"needs_{name}"), skip]


def framework_server(name: str) -> Iterator[UpstreamServer]:
    """A framework's server for a module's tests; each test clears its journal."""
    server = UpstreamServer.start(name)
    yield server
    server.stop()


async def adapter_in_front(serve: Serve, url: str, tmp_path: Path, history: HistoryMode) -> Served:
    adapter = Adapter(
        AGUIUpstream(url),
        store=SQLiteStore(tmp_path / "turns.db"),
        frontend_outcome="pending",
        history=history,
    )
    return await serve(adapter)


@dataclass
class Client:
    """A client of the adapter: with history="client" it sends the thread as it folded it from the events,
    with history="server" only its new message."""

    served: Served
    thread: Thread
    history: HistoryMode

    @classmethod
    def of(cls, served: Served, history: HistoryMode) -> Client:
        return cls(served, served.client.thread(), history)

    async def send(self, message: Mapping[str, Any] | None = None, **extra: Any) -> Reply:
        if self.history == "server":
            self.thread.messages = []
        if message is not None:
            self.thread.messages.append(dict(message))
        return await self.thread.send(**extra)

    async def say(self, text: str) -> Reply:
        return await self.send({"id": new_id("user"), "role": "user", "content": text})

    async def answer(self, tool_call_id: str, content: Any) -> Reply:
        """A ToolMessage with a new message id, as the framework wants its answer."""
        text = content if isinstance(content, str) else json.dumps(content)
        return await self.send({"id": new_id("tool"), "role": "tool", "toolCallId": tool_call_id, "content": text})

    async def resume(self, *entries: Mapping[str, Any]) -> Reply:
        return await self.send(resume=list(entries))

    async def stored(self) -> dict[str, Any]:
        """The thread as GET /threads/{id} shows it."""
        response = await self.served.client.get(f"/threads/{self.thread.id}")
        assert response.status_code == 200, response.text
        shown: dict[str, Any] = response.json()
        return shown

    def body(self, text: str) -> dict[str, Any]:
        return run_input(self.thread.id, [{"id": new_id("user"), "role": "user", "content": text}])


def invented(found: Iterable[Any]) -> list[str]:
    """The events or messages that carry one of the adapter's invented answers."""
    return [json.dumps(item) for item in found if any(text in json.dumps(item) for text in INVENTED)]


def outcome(reply: Reply) -> dict[str, Any]:
    """The run's outcome, once it is sure the run finished (a RUN_ERROR fails here, with its code and message)."""
    assert reply.events, reply.events[-1:]
    assert reply.events[-1]["type"] == "RUN_FINISHED", reply.events[-1:]
    return reply.outcome


def call_ids(reply: Reply, name: str) -> list[str]:
    return [e["toolCallId"] for e in reply.calls if e["toolCallName"] == name]


def streamed_results(reply: Reply, call_id: str) -> list[str]:
    return [e["content"] for e in reply.of("TOOL_CALL_RESULT") if e["toolCallId"] == call_id]


def holders(messages: Iterable[Mapping[str, Any]], call_id: str) -> int:
    """How many assistant messages hold the call."""
    return sum(
        1 for m in messages if m["role"] == "assistant" and any(c["id"] == call_id for c in m.get("toolCalls") or [])
    )


def answers(messages: Iterable[Mapping[str, Any]], call_id: str) -> list[str]:
    """The contents of the ToolMessages that answer the call."""
    return [m["content"] for m in messages if m["role"] == "tool" and m.get("toolCallId") == call_id]


def once_each(messages: list[dict[str, Any]]) -> dict[str, str]:
    """What breaks the stored-thread rule: each call in exactly one assistant message, answered at most once."""
    problems: dict[str, str] = {}
    calls = Counter(c["id"] for m in messages if m["role"] == "assistant" for c in m.get("toolCalls") or [])
    held = {call: holders(messages, call) for call in calls}
    for call, count in calls.items():
        if count != 1 or held[call] != 1:
            problems[call] = f"held {count} times by {held[call]} assistant messages"
        elif len(answers(messages, call)) > 1:
            problems[call] = f"answered {len(answers(messages, call))} times: {answers(messages, call)}"
    for message in messages:
        if message["role"] == "tool" and message.get("toolCallId") not in calls:
            problems[message.get("toolCallId", "?")] = "answered but never called"
    return problems
