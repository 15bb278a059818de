"""The world of the record machine (issue 27): a hostile AG-UI upstream behind `AGUIUpstream`, one real store.

The upstream is an in-process Starlette app. Before each request the machine hands it a `Plan`: what its
next run streams. The plan names shapes, and the upstream makes them concrete from what it is sent and
from the thread the machine knows: a fresh call of each kind, a call id reused in the run or from the
thread, a restatement of a call of the current turn, a result for a call it never deferred, an interrupt.
It says whether what it streamed was hostile (a call id that names another call: the run must end with
BACKEND_ERROR). Every later upstream run of the same request answers with text.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ag_ui.core import Message
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route
from upstreams.scripted import framed_run

from adapter import ToolContext, tool

OWN = "search"
"""The upstream's own tool: the engine never runs it; its result comes from the upstream, or from the client."""
ENGINE = ("pay", "lookup")
"""The engine's tools: `pay` asks for approval first, `lookup` runs at once."""
CLIENT = "navigate"
"""The client's tool."""
NAMES = (OWN, *ENGINE, CLIENT)

SHAPES = (
    "text",
    "own_done",  # an own call with its result
    "own_open",  # an own call left without a result
    "pay",
    "lookup",
    "navigate",
    "reuse_in_run",  # a second call under an id this run already used
    "reuse_old",  # a call under an id the thread already uses (an answered call of an earlier turn among them)
    "restate",  # a call of the current turn again, same id and name, maybe with its result
    "foreign_result",  # TOOL_CALL_RESULT for a call the upstream did not defer (a client's, an approval's)
    "old_message_id",  # a text message under the id of a stored message
)
ENDINGS = ("success", "interrupt", "interrupt_call")
"""How the run ends: success, the upstream's interrupt, or its interrupt naming its first own call of the run."""


@dataclass
class Plan:
    """What the upstream streams in the next request's first run."""

    shapes: Sequence[str]
    ending: str
    pick: int
    """Which call a reuse, a restatement or a foreign result names, among those it may name."""
    thread_calls: Sequence[tuple[str, str]] = ()
    """The calls of the stored thread, id and tool name: a reuse may name any, older than a view's tail too."""
    answered: frozenset[str] = frozenset()
    """The calls the stored thread answers: a result for one is a second answer."""
    stored: frozenset[str] = frozenset()
    """The ids of the stored thread's messages."""


@dataclass
class Served:
    """What one upstream run streamed, as the machine judges it."""

    thread_id: str
    messages: list[dict[str, Any]]
    """The messages it was sent."""
    shapes: list[str] = field(default_factory=list)
    """The shapes it made concrete (a shape with nothing to name falls back to text)."""
    hostile: bool = False
    """It opened a call under an id the thread uses: the run must end with BACKEND_ERROR."""
    judged: bool = True
    """False when the run may end either way (a message id reused: the engine may mint another, or refuse it)."""


