"""The five scenarios of seed 002, over real HTTP, in both frontend outcome modes."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest
from ag_ui.core import ActivityMessage, AssistantMessage, ToolMessage
from agui import (
    CONFIRM_ACTION,
    FRONTEND_TOOLS,
    Reply,
    cancelled,
    json_content,
    new_id,
    resolved,
    run_input,
    tool_answer,
    user,
)

from adapter.backends import ScriptedBackend

if TYPE_CHECKING:
    from conftest import Connect, Kit

frontend_outcomes = pytest.mark.parametrize("frontend_outcome", ["interrupt", "pending"])


def tool_messages(backend: ScriptedBackend, request: int = -1) -> dict[str, ToolMessage]:
    """The tool messages the model saw in one request, by tool call id."""
    return {m.tool_call_id: m for m in backend.requests[request].messages if isinstance(m, ToolMessage)}


def call_triad(reply: Reply, tool_call_id: str) -> list[str]:
    return [event["type"] for event in reply.with_call(tool_call_id)]


@frontend_outcomes
async def test_backend_tool_is_answered_within_one_run(
    connect: Connect, kit: Kit, backend: ScriptedBackend, frontend_outcome: str
) -> None:
    client = await connect(frontend_outcome=frontend_outcome)
    thread = client.thread(tools=FRONTEND_TOOLS)

    reply = await thread.say("where is order A17")

    (call,) = reply.calls
    assert call["toolCallName"] == "lookup_order"
    assert call_triad(reply, call["toolCallId"]) == [
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_RESULT",
    ]
    result = reply.results()[call["toolCallId"]]
    assert json.loads(result["content"]) == {"order": "A17", "status": "shipped", "total": 42.5}
    assert reply.index("TOOL_CALL_RESULT") < reply.index("TEXT_MESSAGE_START")
    assert "shipped" in reply.text
    assert reply.types[0] == "RUN_STARTED"
    assert reply.outcome == {"type": "success"}
    assert kit.calls["lookup_order"] == [{"order_id": "A17"}]
    assert len(backend.requests) == 2


async def test_frontend_tool_interrupts_and_resumes_with_the_payload(
    connect: Connect, backend: ScriptedBackend
) -> None:
    client = await connect(frontend_outcome="interrupt")
    thread = client.thread(tools=FRONTEND_TOOLS)

    first = await thread.say("go to orders")

    (call,) = first.calls
    call_id = call["toolCallId"]
    assert call["toolCallName"] == "navigate"
    assert call_triad(first, call_id) == ["TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END"]
    (interrupt,) = first.interrupts
    assert interrupt["reason"] == "tool_call"
    assert interrupt["toolCallId"] == call_id
    assert isinstance(interrupt["responseSchema"], dict)
    assert first.index("MESSAGES_SNAPSHOT") < first.index("RUN_FINISHED")
    snapshot = first.snapshot
    assert [c["id"] for m in snapshot for c in m.get("toolCalls", [])] == [call_id]
    assert not [m for m in snapshot if m["role"] == "tool" and m["toolCallId"] == call_id]
    assert set(first.outcome) == {"type", "interrupts"}

    second = await thread.resume(resolved(interrupt["id"], {"navigated": True, "url": "/orders"}))

    assert call_triad(second, call_id) == ["TOOL_CALL_RESULT"]
    assert json.loads(second.results()[call_id]["content"]) == {"navigated": True, "url": "/orders"}
    answer = tool_messages(backend)[call_id]
    assert json_content(answer.content) == {"navigated": True, "url": "/orders"}
    assert answer.error is None
    assert "navigate returned" in second.text
    assert second.outcome == {"type": "success"}


async def test_frontend_interrupt_ids_are_unique_per_call(connect: Connect) -> None:
    client = await connect(frontend_outcome="interrupt")
    thread = client.thread(tools=FRONTEND_TOOLS)

    reply = await thread.say("toast twice")

    ids = [interrupt["id"] for interrupt in reply.interrupts]
    assert len(set(ids)) == 2
    assert [i["toolCallId"] for i in reply.interrupts] == [c["toolCallId"] for c in reply.calls]


async def test_frontend_tool_pending_ends_in_success_and_is_answered_in_messages(
    connect: Connect, backend: ScriptedBackend
) -> None:
    client = await connect(frontend_outcome="pending")
    thread = client.thread(tools=FRONTEND_TOOLS)

    first = await thread.say("go to orders")

    (call,) = first.calls
    call_id = call["toolCallId"]
    assert first.outcome == {"type": "success", "pendingToolCallIds": [call_id]}
    assert call_triad(first, call_id) == ["TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END"]
    assert len(backend.requests) == 1
    assert [c["id"] for m in thread.messages for c in m.get("toolCalls", [])] == [call_id]

    second = await thread.answer(call_id, {"navigated": True})

    assert call_triad(second, call_id) == []
    assert json_content(tool_messages(backend)[call_id].content) == {"navigated": True}
    assert "navigate returned" in second.text
    assert second.outcome == {"type": "success"}
    assert len(backend.requests) == 2


async def test_pending_ids_list_every_unanswered_call_in_order(connect: Connect) -> None:
    client = await connect(frontend_outcome="pending")
    thread = client.thread(tools=FRONTEND_TOOLS)

    reply = await thread.say("toast twice")

    assert reply.outcome["pendingToolCallIds"] == [c["toolCallId"] for c in reply.calls]
    assert len(reply.calls) == 2


@frontend_outcomes
async def test_confirmation_tool_approved_by_the_user(
    connect: Connect, backend: ScriptedBackend, frontend_outcome: str
) -> None:
    client = await connect(frontend_outcome=frontend_outcome)
    thread = client.thread(tools=[CONFIRM_ACTION])

    first = await thread.say("delete invoice42")

    (call,) = first.calls
    call_id = call["toolCallId"]
    assert call["toolCallName"] == "confirm_action"
    assert json.loads(first.of("TOOL_CALL_ARGS")[0]["delta"]) == {"action": "delete invoice42"}
    if frontend_outcome == "interrupt":
        (interrupt,) = first.interrupts
        assert interrupt["toolCallId"] == call_id
        second = await thread.resume(resolved(interrupt["id"], {"confirmed": True}))
        assert call_triad(second, call_id) == ["TOOL_CALL_RESULT"]
    else:
        assert first.outcome["pendingToolCallIds"] == [call_id]
        second = await thread.answer(call_id, {"confirmed": True})
        assert call_triad(second, call_id) == []

    assert json_content(tool_messages(backend)[call_id].content) == {"confirmed": True}
    assert 'confirm_action returned {"confirmed": true}' in second.text
    assert second.outcome == {"type": "success"}


@frontend_outcomes
async def test_lookup_then_approved_refund_runs_once_with_the_proposed_arguments(
    connect: Connect, kit: Kit, backend: ScriptedBackend, frontend_outcome: str
) -> None:
    client = await connect(frontend_outcome=frontend_outcome)
    thread = client.thread(tools=FRONTEND_TOOLS)

    first = await thread.say("refund order A17")

    lookup, refund = first.calls
    assert (lookup["toolCallName"], refund["toolCallName"]) == ("lookup_order", "refund_order")
    assert list(first.results()) == [lookup["toolCallId"]]
    assert first.index("TOOL_CALL_RESULT") < first.types.index("TOOL_CALL_START", first.index("TOOL_CALL_RESULT"))
    (interrupt,) = first.interrupts
    assert interrupt["reason"] == "tool_call"
    assert interrupt["toolCallId"] == refund["toolCallId"]
    assert interrupt["responseSchema"]["required"] == ["approved"]
    assert "editedArgs" in interrupt["responseSchema"]["properties"]
    assert kit.count("refund_order") == 0

    second = await thread.resume(resolved(interrupt["id"], {"approved": True}))

    assert call_triad(second, refund["toolCallId"]) == ["TOOL_CALL_RESULT"]
    assert second.results()[refund["toolCallId"]]["content"] == "refunded 42.5 on A17"
    assert kit.calls["refund_order"] == [{"order_id": "A17", "amount": 42.5}]
    assert kit.calls["lookup_order"] == [{"order_id": "A17"}]
    assert "refund_order returned refunded 42.5 on A17" in second.text
    assert second.outcome == {"type": "success"}
    first_ids = {e["messageId"] for e in first.events if "messageId" in e}
    second_ids = {e["messageId"] for e in second.events if "messageId" in e}
    assert first_ids.isdisjoint(second_ids)


@frontend_outcomes
@pytest.mark.parametrize(
    ("answer", "error"),
    [
        pytest.param(lambda i: resolved(i, {"approved": False}), "declined", id="rejected"),
        pytest.param(cancelled, "cancelled", id="cancelled"),
    ],
)
async def test_declined_approval_never_runs_and_the_model_is_told(
    connect: Connect, kit: Kit, backend: ScriptedBackend, frontend_outcome: str, answer: Any, error: str
) -> None:
    client = await connect(frontend_outcome=frontend_outcome)
    thread = client.thread(tools=FRONTEND_TOOLS)
    first = await thread.say("email ceo@x.io")
    (interrupt,) = first.interrupts
    call_id = interrupt["toolCallId"]

    second = await thread.resume(answer(interrupt["id"]))

    assert kit.count("send_email") == 0
    told = tool_messages(backend)[call_id]
    assert told.error == error
    assert error in told.content
    assert "not executed" in told.content
    assert call_triad(second, call_id) == ["TOOL_CALL_RESULT"]
    (result,) = [e for e in second.of("TOOL_CALL_RESULT") if e["toolCallId"] == call_id]
    assert result["metadata"] == {"error": error}
    assert "RUN_ERROR" not in second.types
    assert second.outcome == {"type": "success"}
    assert "send_email was not completed" in second.text


@frontend_outcomes
async def test_cancelled_frontend_call_tells_the_model(
    connect: Connect, backend: ScriptedBackend, frontend_outcome: str
) -> None:
    client = await connect(frontend_outcome="interrupt", frontend_outcome_overrides={"navigate": frontend_outcome})
    thread = client.thread(tools=FRONTEND_TOOLS)
    first = await thread.say("go to settings")
    if frontend_outcome == "pending":
        (call_id,) = first.outcome["pendingToolCallIds"]
        second = await thread.answer(call_id, "the user closed the page")
        assert tool_messages(backend)[call_id].content == "the user closed the page"
    else:
        (interrupt,) = first.interrupts
        call_id = interrupt["toolCallId"]
        second = await thread.resume(cancelled(interrupt["id"]))
        assert tool_messages(backend)[call_id].error == "cancelled"

    assert second.outcome == {"type": "success"}
    assert isinstance(backend.requests[-1].messages[-1], ToolMessage)
    assert isinstance(backend.requests[-1].messages[-2], AssistantMessage)


async def test_run_identity_is_echoed_with_the_parent_run(connect: Connect) -> None:
    client = await connect()
    body = run_input(new_id("thread"), [user("hello")], parentRunId="run-parent")

    reply = await client.post(body)

    assert reply.types[0] == "RUN_STARTED"
    assert (reply.started["threadId"], reply.started["runId"]) == (body["threadId"], body["runId"])
    assert reply.started["parentRunId"] == "run-parent"
    assert (reply.finished["threadId"], reply.finished["runId"]) == (body["threadId"], body["runId"])


async def test_state_is_snapshotted_before_an_interrupt(connect: Connect, backend: ScriptedBackend) -> None:
    client = await connect()
    state = {"cart": ["lamp"], "note": None}

    reply = await client.thread().say("email ceo@x.io", state=state)

    (snapshot,) = reply.of("STATE_SNAPSHOT")
    assert snapshot["snapshot"] == state
    assert reply.index("MESSAGES_SNAPSHOT") < reply.index("RUN_FINISHED")
    assert reply.index("STATE_SNAPSHOT") < reply.index("RUN_FINISHED")
    assert reply.outcome["type"] == "interrupt"
    assert backend.requests[0].state == state


async def test_history_is_repaired_before_the_model_sees_it(connect: Connect, backend: ScriptedBackend) -> None:
    client = await connect()
    calls = [
        {"id": f"call_{n}", "type": "function", "function": {"name": "lookup_order", "arguments": "{}"}}
        for n in ("answered", "orphan")
    ]
    history = [
        user("earlier"),
        {"id": "a1", "role": "assistant", "toolCalls": calls},
        {"id": "act1", "role": "activity", "activityType": "progress", "content": {"done": 1}},
        tool_answer("call_answered", "found"),
        tool_answer("call_nowhere", "stray"),
        user("hello"),
    ]

    reply = await client.post(run_input(new_id("thread"), history))

    assert reply.outcome == {"type": "success"}
    seen = backend.requests[0].messages
    assert not [m for m in seen if isinstance(m, ActivityMessage)]
    answers = [m for m in seen if isinstance(m, ToolMessage)]
    assert [(m.tool_call_id, m.error) for m in answers] == [("call_answered", None), ("call_orphan", "missing")]
    assert answers[0].content == "found"
    position = {m.id: i for i, m in enumerate(seen)}
    assert position[answers[0].id] == position["a1"] + 1
    assert position[answers[1].id] == position["a1"] + 2
    for message in seen:
        if isinstance(message, AssistantMessage):
            for call in message.tool_calls or []:
                assert sum(isinstance(m, ToolMessage) and m.tool_call_id == call.id for m in seen) == 1
