"""What one model step said and called, collected while it streams: the `Step` and its assistant messages."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from ag_ui.core import (
    AssistantMessage,
    BaseEvent,
    EventType,
    Interrupt,
    Message,
    ReasoningEndEvent,
    ReasoningMessageEndEvent,
    StepFinishedEvent,
    TextMessageEndEvent,
    ToolCallEndEvent,
    ToolMessage,
)
from ag_ui.core import ToolCall as WireToolCall

from adapter._jsonpatch import MAX_PATCHED_BYTES
from adapter._predict import Predictor
from adapter._state import advance_state
from adapter._types import JSON, ToolCall, Usage


@dataclass(slots=True)
class Segment:
    """One assistant message of a step: text, then the calls made after it."""

    message_id: str
    text: list[str] = field(default_factory=list)
    calls: list[WireToolCall] = field(default_factory=list)
    answers: list[ToolMessage] = field(default_factory=list)
    """Results of the calls the backend ran itself."""

    def messages(self) -> list[Message]:
        """The assistant message, followed by the answers the backend gave its own calls."""
        assistant = AssistantMessage(
            id=self.message_id, content="".join(self.text) or None, tool_calls=self.calls or None
        )
        return [assistant, *self.answers]


@dataclass(slots=True)
class Step:
    """What one assistant step said and called, collected while it streams.

    A step is usually one assistant message. A backend that runs tools itself may speak again after
    them; that text starts a new assistant message, so no message is ever reopened (TXT-3).
    """

    message_id: str
    segments: list[Segment] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)
    """Calls for the engine to dispatch."""
    interrupts: list[Interrupt] = field(default_factory=list)
    usage: list[Usage] = field(default_factory=list)
    text_open: bool = False
    closers: dict[str, BaseEvent] = field(default_factory=dict)
    """What ends each step or reasoning span a passthrough event opened, by its key."""
    deferred: set[str] = field(default_factory=set)
    """Calls the backend deferred and has not answered yet in this turn: a copy of the earlier steps' set
    that this step updates as it streams; the run takes it over once the step ends."""
    late: list[ToolMessage] = field(default_factory=list)
    """The backend's answers to calls it deferred in an earlier step."""
    provisional: dict[str, ToolMessage] = field(default_factory=dict)
    """Results the backend reported for deferred calls before its interrupt: each stands unless it gives another."""
    decided: dict[str, ToolMessage] = field(default_factory=dict)
    """The person's answers to interrupts that named deferred calls: each stands if the backend leaves its call open."""
    taken: set[str] = field(default_factory=set)
    """Message ids the thread already uses: a backend's name for a new message must be a new one (EVT-3)."""
    elsewhere: Callable[[str], Awaitable[int | None]] | None = None
    """Where a run that read only the thread's tail looks up a message id the backend names (the store's index)."""
    looked_up: set[str] = field(default_factory=set)
    """The message ids already looked up `elsewhere`."""
    called: set[str] = field(default_factory=set)
    """Tool-call ids the thread and this step already use: one id is one call, so a new call's id must be new."""
    answered: set[str] = field(default_factory=set)
    """Tool-call ids the thread already answered: no interrupt of the backend may wait on one of them."""
    left_open: list[str] = field(default_factory=list)
    """Deferred calls the backend ended its step without answering, and without an interrupt: the client's to answer."""
    state: JSON = None
    """The run's state, moved by the backend's STATE_SNAPSHOT and STATE_DELTA events as they stream."""
    max_state_bytes: int = MAX_PATCHED_BYTES
    """The most one of those deltas may build (`Adapter(max_state_bytes=...)`)."""
    predictor: Predictor = field(default_factory=Predictor)
    """The state the calls' arguments predict, as they stream (`Adapter(predict_state=...)`)."""
    streaming: dict[str, tuple[Segment, list[str]]] = field(default_factory=dict)
    """Calls whose arguments are streaming (`ToolCallChunk`): the message they belong to, the text sent so far."""

    def __post_init__(self) -> None:
        self.segments.append(Segment(self.message_id))

    @property
    def current(self) -> Segment:
        """The assistant message being written."""
        return self.segments[-1]

    def messages(self) -> list[Message]:
        """The step's messages, in order, as they join the conversation."""
        return [*self.late, *(message for segment in self.segments for message in segment.messages())]

    def close_text(self) -> list[BaseEvent]:
        """End the step's text message if it is open."""
        if not self.text_open:
            return []
        self.text_open = False
        return [TextMessageEndEvent(message_id=self.current.message_id)]

    def close_all(self) -> list[BaseEvent]:
        """End everything the step left open, innermost first: for a run that fails mid-step."""
        closing = self.close_text() + [ToolCallEndEvent(tool_call_id=call_id) for call_id in self.streaming]
        closing += list(reversed(self.closers.values()))
        self.streaming.clear()
        self.closers.clear()
        return closing

    def track(self, event: BaseEvent) -> None:
        """Remember what a passthrough event opened, or forget what it closed; follow the state it changes.

        Raises:
            AdapterError: `STATE_PATCH_TOO_LARGE`, before the delta reaches the client.
        """
        kind = event.type
        if kind in (EventType.STATE_SNAPSHOT, EventType.STATE_DELTA):
            self.state = advance_state(self.state, [event], self.max_state_bytes)
            self.predictor.rebase()
        elif kind == EventType.STEP_STARTED:
            name = getattr(event, "step_name", "")
            self.closers[f"step:{name}"] = StepFinishedEvent(step_name=name)
        elif kind == EventType.STEP_FINISHED:
            self.closers.pop(f"step:{getattr(event, 'step_name', '')}", None)
        elif kind == EventType.REASONING_START:
            message_id = getattr(event, "message_id", "")
            self.closers[f"reasoning:{message_id}"] = ReasoningEndEvent(message_id=message_id)
        elif kind == EventType.REASONING_END:
            self.closers.pop(f"reasoning:{getattr(event, 'message_id', '')}", None)
        elif kind == EventType.REASONING_MESSAGE_START:
            message_id = getattr(event, "message_id", "")
            self.closers[f"reasoning-message:{message_id}"] = ReasoningMessageEndEvent(message_id=message_id)
        elif kind == EventType.REASONING_MESSAGE_END:
            self.closers.pop(f"reasoning-message:{getattr(event, 'message_id', '')}", None)