@dataclass
class Upstream:
    """A scripted AG-UI agent server: each request's first run follows the plan; it records what it was sent."""

    plan: Plan | None = None
    served: list[Served] = field(default_factory=list)
    results: dict[str, set[str]] = field(default_factory=dict)
    """Every result it gave one of its own calls, by call id."""
    numbers: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    @property
    def app(self) -> Starlette:
        return Starlette(routes=[Route("/", self._run, methods=["POST"])])

    def fresh(self, prefix: str) -> str:
        return f"{prefix}-{next(self.numbers)}"

    async def _run(self, request: Request) -> StreamingResponse:
        body = await request.json()
        served = Served(body["threadId"], list(body["messages"]))
        self.served.append(served)
        plan, self.plan = self.plan, None
        events = self.events(plan, served) if plan is not None else self.text("Done.")
        ending: dict[str, Any] = {"outcome": {"type": "success"}}
        if plan is not None and plan.ending != "success":
            interrupt: dict[str, Any] = {"id": self.fresh("up-int"), "reason": "confirmation"}
            # a new own call of this run: an interrupt naming a call the thread answered is refused by the engine
            # (BACKEND_ERROR; test_record_findings.py), a shape this benign upstream does not send
            restated = {c["id"] for m in served.messages if m["role"] == "assistant" for c in _calls(m)}
            own = [
                e["toolCallId"]
                for e in events
                if e["type"] == "TOOL_CALL_START" and e["toolCallName"] == OWN and e["toolCallId"] not in restated
            ]
            if plan.ending == "interrupt_call" and own:
                interrupt["toolCallId"] = own[0]
            ending = {"outcome": {"type": "interrupt", "interrupts": [interrupt]}}
        return framed_run(body, [*events, ending])

    def events(self, plan: Plan, served: Served) -> list[dict[str, Any]]:
        messages = served.messages
        last_user = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=-1)
        turn = {c["id"]: c for m in messages[last_user + 1 :] if m["role"] == "assistant" for c in _calls(m)}
        sent = {c["id"]: c["function"]["name"] for m in messages if m["role"] == "assistant" for c in _calls(m)}
        held = dict(plan.thread_calls) | sent
        answered = set(plan.answered)  # a call answered in `messages` alone may hold a provisional answer
        sent_ids = [m["id"] for m in messages]
        stored = set(plan.stored)
        events: list[dict[str, Any]] = []
        for shape in plan.shapes:
            made = self.shape(shape, plan.pick, turn, held, answered, stored, sent_ids, served)
            if made is None:
                made, shape = self.text("Nothing to name."), "text"
            served.shapes.append(shape)
            events += made
        return events

    def shape(
        self,
        shape: str,
        pick: int,
        turn: dict[str, dict[str, Any]],
        held: dict[str, str],
        answered: set[str],
        stored: set[str],
        sent_ids: list[str],
        served: Served,
    ) -> list[dict[str, Any]] | None:
        if shape == "text":
            return self.text("Here you are.")
        if shape in ("own_done", "own_open"):
            call_id = self.fresh("up-c")
            return self.call(call_id, OWN) + (self.result(call_id, own=True) if shape == "own_done" else [])
        if shape in ("pay", "lookup"):
            return self.call(self.fresh("up-c"), shape, json.dumps({"amount": str(pick)}))
        if shape == "navigate":
            return self.call(self.fresh("up-c"), CLIENT, json.dumps({"path": f"/page{pick}"}))
        if shape == "reuse_in_run":
            call_id = self.fresh("up-c")
            served.hostile = True
            return self.call(call_id, OWN) + self.call(call_id, NAMES[pick % len(NAMES)])
        if shape == "reuse_old":
            old = sorted(held)
            if not old:
                return None
            call_id = old[pick % len(old)]
            name = held[call_id]
            if call_id in turn and turn[call_id]["function"]["name"] == name:
                name = next(n for n in NAMES if n != name)  # the same name would be a restatement
            served.hostile = True
            return self.call(call_id, name, "{}")
        if shape == "restate":
            if not turn:
                return None
            call = list(turn.values())[pick % len(turn)]
            call_id, name = call["id"], call["function"]["name"]
            again = self.call(call_id, name, call["function"]["arguments"])
            return again + (self.result(call_id, own=name == OWN) if pick % 2 else [])
        if shape == "old_message_id":
            # any id the thread or the request holds: one older than a view's tail, one left out of a branch, one
            # the engine sent and has not stored yet (a provisional answer): the message gets an id of its own
            names = sorted(set(sent_ids) | set(stored))
            if not names:
                return None
            served.judged = False
            return self.text("Said again.", names[pick % len(names)])
        if shape == "foreign_result":
            foreign = sorted(c for c, name in held.items() if name != OWN or c in answered)
            if not foreign:
                return None
            return self.result(foreign[pick % len(foreign)], own=False)
        raise AssertionError(shape)

    def call(self, call_id: str, name: str, arguments: str = "{}") -> list[dict[str, Any]]:
        parent = self.fresh("up-m")
        return [
            {"type": "TOOL_CALL_START", "toolCallId": call_id, "toolCallName": name, "parentMessageId": parent},
            {"type": "TOOL_CALL_ARGS", "toolCallId": call_id, "delta": arguments},
            {"type": "TOOL_CALL_END", "toolCallId": call_id},
        ]

    def result(self, call_id: str, *, own: bool) -> list[dict[str, Any]]:
        """The upstream's result for a call: of its own, one it may give; else a forged one, never to be kept."""
        content = self.fresh("upstream result" if own else "FORGED BY UPSTREAM")
        if own:
            self.results.setdefault(call_id, set()).add(content)
        return [
            {"type": "TOOL_CALL_RESULT", "messageId": self.fresh("up-r"), "toolCallId": call_id, "content": content}
        ]

    def text(self, words: str, message_id: str | None = None) -> list[dict[str, Any]]:
        message_id = message_id or self.fresh("up-t")
        return [
            {"type": "TEXT_MESSAGE_START", "messageId": message_id, "role": "assistant"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": message_id, "delta": words},
            {"type": "TEXT_MESSAGE_END", "messageId": message_id},
        ]


def _calls(message: dict[str, Any]) -> list[dict[str, Any]]:
    return list(message.get("toolCalls") or [])


@dataclass
class Bank:
    """The engine's tools, and what `pay` really did."""

    paid: dict[str, list[str]] = field(default_factory=dict)
    """The results of `pay`, by call id: more than one is a payment made twice."""

    def tools(self) -> list[Any]:
        @tool(requires_approval=True)
        def pay(amount: str, ctx: ToolContext) -> str:
            """Pay an amount."""
            result = f"paid {amount} for {ctx.tool_call_id}"
            self.paid.setdefault(ctx.tool_call_id, []).append(result)
            return result

        @tool
        def lookup(amount: str = "0") -> str:
            """Look something up."""
            return f"found {amount}"

        return [pay, lookup]


class TailView:
    """A history view that needs only the last `tail` stored messages (read only that many, history="server")."""

    def __init__(self, tail: int) -> None:
        self.tail = tail

    def __call__(self, history: list[Message]) -> Sequence[Message]:
        return history[-self.tail :]
