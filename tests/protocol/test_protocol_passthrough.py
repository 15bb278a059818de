"""An upstream's events that the adapter does not derive itself reach the client as they came, sub-agents' included."""

from __future__ import annotations

import asyncio
from typing import Any, get_args

from ag_ui.core import BaseEvent, Event, EventType, RunAgentInput
from agui import run_events, run_input, user
from hypothesis import given
from hypothesis import strategies as st
from protocol_models import ids, instances, upstream, wire
from pydantic import BaseModel
from upstreams.scripted import text

from adapter import Adapter
from adapter.backends import AGUIUpstream
from adapter.backends._upstream_events import DERIVED  # private on purpose: the rule's own statement of what it reads

EVENT_MODELS: dict[EventType, type[BaseModel]] = {
    model.model_fields["type"].default: model for model in get_args(get_args(Event)[0])
}
FOLLOWED = frozenset({EventType.STATE_SNAPSHOT, EventType.STATE_DELTA})
"""Passed through, and followed: the turn's state moves with them, and a delta that does not apply fails the run."""
PASSED = sorted(set(EventType) - DERIVED - FOLLOWED)
ATTRIBUTABLE = sorted(kind for kind in DERIVED if "subagent_run_id" in EVENT_MODELS[kind].model_fields)


@st.composite
def passed_events(draw: st.DrawFn) -> BaseEvent:
    """Any event of a type the adapter does not derive, and any event of a derived type that a sub-agent made."""
    kinds = [instances(EVENT_MODELS[kind]) for kind in PASSED]
    attributed = [instances(EVENT_MODELS[kind], subagent_run_id=ids) for kind in ATTRIBUTABLE]
    event: BaseEvent = draw(st.one_of(kinds + attributed))
    return event


def test_the_adapter_derives_only_the_run_lifecycle_text_calls_and_the_snapshot() -> None:
    assert {kind.value for kind in DERIVED} == {
        "RUN_STARTED",
        "RUN_FINISHED",
        "RUN_ERROR",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "TEXT_MESSAGE_CHUNK",
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_CHUNK",
        "TOOL_CALL_RESULT",
        "MESSAGES_SNAPSHOT",
    }
    assert set(EVENT_MODELS) == set(EventType)


@given(st.lists(passed_events(), max_size=8))
def test_every_event_the_adapter_does_not_derive_reaches_the_client_unchanged(sent: list[BaseEvent]) -> None:
    events = asyncio.run(through_the_adapter([wire(event) for event in sent]))

    assert [event["type"] for event in (events[0], events[-1])] == ["RUN_STARTED", "RUN_FINISHED"]
    assert events[1:-1] == [wire(event) for event in sent]


async def through_the_adapter(sent: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the client gets from one run whose upstream sends `sent` between its RUN_STARTED and RUN_FINISHED."""
    backend = AGUIUpstream(upstream([sent]))
    try:
        body = RunAgentInput.model_validate(run_input("t1", [user("hi")]))
        return [wire(event) async for event in Adapter(backend).run(body)]
    finally:
        await backend.aclose()


SUBAGENT: list[dict[str, Any]] = [
    {"type": "SUBAGENT_STARTED", "subagentRunId": "sub-1", "name": "researcher", "parentToolCallId": "up-call"},
    {"type": "STEP_STARTED", "stepName": "search", "subagentRunId": "sub-1"},
    {"type": "TEXT_MESSAGE_START", "messageId": "sub-m1", "role": "assistant", "subagentRunId": "sub-1"},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "sub-m1", "delta": "looking", "subagentRunId": "sub-1"},
    {"type": "TEXT_MESSAGE_END", "messageId": "sub-m1", "subagentRunId": "sub-1"},
    {
        "type": "TOOL_CALL_START",
        "toolCallId": "sub-c1",
        "toolCallName": "web_search",
        "parentMessageId": "sub-m1",
        "subagentRunId": "sub-1",
    },
    {"type": "TOOL_CALL_ARGS", "toolCallId": "sub-c1", "delta": '{"q": "agui"}', "subagentRunId": "sub-1"},
    {"type": "TOOL_CALL_END", "toolCallId": "sub-c1", "subagentRunId": "sub-1"},
    {
        "type": "TOOL_CALL_RESULT",
        "messageId": "sub-r1",
        "toolCallId": "sub-c1",
        "content": "3 hits",
        "subagentRunId": "sub-1",
    },
    {"type": "STEP_FINISHED", "stepName": "search", "subagentRunId": "sub-1"},
    {"type": "SUBAGENT_FINISHED", "subagentRunId": "sub-1", "result": {"found": 3}},
]


async def test_a_subagents_events_arrive_unchanged_and_are_not_the_agents_own() -> None:
    adapter = Adapter(AGUIUpstream(upstream([[*SUBAGENT, *text("Found 3.")]])))

    events = await run_events(adapter, run_input("t1", [user("research agui")]))

    assert [event for event in events if event.get("subagentRunId")] == SUBAGENT
    assert events[-1]["outcome"] == {"type": "success"}  # the sub-agent's call is its own: nobody is asked to run it
    thread = await adapter.thread("t1")
    assert thread is not None
    assert [(m["role"], m.get("content")) for m in thread["messages"]] == [
        ("user", "research agui"),
        ("assistant", "Found 3."),
    ]


async def test_what_a_subagent_left_open_is_closed_when_the_upstream_fails() -> None:
    failing: list[dict[str, Any]] = [*SUBAGENT[:4], {"type": "RUN_ERROR", "message": "the model went away"}]
    adapter = Adapter(AGUIUpstream(upstream([failing])))

    events = await run_events(adapter, run_input("t1", [user("research agui")]))

    assert events[1:5] == SUBAGENT[:4]
    assert events[5:] == [
        {"type": "TEXT_MESSAGE_END", "messageId": "sub-m1", "subagentRunId": "sub-1"},
        {"type": "STEP_FINISHED", "stepName": "search", "subagentRunId": "sub-1"},
        {"type": "SUBAGENT_ERROR", "subagentRunId": "sub-1", "message": "The run ended before the subagent finished."},
        events[-1],
    ]
    assert events[-1]["type"] == "RUN_ERROR"
    assert events[-1]["code"] == "UPSTREAM_ERROR"
