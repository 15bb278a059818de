"""An upstream AG-UI agent's event stream as backend items, read as it arrives.

    RUN_STARTED, TEXT_MESSAGE_START/END      consumed
    TEXT_MESSAGE_CONTENT, TEXT_MESSAGE_CHUNK  TextDelta for assistant text, under the upstream's message id
    TOOL_CALL_START/ARGS/END, TOOL_CALL_CHUNK buffered by toolCallId; when the call ends:
        a tool named in the request           -> ToolCall: the engine runs it or suspends on it
        any other tool (the upstream's own)    -> DeferredToolCall at once; its result comes at RUN_FINISHED
                                              (each keeps its parentMessageId, and a result its messageId)
        a call the request's messages hold,   dropped: a restatement (an upstream that continues a paused
        under the same id and name            call streams it again) is not a new call; its result counts
    TOOL_CALL_RESULT                          kept until RUN_FINISHED, the last word per call winning (the
                                              engine takes it for a call it deferred and refuses any other);
                                              content parts stay parts
    MESSAGES_SNAPSHOT                         reconciled: a tool message is a word like TOOL_CALL_RESULT when
                                              it answers an own call of this run or a call the request left
                                              unanswered, or says what we did not send for a call of the
                                              request (a provisional answer's successor); the rest is dropped
                                              (the engine's conversation is the truth)
    RUN_FINISHED                              the end: each kept result -> LateToolResult, provisional when the
                                              outcome is an interrupt; a call without a result stays open, with
                                              or without an interrupt: only its owner may answer it (the engine
                                              asks the client, AG-UI FE-1); interrupts -> BackendInterrupt;
                                              usage -> Usage
    RUN_ERROR, a cancelled outcome            BackendError
    any other event, and any event a sub-agent Passthrough, unchanged: STATE_*, STEP_*, REASONING_* (with
    made (one with a `subagentRunId`)         REASONING_ENCRYPTED_VALUE, which carries thinking signatures
                                              across turns), ACTIVITY_*, CUSTOM, RAW, SUBAGENT_*: every type of
                                              the installed `ag_ui.core` that has no line above

Every failure is a `BackendError` with code `UPSTREAM_ERROR` and a message that is safe to show.
`_upstream_read` reads the events from the SSE body and feeds them to the `EventReader` here.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ag_ui.core import (
    BaseEvent,
    EventType,
    MessagesSnapshotEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    TextMessageChunkEvent,
    TextMessageContentEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallChunkEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    ToolMessage,
)

from adapter._errors import UPSTREAM_ERROR, BackendError
from adapter._types import wire_json
from adapter.backends._openai_errors import Redactor
from adapter.backends._seam import (
    BackendInterrupt,
    BackendItem,
    DeferredToolCall,
    LateToolResult,
    Passthrough,
    TextDelta,
    ToolCall,
    Usage,
)

log = logging.getLogger("adapter.backends.upstream")

_CONSUMED = frozenset({EventType.RUN_STARTED, EventType.TEXT_MESSAGE_END})
"""The agent's own events that make no item: the engine derives its own run and text lifecycle."""


def upstream_error(message: str) -> BackendError:
    """A failure of the upstream agent, as the engine reports it."""
    return BackendError(message, code=UPSTREAM_ERROR)


@dataclass(slots=True)
class _Call:
    id: str
    name: str
    parent: str | None = None
    """The upstream's id of the assistant message that made the call."""
    arguments: list[str] = field(default_factory=list)

    def deferred(self) -> DeferredToolCall:
        return DeferredToolCall(self.id, self.name, "".join(self.arguments), self.parent)


