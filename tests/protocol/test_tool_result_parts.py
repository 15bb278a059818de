"""Tool results as content parts (AG-UI 1.0: a tool message's content is text or parts): parts stay parts.

A tool that returns parts, and an upstream whose `TOOL_CALL_RESULT` carries parts, are streamed, stored and sent
back as parts; a client older than 1.0 (no `protocolVersion`), whose tool messages hold text only, gets their text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ag_ui.core import (
    AudioPart,
    BaseEvent,
    DocumentPart,
    EventType,
    ImagePart,
    MessagesSnapshotEvent,
    TextPart,
    ToolCallResultEvent,
    ToolMessage,
    UrlSource,
    VideoPart,
)
from agui import run_events, run_input, user
from hypothesis import given
from hypothesis import strategies as st
from protocol_models import Recorder, instances, upstream, wire

from adapter import Adapter, tool
from adapter._compat import downgraded  # private on purpose: the downgrade itself, for any event
from adapter.backends import AGUIUpstream, ModelRequest, TextDelta, ToolCall

CHART = [TextPart(text="Sales by month"), ImagePart(source=UrlSource(value="https://charts.test/sales.png"))]


@tool
def sales_chart() -> list[Any]:
    """Draw the sales chart."""
    return list(CHART)


@dataclass
class CallsOnce:
    """A backend that calls `sales_chart`, then answers; keeps every request."""

    requests: list[ModelRequest] = field(default_factory=list)

    async def stream(self, request: ModelRequest) -> Any:
        self.requests.append(request)
        if len(self.requests) == 1:
            yield ToolCall("call-1", "sales_chart")
        else:
            yield TextDelta("Here it is.")


async def test_a_tools_parts_are_streamed_stored_and_sent_back_as_parts() -> None:
    backend = CallsOnce()
    adapter = Adapter(backend, tools=[sales_chart])

    events = await run_events(adapter, run_input("t1", [user("chart?")]))

    (result,) = [e for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert result["content"] == [wire(part) for part in CHART]
    answer = backend.requests[1].messages[-1]
    assert isinstance(answer, ToolMessage)
    assert not isinstance(answer.content, str)
    assert [wire(part) for part in answer.content] == result["content"]
    thread = await adapter.thread("t1")
    assert thread is not None
    assert thread["messages"][2]["content"] == result["content"]


async def test_an_upstreams_parts_reach_the_client_the_store_and_the_next_upstream_run() -> None:
    parts = [wire(part) for part in CHART]
    call: list[dict[str, Any]] = [
        {"type": "TOOL_CALL_START", "toolCallId": "own-1", "toolCallName": "chart", "parentMessageId": "up-m1"},
        {"type": "TOOL_CALL_END", "toolCallId": "own-1"},
        {"type": "TOOL_CALL_RESULT", "messageId": "up-t1", "toolCallId": "own-1", "content": parts},
    ]
    recorded = Recorder(upstream([call, []]))
    adapter = Adapter(AGUIUpstream(recorded))

    events = await run_events(adapter, run_input("t1", [user("chart?")]))
    await run_events(adapter, run_input("t1", [user("thanks")]))

    (result,) = [e for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert result["content"] == parts
    stored = await adapter.thread("t1")
    assert stored is not None
    assert stored["messages"][2]["content"] == parts
    assert recorded.request(1)["messages"][2]["content"] == parts


async def test_a_client_older_than_1_0_gets_the_text_of_the_parts() -> None:
    adapter = Adapter(CallsOnce(), tools=[sales_chart])
    body = run_input("t1", [user("chart?")])
    del body["protocolVersion"]

    events = await run_events(adapter, body)

    (result,) = [e for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert result["content"] == "Sales by month"


part_lists = st.lists(
    st.one_of([instances(kind) for kind in (TextPart, ImagePart, AudioPart, VideoPart, DocumentPart)])
)


@given(st.one_of(instances(ToolCallResultEvent, content=part_lists), instances(MessagesSnapshotEvent)))
def test_an_older_client_gets_the_text_parts_joined_and_everything_else_unchanged(event: BaseEvent) -> None:
    older = wire(downgraded(event))

    if isinstance(event, ToolCallResultEvent):
        assert isinstance(event.content, list)
        assert older == {**wire(event), "content": "".join(p.text for p in event.content if isinstance(p, TextPart))}
    else:
        assert isinstance(event, MessagesSnapshotEvent)
        assert event.type == EventType.MESSAGES_SNAPSHOT
        for mine, theirs in zip(event.messages, older["messages"], strict=True):
            if isinstance(mine, ToolMessage) and not isinstance(mine.content, str):
                text = "".join(p.text for p in mine.content if isinstance(p, TextPart))
                assert theirs == {**wire(mine), "content": text}
            else:
                assert theirs == wire(mine)
