"""`FormRequired` raised by a backend tool: the replay, its protocol error and the tool-call quota."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from ag_ui.core import ToolMessage
from agui import collect
from formkit import DETAILS, TICKET_REQUEST, arguments, interrupt_of, of, say, spied

from adapter import Adapter, FormRequired, Limits, ToolContext, tool
from adapter.backends import Call, Rule, ScriptedBackend
from examples.support_ticket import RULES as TICKET_RULES
from examples.support_ticket import SUPPORT_TICKET_FORM, create_support_ticket


@tool
def stubborn(ctx: ToolContext) -> str:
    """Asks for the form whatever it is given: a protocol error."""
    raise FormRequired(SUPPORT_TICKET_FORM)


@tool
def notify_team(text: str) -> str:
    """Tell the on-call team."""
    return f"notified: {text}"


RULES = [
    *TICKET_RULES,
    Rule(r"stubborn", steps=[[Call("stubborn")]]),
    Rule(
        r"ticket then notify",
        steps=[
            [Call("create_support_ticket", {"title": "Login failure", "priority": "HIGH"})],
            [Call("notify_team", {"text": "login is down"})],
        ],
    ),
]


def adapter_with(*tools: Any, **options: Any) -> tuple[Adapter, ScriptedBackend]:
    backend = ScriptedBackend(RULES)
    return Adapter(backend, tools=list(tools), **options), backend


def answer(interrupt: dict[str, Any], payload: Any = DETAILS) -> list[dict[str, Any]]:
    return [{"interruptId": interrupt["id"], "status": "resolved", "payload": payload}]


async def test_the_replay_sees_the_data_and_the_same_idempotency_key() -> None:
    ticket, runs = spied(create_support_ticket)
    adapter, _ = adapter_with(ticket)
    asked = interrupt_of(await say(adapter, "t-replay", TICKET_REQUEST))

    events = await collect(adapter.resume("t-replay", answer(asked)), resumed=True)

    first, replay = runs
    assert arguments(first) == arguments(replay) == {"title": "Login failure", "priority": "HIGH"}
    assert first["ctx"].submitted_form_data is None
    assert replay["ctx"].submitted_form_data == DETAILS
    assert replay["ctx"].idempotency_key == first["ctx"].idempotency_key
    assert replay["ctx"].tool_call_id == first["ctx"].tool_call_id == asked["toolCallId"]
    (result,) = of(events, "TOOL_CALL_RESULT")
    assert result["toolCallId"] == asked["toolCallId"]
    assert json.loads(result["content"])["ticketId"] == f"INC-{first['ctx'].idempotency_key[:8]}"


async def test_a_cancelled_form_never_replays_the_tool() -> None:
    ticket, runs = spied(create_support_ticket)
    adapter, backend = adapter_with(ticket)
    asked = interrupt_of(await say(adapter, "t-cancelled", TICKET_REQUEST))

    cancel = [{"actionId": asked["toolCallId"], "status": "cancelled"}]
    events = await collect(adapter.resume("t-cancelled", cancel), resumed=True)

    assert len(runs) == 1
    (card,) = of(events, "ACTIVITY_SNAPSHOT")
    assert card["content"]["status"] == "CANCELLED"
    seen = next(m for m in backend.requests[-1].messages if isinstance(m, ToolMessage))
    assert (seen.tool_call_id, seen.error) == (asked["toolCallId"], "cancelled")
    assert of(events, "RUN_FINISHED")[0]["outcome"] == {"type": "success"}


async def test_a_second_form_required_after_the_data_is_a_protocol_error(caplog: pytest.LogCaptureFixture) -> None:
    tool_, runs = spied(stubborn)
    adapter, backend = adapter_with(tool_)
    asked = interrupt_of(await say(adapter, "t-stubborn", "stubborn"))

    with caplog.at_level(logging.ERROR, logger="adapter.answers"):
        events = await collect(adapter.resume("t-stubborn", answer(asked)), resumed=True)

    assert len(runs) == 2
    assert of(events, "RUN_FINISHED")[0]["outcome"] == {"type": "success"}
    (result,) = of(events, "TOOL_CALL_RESULT")
    assert "protocol error" in result["content"]
    seen = next(m for m in backend.requests[-1].messages if isinstance(m, ToolMessage))
    assert (seen.tool_call_id, seen.error) == (asked["toolCallId"], "INPUT_REQUIRED_AGAIN")
    assert [r.getMessage().split(":")[0] for r in caplog.records] == ["INPUT_REQUIRED_AGAIN"]
    record = await adapter.thread("t-stubborn")
    assert record is not None
    assert record["interrupts"] == []


async def test_the_quota_counts_an_interrupted_call_and_its_replay_once() -> None:
    ticket, runs = spied(create_support_ticket)
    adapter, backend = adapter_with(ticket, notify_team, limits=Limits(max_tool_calls=1))
    asked = interrupt_of(await say(adapter, "t-quota", "ticket then notify"))

    events = await collect(adapter.resume("t-quota", answer(asked)), resumed=True)

    results = {event["toolCallId"]: event["content"] for event in of(events, "TOOL_CALL_RESULT")}
    assert json.loads(results[asked["toolCallId"]])["impactScope"] == "ALL_USERS"
    assert len(runs) == 2
    (refused,) = [m for m in backend.requests[-1].messages if isinstance(m, ToolMessage) and m.error]
    assert refused.error == "tool_limit"
    assert refused.content == "The limit of 1 tool calls is reached."
    assert of(events, "RUN_FINISHED")[0]["outcome"] == {"type": "success"}


async def test_within_the_quota_the_replay_leaves_room_for_the_next_call() -> None:
    ticket, _ = spied(create_support_ticket)
    adapter, backend = adapter_with(ticket, notify_team, limits=Limits(max_tool_calls=2))
    asked = interrupt_of(await say(adapter, "t-room", "ticket then notify"))

    events = await collect(adapter.resume("t-room", answer(asked)), resumed=True)

    assert [event["content"] for event in of(events, "TOOL_CALL_RESULT")][-1] == "notified: login is down"
    assert all(m.error is None for m in backend.requests[-1].messages if isinstance(m, ToolMessage))