@dataclass(slots=True)
class EventReader:
    """Turns one upstream run's events into the items of one step."""

    engine_tools: frozenset[str]
    """The tools the request named: calls to them are the engine's to dispatch."""
    redact: Redactor = field(default_factory=Redactor)
    unanswered: set[str] = field(default_factory=set)
    """Calls the request left unanswered (the upstream deferred them): their results may come late."""
    sent: dict[str, set[str]] = field(default_factory=dict)
    """The answers the request gave each call (a provisional one among them): a snapshot repeating one says nothing."""
    known: dict[str, str] = field(default_factory=dict)
    """The calls the request's messages hold, by id, with their tool names: restating one opens no new call."""
    restated: set[str] = field(default_factory=set)
    """Calls of the request the upstream streamed again in this run: every piece of them is dropped."""
    finished: bool = False
    open_calls: dict[str, _Call] = field(default_factory=dict)
    """Calls started and not yet ended."""
    own: dict[str, None] = field(default_factory=dict)
    """The upstream's own calls of this run (started, ended or not), in order."""
    results: dict[str, LateToolResult] = field(default_factory=dict)
    """The upstream's last word on each call this run, by call id, in the order the words came."""
    chunked: str | None = None
    """The call that TOOL_CALL_CHUNK events are building, ended by any other event."""
    text_roles: dict[str, str] = field(default_factory=dict)

    def feed(self, event: BaseEvent) -> list[BackendItem]:
        """The items one event completes: what the engine derives itself is read, the rest passes through."""
        if getattr(event, "subagent_run_id", None) is not None:
            return [Passthrough(event)]  # a sub-agent's work is its own: neither our text nor our calls
        items: list[BackendItem] = []
        if self.chunked is not None and event.type != EventType.TOOL_CALL_CHUNK:
            items += self._end(self.chunked)
        handler = _HANDLERS.get(event.type)
        if handler is not None:
            return items + handler(self, event)
        return items if event.type in _CONSUMED else [*items, Passthrough(event)]

    def handle_text_start(self, event: TextMessageStartEvent) -> list[BackendItem]:
        self.text_roles[event.message_id] = event.role or "assistant"
        return []

    def handle_text_content(self, event: TextMessageContentEvent) -> list[BackendItem]:
        return self._text(event.message_id, event.delta)

    def handle_text_chunk(self, event: TextMessageChunkEvent) -> list[BackendItem]:
        if event.message_id is not None and event.role is not None:
            self.text_roles.setdefault(event.message_id, event.role)
        return self._text(event.message_id, event.delta or "")

    def handle_call_start(self, event: ToolCallStartEvent) -> list[BackendItem]:
        self._start(_Call(event.tool_call_id, event.tool_call_name, event.parent_message_id))
        return []

    def handle_call_args(self, event: ToolCallArgsEvent) -> list[BackendItem]:
        if not self._restating(event.tool_call_id):
            self._open(event.tool_call_id).arguments.append(event.delta)
        return []

    def handle_call_end(self, event: ToolCallEndEvent) -> list[BackendItem]:
        return self._end(event.tool_call_id)

    def handle_call_chunk(self, event: ToolCallChunkEvent) -> list[BackendItem]:
        items: list[BackendItem] = []
        call_id = event.tool_call_id or self.chunked
        if call_id is None:
            raise upstream_error("The upstream agent sent a tool-call chunk that names no call.")
        if self.chunked is not None and call_id != self.chunked:
            items += self._end(self.chunked)
        if call_id not in self.open_calls and (call_id not in self.restated or call_id != self.chunked):
            if not event.tool_call_name:
                raise upstream_error("The upstream agent started a tool call without a name.")
            self._start(_Call(call_id, event.tool_call_name, event.parent_message_id))
        self.chunked = call_id
        if not self._restating(call_id):
            self.open_calls[call_id].arguments.append(event.delta or "")
        return items

    def handle_call_result(self, event: ToolCallResultEvent) -> list[BackendItem]:
        self._word(LateToolResult(event.tool_call_id, event.content, message_id=event.message_id))
        return []

    def handle_snapshot(self, event: MessagesSnapshotEvent) -> list[BackendItem]:
        """Keep the results only the snapshot carries (ag-ui-langgraph reports an approved tool's result so)."""
        for message in event.messages:
            if not isinstance(message, ToolMessage):
                continue
            call_id = message.tool_call_id
            ours = call_id in self.own or call_id in self.unanswered
            if ours or (call_id in self.sent and content_text(message.content) not in self.sent[call_id]):
                self._word(LateToolResult(call_id, message.content, message.error, message.id))
        return []

    def handle_run_finished(self, event: RunFinishedEvent) -> list[BackendItem]:
        self.finished = True
        if self.open_calls:
            raise upstream_error("The upstream agent finished its run with a tool call still open.")
        outcome = event.outcome or RunFinishedSuccessOutcome()
        if outcome.type == "cancelled":
            raise upstream_error("The upstream agent cancelled its run.")
        interrupts = list(outcome.interrupts) if isinstance(outcome, RunFinishedInterruptOutcome) else []
        # Before an interrupt every result is provisional: the upstream may answer any call after the resume,
        # however its interrupt refers to them. A call without a result stays open, interrupt or not: the
        # engine never answers on the upstream's behalf (FE-1), it asks the client.
        items: list[BackendItem] = [replace(r, provisional=bool(interrupts)) for r in self.results.values()]
        if interrupts:
            items.append(BackendInterrupt(interrupts))
        for usage in event.usage or []:
            if usage.input_tokens is not None and usage.output_tokens is not None:
                items.append(Usage(usage.input_tokens, usage.output_tokens, usage.provider, usage.model))
        return items

    def handle_run_error(self, event: RunErrorEvent) -> list[BackendItem]:
        self.finished = True
        detail = self.redact(event.message.strip().splitlines()[0] if event.message.strip() else "")
        raise upstream_error(f"The upstream agent failed: {detail or 'no details'}")

    def _text(self, message_id: str | None, delta: str) -> list[BackendItem]:
        role = self.text_roles.get(message_id or "", "assistant")
        return [TextDelta(delta, message_id)] if delta and role == "assistant" else []

    def _open(self, call_id: str) -> _Call:
        call = self.open_calls.get(call_id)
        if call is None:
            raise upstream_error("The upstream agent sent tool-call arguments for a call it never started.")
        return call

    def _end(self, call_id: str) -> list[BackendItem]:
        if self.chunked == call_id:
            self.chunked = None
        if self._restating(call_id):
            return []
        call = self.open_calls.pop(call_id, None)
        if call is None:
            raise upstream_error("The upstream agent ended a tool call it never started.")
        if call.name in self.engine_tools:
            return [ToolCall(call.id, call.name, "".join(call.arguments) or "{}", call.parent)]
        return [call.deferred()]

    def _word(self, result: LateToolResult) -> None:
        """The upstream's latest word on a call: it replaces any earlier one of this run."""
        self.results.pop(result.tool_call_id, None)
        self.results[result.tool_call_id] = result

    def _restating(self, call_id: str) -> bool:
        """Whether the pieces of `call_id` restate a call of the request (dropped), not build a call of this run."""
        return call_id in self.restated and call_id not in self.open_calls

    def _start(self, call: _Call) -> None:
        if self.known.get(call.id) == call.name and call.id not in self.open_calls:
            self.restated.add(call.id)  # the same call again, not a new one: one call id is one call
            return
        self.open_calls[call.id] = call
        if call.name not in self.engine_tools:
            self.own[call.id] = None


