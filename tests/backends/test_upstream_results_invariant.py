"""The rule of issue 20 as an invariant: whatever an upstream does around its interrupt, each call is answered once.

Hypothesis draws an upstream's plan: which own calls its interrupted run makes, which get a (provisional)
result before the interrupt, how the interrupt refers to them (by toolCallId, through a metadata link,
through a separate confirmation call, or not at all), and which results the resumed run sends, in what
order, how often, and whether only in a MESSAGES_SNAPSHOT. Through the adapter, each call is answered
at most once in what is streamed, stored and sent next: the upstream's last word, else the person's answer to
the interrupt that named it; a call nobody answered stays open (issue 27: the adapter never invents an answer)
and reaches the client as a pending call.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

import httpx
from ag_ui.core import RunAgentInput
from agui import new_id, resolved, run_input, user
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route
from upstreams.kit import tool_call_problems
from upstreams.scripted import framed_run

from adapter import Adapter

# Private on purpose: the SSE framing of the events checked.
from adapter._edge._sse import encode_event
from adapter.backends import AGUIUpstream
from adapter.client import parse_sse

NAMINGS = ("tool_call_id", "metadata", "confirmation", "none")


@dataclass(frozen=True)
class Plan:
    calls: int
    before: tuple[bool, ...]
    """Per call: a provisional result before the interrupt."""
    naming: str
    after: tuple[tuple[int, str], ...]
    """The resumed run's results, in order: (call index, "event" or "snapshot")."""


@st.composite
def plans(draw: st.DrawFn) -> Plan:
    calls = draw(st.integers(1, 3))
    before = tuple(draw(st.lists(st.booleans(), min_size=calls, max_size=calls)))
    after = draw(st.lists(st.tuples(st.integers(0, calls - 1), st.sampled_from(["event", "snapshot"])), max_size=5))
    return Plan(calls, before, draw(st.sampled_from(NAMINGS)), tuple(after))


def _ids(run_id: str, plan: Plan) -> list[str]:
    return [f"c{index}-{run_id[-8:]}" for index in range(plan.calls)]


def _events(body: dict[str, Any], plan: Plan) -> list[dict[str, Any]]:
    if not body.get("resume"):
        if body["messages"][-1]["content"] != "go":
            return []
        return _interrupted(body, plan)
    held = [c["id"] for m in body["messages"] if m["role"] == "assistant" for c in m.get("toolCalls") or []]
    own = [call_id for call_id in held if call_id.startswith("c")]
    events: list[dict[str, Any]] = []
    for number, (index, how) in enumerate(plan.after):
        content = f"final {index}.{number}"
        if how == "event":
            events.append({"type": "TOOL_CALL_RESULT", "messageId": f"f-{own[index]}-{number}",
                           "toolCallId": own[index], "content": content})  # fmt: skip
        else:
            told = {"id": f"f-{own[index]}-{number}", "role": "tool", "toolCallId": own[index], "content": content}
            events.append({"type": "MESSAGES_SNAPSHOT", "messages": [*body["messages"], told]})
    return events


def _interrupted(body: dict[str, Any], plan: Plan) -> list[dict[str, Any]]:
    ids, events = _ids(body["runId"], plan), []
    for index, call_id in enumerate(ids):
        events += [
            {"type": "TOOL_CALL_START", "toolCallId": call_id, "toolCallName": "own_tool", "parentMessageId": "m1"},
            {"type": "TOOL_CALL_END", "toolCallId": call_id},
        ]
        if plan.before[index]:
            events.append({"type": "TOOL_CALL_RESULT", "messageId": f"p-{call_id}", "toolCallId": call_id,
                           "content": f"provisional {index}"})  # fmt: skip
    interrupt: dict[str, Any] = {"id": f"int-{body['runId'][-8:]}", "reason": "confirmation"}
    if plan.naming == "tool_call_id":
        interrupt["toolCallId"] = ids[0]
    elif plan.naming == "metadata":
        interrupt["metadata"] = {"adk": {"originalFunctionCall": {"id": ids[0]}}}
    elif plan.naming == "confirmation":
        confirm = f"k-{body['runId'][-8:]}"
        events += [
            {"type": "TOOL_CALL_START", "toolCallId": confirm, "toolCallName": "confirm", "parentMessageId": "m1"},
            {"type": "TOOL_CALL_END", "toolCallId": confirm},
        ]
        interrupt |= {"toolCallId": confirm, "metadata": {"adk": {"originalFunctionCall": {"id": ids[0]}}}}
    return [*events, {"outcome": {"type": "interrupt", "interrupts": [interrupt]}}]


def upstream(plan: Plan) -> Starlette:
    async def run(request: Request) -> StreamingResponse:
        body = await request.json()
        return framed_run(body, _events(body, plan))

    return Starlette(routes=[Route("/", run, methods=["POST"])])


def expected(plan: Plan, index: int) -> list[str]:
    """The one answer a call ends with, or none: it stays open."""
    finals = [number for number, (which, _) in enumerate(plan.after) if which == index]
    if finals:
        return [f"final {index}.{finals[-1]}"]
    if plan.before[index]:
        return [f"provisional {index}"]
    if index == 0 and plan.naming in ("tool_call_id", "metadata", "confirmation"):
        return ['{"approved": true}']  # the interrupt named it: the person's answer is its answer
    return []


async def _run(adapter: Adapter, body: dict[str, Any]) -> list[dict[str, Any]]:
    events = [e async for e in adapter.run(RunAgentInput.model_validate(body))]
    return parse_sse("".join(encode_event(e) for e in events).encode()).events


async def _check(plan: Plan) -> None:
    sent: list[dict[str, Any]] = []

    async def record(request: httpx.Request) -> None:
        sent.append(json.loads(request.content))

    client = httpx.AsyncClient(transport=httpx.ASGITransport(upstream(plan)), event_hooks={"request": [record]})
    adapter = Adapter(AGUIUpstream("http://upstream/", client=client), frontend_outcome="pending")
    thread = new_id("thread")
    asked = await _run(adapter, run_input(thread, [user("go")]))
    (interrupt,) = asked[-1]["outcome"]["interrupts"]
    answered = await _run(adapter, run_input(thread, [], resume=[resolved(interrupt["id"], {"approved": True})]))
    stored = await adapter.thread(thread)
    assert stored is not None
    await _run(adapter, run_input(thread, [*stored["messages"], user("thanks")]))
    await client.aclose()

    calls = [e["toolCallId"] for e in asked if e["type"] == "TOOL_CALL_START" and e["toolCallName"] == "own_tool"]
    for index, call_id in enumerate(calls):
        streamed = [
            e["content"] for e in asked + answered if e["type"] == "TOOL_CALL_RESULT" and e["toolCallId"] == call_id
        ]
        kept = [m["content"] for m in stored["messages"] if m.get("toolCallId") == call_id]
        assert streamed == kept == expected(plan, index), (plan, index)
    left_open = [call_id for index, call_id in enumerate(calls) if not expected(plan, index)]
    assert answered[-1]["type"] == "RUN_FINISHED"
    assert answered[-1]["outcome"].get("pendingToolCallIds", []) == left_open
    assert tool_call_problems(stored["messages"], waiting=left_open) == []
    assert tool_call_problems(sent[-1]["messages"]) == []


@settings(max_examples=60)
@given(plan=plans())
def test_each_call_is_answered_once_with_the_upstreams_last_word(plan: Plan) -> None:
    asyncio.run(_check(plan))
