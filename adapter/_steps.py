"""Turning one backend step into AG-UI events."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from ag_ui.core import (
    AssistantMessage,
    BaseEvent,
    FunctionCall,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)
from ag_ui.core import ToolCall as WireToolCall

from adapter._types import BackendItem, TextDelta, ToolCall, Usage


@dataclass(slots=True)
class Step:
    """What one assistant step said and called, collected while it streams."""

    message_id: str
    text: list[str] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)
    usage: list[Usage] = field(default_factory=list)
    text_open: bool = False

    def message(self) -> AssistantMessage:
        """The step as the assistant message it adds to the conversation."""
        return AssistantMessage(
            id=self.message_id,
            content="".join(self.text) or None,
            tool_calls=[
                WireToolCall(id=call.id, function=FunctionCall(name=call.name, arguments=call.arguments))
                for call in self.calls
            ]
            or None,
        )

    def close_text(self) -> list[BaseEvent]:
        """End the step's text message if it is open."""
        if not self.text_open:
            return []
        self.text_open = False
        return [TextMessageEndEvent(message_id=self.message_id)]


async def stream_step(items: AsyncIterator[BackendItem], step: Step) -> AsyncIterator[BaseEvent]:
    """Stream a backend step as text and tool-call events, collecting it into `step`.

    A tool call is emitted whole (START, ARGS, END) the moment the backend hands it over, so no call
    is ever left open across an await.
    """
    async for item in items:
        if isinstance(item, TextDelta):
            if not item.text:
                continue  # an empty delta is legal but noisy (TXT-4)
            if not step.text_open:
                step.text_open = True
                yield TextMessageStartEvent(message_id=step.message_id, role="assistant")
            step.text.append(item.text)
            yield TextMessageContentEvent(message_id=step.message_id, delta=item.text)
        elif isinstance(item, ToolCall):
            for event in step.close_text():
                yield event
            step.calls.append(item)
            for event in tool_call_events(item, step.message_id):
                yield event
        elif isinstance(item, Usage):
            step.usage.append(item)
    for event in step.close_text():
        yield event


def tool_call_events(call: ToolCall, parent_message_id: str) -> list[BaseEvent]:
    """The START/ARGS/END triad of one call."""
    events: list[BaseEvent] = [
        ToolCallStartEvent(tool_call_id=call.id, tool_call_name=call.name, parent_message_id=parent_message_id)
    ]
    if call.arguments:
        events.append(ToolCallArgsEvent(tool_call_id=call.id, delta=call.arguments))
    events.append(ToolCallEndEvent(tool_call_id=call.id))
    return events