_HANDLERS: dict[EventType, Callable[[EventReader, Any], list[BackendItem]]] = {
    EventType.TEXT_MESSAGE_START: EventReader.handle_text_start,
    EventType.TEXT_MESSAGE_CONTENT: EventReader.handle_text_content,
    EventType.TEXT_MESSAGE_CHUNK: EventReader.handle_text_chunk,
    EventType.TOOL_CALL_START: EventReader.handle_call_start,
    EventType.TOOL_CALL_ARGS: EventReader.handle_call_args,
    EventType.TOOL_CALL_END: EventReader.handle_call_end,
    EventType.TOOL_CALL_CHUNK: EventReader.handle_call_chunk,
    EventType.TOOL_CALL_RESULT: EventReader.handle_call_result,
    EventType.MESSAGES_SNAPSHOT: EventReader.handle_snapshot,
    EventType.RUN_FINISHED: EventReader.handle_run_finished,
    EventType.RUN_ERROR: EventReader.handle_run_error,
}

DERIVED: frozenset[EventType] = frozenset(_HANDLERS) | _CONSUMED
"""The types of the agent's own events that the engine derives its events from: run lifecycle, text, tool calls
and the messages snapshot. Every other event, and any event a sub-agent made, passes through unchanged."""


def content_text(content: Any) -> str:
    """A tool result's content as text: a string as is, content parts as JSON."""
    if isinstance(content, str):
        return content
    return json.dumps([wire_json(part) for part in content])
