"""One model step: the backend's stream translated into AG-UI events, and collected in its `Step`.

`Step` is what the step reasoned, said and called, as the messages (`Segment`s: the reasoning that led to an
assistant message, the message, the answers to the calls the backend ran) it adds to the conversation.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, cast

from ag_ui.core import (
    AssistantMessage,
    BaseEvent,
    ContentPart,
    EventType,
    FunctionCall,
    Interrupt,
    Message,
    ReasoningEncryptedValueEvent,
    ReasoningEndEvent,
    ReasoningMessage,
    ReasoningMessageChunkEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    ResumeEntry,
    RunAgentInput,
    StepFinishedEvent,
    SubagentErrorEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    Tool,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
    ToolMessage,
)
from ag_ui.core import ToolCall as WireToolCall

from adapter._compat import ENCRYPTED_VALUE_TYPE
from adapter._errors import UNKNOWN_BACKEND_ITEM, AdapterError, BackendError
from adapter._ids import new_id
from adapter._jsonpatch import MAX_PATCHED_BYTES, WORK_FACTOR, PatchedDocument, StateWork
from adapter._limits import id_problem
from adapter._run._events import result_event
from adapter._state._predict import Predictor
from adapter._state._shared import follow, shared
from adapter._thread._conversation import HistoryView, chosen_view
from adapter._types import JSON
from adapter.backends._seam import (
    Backend,
    BackendInterrupt,
    BackendItem,
    DeferredToolCall,
    ExecutedToolCall,
    LateToolResult,
    ModelRequest,
    Passthrough,
    ReasoningDelta,
    TextDelta,
    ToolCall,
    ToolCallChunk,
    Usage,
)
from adapter.stores import StoreUnavailable

log = logging.getLogger("adapter.translate")

_WholeCall = ToolCall | ExecutedToolCall | DeferredToolCall
_text_content: Final[Callable[[dict[str, str]], TextMessageContentEvent]] = (
    TextMessageContentEvent.__pydantic_validator__.validate_python
)
"""A text delta's event, validated as `TextMessageContentEvent(...)` validates it, by the model's own validator, less
its `__init__`'s keyword pass: 0.9 µs against 1.2, for most of a stream's events (docs/benchmarks.md, "The stream,
round three")."""
_REASONING: Final = frozenset(
    {
        EventType.REASONING_START,
        EventType.REASONING_MESSAGE_START,
        EventType.REASONING_MESSAGE_CONTENT,
        EventType.REASONING_MESSAGE_CHUNK,
        EventType.REASONING_MESSAGE_END,
        EventType.REASONING_END,
        EventType.REASONING_ENCRYPTED_VALUE,
    }
)
_THOUGHT_WRITERS: Final = frozenset(
    {
        EventType.REASONING_START,
        EventType.REASONING_MESSAGE_START,
        EventType.REASONING_MESSAGE_CONTENT,
        EventType.REASONING_MESSAGE_CHUNK,
    }
)
"""The reasoning events that name a message the run may store (a span's id names one when only its value comes)."""


def model_request(
    run_input: RunAgentInput,
    history: Sequence[Message],
    state: Any,
    tools: Sequence[Tool],
    resume: Sequence[ResumeEntry],
    *,
    unanswered: Collection[str],
    provisional: Collection[ToolMessage] = (),
    view: HistoryView | None = None,
) -> ModelRequest:
    """What the backend sees for the next step of this run: the model's view of `history`, and nothing else.

    A deferred call's provisional result goes back to the backend that reported it (a stateless upstream
    rebuilds its run from `messages`); it is neither streamed nor stored until it stands.
    """
    return ModelRequest(
        resume=resume,
        messages=chosen_view([*history, *provisional], view, unanswered),
        tools=tools,
        context=run_input.context or [],
        state=state,
        thread_id=run_input.thread_id,
        run_id=run_input.run_id,
        client_tool_names=frozenset(declared.name for declared in run_input.tools or ()),
        forwarded_props=run_input.forwarded_props,
    )


async def backend_items(backend: Backend, request: ModelRequest) -> AsyncGenerator[BackendItem | str, None]:
    """Ask the backend for one step: its items as it streams them, untranslated (`step_events` translates them).

    A piece of text with no id (most of a stream) comes as its text alone: the stop's race holds what it reads ahead
    (up to 1,024 items), and a `str` is no object the garbage collector tracks, where a `TextDelta` is one its young
    collections walk and move on towards a full collection (docs/benchmarks.md, "The stream's collections").

    Raises:
        BackendError: The backend failed without saying how (an `AdapterError` it raised passes as is); or
            UNKNOWN_BACKEND_ITEM for a bare `str`, after the items before it (`_check_kind`).
    """
    try:
        made: AsyncIterator[object] = aiter(backend.stream(request))
        async for item in made:
            if type(item) is TextDelta and item.message_id is None and type(item.text) is str:
                yield item.text
            elif isinstance(item, str):  # a backend's bare str is no item: never taken for a piece of text
                _check_kind(item)
            else:
                yield cast(BackendItem, item)
    except (AdapterError, StoreUnavailable):
        raise
    except Exception as exc:
        log.exception("backend failed on thread %s", request.thread_id)
        raise BackendError("The agent backend failed.") from exc


SLICE: Final = 32
"""Items translated at a time: a run of items read ahead is held as the backend's items, and becomes SDK events
(some ten times their size) a slice at a time, each taken by the journal before the next is made."""


async def step_events(items: Sequence[BackendItem | str], step: Step) -> AsyncGenerator[list[BaseEvent], None]:
    """Record a run of the backend's items in `step` and stream the AG-UI events they make, a slice at a time.

    A tool call is emitted whole (START, ARGS, END) the moment the backend hands it over, or piece by piece when
    the backend streams its arguments (`ToolCallChunk`); `Step.close_all` ends a call the backend left open, and
    `step_end` what a step that ended leaves open. A `str` is a `TextDelta` with no id, as `backend_items` hands it.
    """
    for start in range(0, len(items), SLICE):
        events: list[BaseEvent] = []
        refused: Exception | None = None
        for item in items[start : start + SLICE]:
            try:
                if step.elsewhere is not None and not isinstance(item, str):  # a run that read the tail alone
                    await _look_up_named(item, step)  # looks up the ids it names
                events += _item_events(item, step)
            except (AdapterError, StoreUnavailable) as exc:  # the items before it were said: their events go first
                refused = exc
                break
            except Exception as exc:  # what the backend handed over cannot be said (a delta's value of no type)
                log.exception("a backend item could not be made into events (message %s)", step.message_id)
                refused = BackendError("The agent backend failed.")
                refused.__cause__ = exc
                break
        yield events
        if refused is not None:
            raise refused


def step_end(step: Step) -> list[BaseEvent]:
    """The events that close what a step that ended (not cut) left open: its reasoning, its text, deferred calls."""
    return step.close_reasoning() + step.close_text() + settle_deferred(step)


def _item_events(item: BackendItem | str, step: Step) -> list[BaseEvent]:
    """Record one backend item in `step` and return the events it makes; refuse it whole if an id is not keepable."""
    if isinstance(item, str):  # most items: a piece of text with no id (`backend_items`), nothing to check
        return _text(item, step) if step.thinking is None else step.close_reasoning() + _text(item, step)
    if type(item) is TextDelta and item.message_id is None:  # a text delta handed over as it is
        return _text(item.text, step) if step.thinking is None else step.close_reasoning() + _text(item.text, step)
    _check_kind(item)
    _check_ids(item)
    _check_new_call(item, step)
    if isinstance(item, ReasoningDelta):
        return _reasoning(item, step)
    thought = step.close_reasoning() if isinstance(item, TextDelta | ToolCallChunk | _WholeCall) else []
    if isinstance(item, TextDelta):
        return thought + _text(item.text, step, item.message_id)
    if isinstance(item, ToolCallChunk):
        return thought + _chunk(item, step)
    if isinstance(item, ToolCall | ExecutedToolCall | DeferredToolCall):
        entered = [] if item.id in step.streaming else _enter(step, item.message_id)
        return thought + step.close_text() + entered + _call(item, step)
    if isinstance(item, LateToolResult):
        return _late_result(item, step)
    if isinstance(item, Passthrough):
        return _passthrough(item.event, step)
    if isinstance(item, BackendInterrupt):
        _check_interrupts(item, step)
        step.interrupts.extend(item.interrupts)
    elif isinstance(item, Usage):
        step.usage.append(item)
    return []


def _check_kind(item: object) -> None:
    """Refuse what is not a backend item (a bare `str`, a `dict`): ignored, it would end the run as a silent success.

    Raises:
        BackendError: UNKNOWN_BACKEND_ITEM, naming the item's type.
    """
    if not isinstance(item, BackendItem):
        kind = f"{type(item).__module__}.{type(item).__qualname__}".removeprefix("builtins.")
        log.error("the backend yielded a %s, which is not a backend item", kind)
        raise BackendError(
            f"The agent backend yielded a {kind}, which is not a backend item: yield TextDelta, ToolCall or another"
            " item of adapter.backends (docs/backends.md).",
            code=UNKNOWN_BACKEND_ITEM,
        )


def _check_ids(item: BackendItem) -> None:
    """Refuse an item with an id the stores could not keep (`adapter._limits.id_problem`), before it is recorded.

    A model or an upstream mints these ids, not the client: the edge never saw them, and one a store
    refuses (a NUL on PostgreSQL) would fail the run's save as an internal error, or be kept by one
    store and not another. A bad id is the backend's failure, named in the message.

    Raises:
        BackendError: BACKEND_ERROR.
    """
    for what, value in _item_ids(item):
        problem = id_problem(value)
        if problem is not None:
            shown = ascii(value[:40]) + ("..." if len(value) > 40 else "")
            raise BackendError(f"The agent backend gave a {what} that {problem}: {shown}.")


async def _look_up_named(item: BackendItem, step: Step) -> None:
    """With only the thread's tail read, find whether a message id the backend names is stored before it.

    One that is stays taken, so the message gets an id of its own (`_enter`, `_fresh`): ids are unique in a thread.
    """
    if step.elsewhere is None:
        return
    for what, value in _item_ids(item):
        if what == "message id" and value not in step.taken and value not in step.looked_up:
            step.looked_up.add(value)
            if await step.elsewhere(value) is not None:
                step.taken.add(value)


def _check_new_call(item: BackendItem, step: Step) -> None:
    """Refuse a call that opens under an id the thread or the step already uses, before anything of it is recorded.

    A tool-call id is unique in a thread: a second call under it would let the backend answer the first
    (its result would be taken as the answer to a call a person decides), or run a tool again under the
    first call's idempotency key. The pieces of one streamed call (`ToolCallChunk`, then its whole
    item) open it once.

    Raises:
        BackendError: BACKEND_ERROR, naming the id.
    """
    if not isinstance(item, ToolCall | ToolCallChunk | ExecutedToolCall | DeferredToolCall):
        return
    if item.id in step.streaming:
        return
    if item.id in step.called:
        shown = ascii(item.id[:40]) + ("..." if len(item.id) > 40 else "")
        raise BackendError(f"The agent backend opened a tool call under an id the thread already uses: {shown}.")
    step.called.add(item.id)


def _check_interrupts(item: BackendInterrupt, step: Step) -> None:
    """Refuse an interrupt that waits on a call the thread already answered: nobody could answer it again.

    Its answer would be taken as a second answer to that call, or the stored answer as its answer.

    Raises:
        BackendError: BACKEND_ERROR, naming the call.
    """
    answered_here = {m.tool_call_id for segment in step.segments for m in segment.answers}
    for interrupt in item.interrupts:
        if interrupt.tool_call_id is not None and interrupt.tool_call_id in step.answered | answered_here:
            shown = ascii(interrupt.tool_call_id[:40])
            raise BackendError(f"The agent backend interrupted on a tool call the thread already answered: {shown}.")


def _item_ids(item: BackendItem) -> Iterator[tuple[str, str]]:
    """The ids a backend item brings that the run may store, each with what it names."""
    if isinstance(item, ToolCall | ToolCallChunk | ExecutedToolCall | DeferredToolCall):
        yield "tool call id", item.id
    if isinstance(item, LateToolResult):
        yield "tool call id", item.tool_call_id
    if isinstance(item, TextDelta | ReasoningDelta | ToolCall | ExecutedToolCall | DeferredToolCall | LateToolResult):
        if item.message_id is not None:
            yield "message id", item.message_id
    if isinstance(item, Passthrough) and (thought := _thought_id(item.event)) is not None:
        yield "message id", thought
    if isinstance(item, ExecutedToolCall) and item.result_id is not None:
        yield "message id", item.result_id
    if isinstance(item, BackendInterrupt):
        for interrupt in item.interrupts:
            yield "interrupt id", interrupt.id
            if interrupt.tool_call_id is not None:
                yield "tool call id", interrupt.tool_call_id


def _text(text: str, step: Step, message_id: str | None = None) -> list[BaseEvent]:
    """A piece of text (`message_id`: the backend's id for its message): opens the message at its first piece."""
    if not text:
        return []  # an empty delta is legal but noisy (TXT-4)
    events = [] if message_id is None else _enter(step, message_id)
    if not step.text_open:
        if step.current.calls:
            step.segments.append(Segment(new_id("msg")))
        step.text_open = True
        events.append(TextMessageStartEvent(message_id=step.current.message_id, role="assistant"))
    segment = step.current
    segment.text.append(text)
    events.append(_text_content({"message_id": segment.message_id, "delta": text}))
    return events


def _reasoning(delta: ReasoningDelta, step: Step) -> list[BaseEvent]:
    """A piece of reasoning: opens a reasoning message at its first piece (or at a new id), then streams each piece."""
    if not delta.text and delta.encrypted_value is None:
        return []
    events: list[BaseEvent] = []
    thought = step.thoughts.get(step.thinking or "")
    if thought is not None and delta.message_id not in (None, thought.named):
        events += step.close_reasoning()
        thought = None
    if thought is None:
        named = delta.message_id
        message_id = named if named is not None and step.free(named) else new_id("msg")
        events += _open_thought(step, message_id, named)
        thought, step.thinking = step.thoughts[message_id], message_id
        events += [ReasoningStartEvent(message_id=message_id), ReasoningMessageStartEvent(message_id=message_id)]
    if delta.text:
        thought.text.append(delta.text)
        events.append(ReasoningMessageContentEvent(message_id=thought.message_id, delta=delta.text))
    if delta.encrypted_value is not None:
        kind = delta.encrypted_value_type
        step.encrypted[("message", thought.message_id)] = (delta.encrypted_value, kind)
        typed = {} if kind is None else {ENCRYPTED_VALUE_TYPE: kind}  # AG-UI 1.1, beyond the 1.0 model: an extra
        events.append(
            ReasoningEncryptedValueEvent(
                subtype="message", entity_id=thought.message_id, encrypted_value=delta.encrypted_value, **typed
            )
        )
    return events


def _open_thought(step: Step, message_id: str, named: str | None = None) -> list[BaseEvent]:
    """Start a reasoning message before the assistant message being written, or before a new one if it said anything.

    Reasoning leads to what follows it: stored in its place, it goes back to the model before the answer it led to.
    """
    events: list[BaseEvent] = []
    if step.said_anything():
        events = step.close_text()
        step.segments.append(Segment(new_id("msg")))
    thought = Thought(message_id, named)
    step.current.reasoning.append(thought)
    step.thoughts[message_id] = thought
    step.taken.add(message_id)  # one id, one message: no later message of the step takes it
    return events


def _passthrough(event: BaseEvent, step: Step) -> list[BaseEvent]:
    """Forward an event as it came; the agent's own reasoning is kept too, as reasoning messages."""
    kept = _keep_reasoning(event, step) if _own_reasoning(event) else []
    step.track(event)
    return [*kept, event]


def _own_reasoning(event: BaseEvent) -> bool:
    """Whether `event` is a reasoning event of the agent itself, not of a sub-agent: one the run stores."""
    return event.type in _REASONING and getattr(event, "subagent_run_id", None) is None


def _thought_id(event: BaseEvent) -> str | None:
    """The id of the reasoning message (or span) an event of the agent's own reasoning opens or writes, if any."""
    if event.type not in _THOUGHT_WRITERS or not _own_reasoning(event):
        return None
    message_id = getattr(event, "message_id", None)
    return message_id if isinstance(message_id, str) else None


def _keep_reasoning(event: BaseEvent, step: Step) -> list[BaseEvent]:
    """Collect the agent's reasoning events into the step's reasoning messages, with their encrypted values.

    A reasoning message whose id the thread already uses is forwarded, but not stored: one id is one message.
    """
    if isinstance(event, ReasoningEncryptedValueEvent):
        kind = (event.model_extra or {}).get(ENCRYPTED_VALUE_TYPE)
        step.encrypted[(event.subtype, event.entity_id)] = (
            event.encrypted_value,
            kind if isinstance(kind, str) else None,
        )
        if event.subtype == "message" and event.entity_id in step.spans and event.entity_id not in step.thoughts:
            return _thought_of(step, event.entity_id)  # a span with no text: its message is the encrypted value
        return []
    if isinstance(event, ReasoningStartEvent):
        step.spans.add(event.message_id)
        return []
    if isinstance(event, ReasoningMessageChunkEvent):
        message_id, delta = event.message_id or step.chunked_thought, event.delta or ""
        step.chunked_thought = message_id
    elif isinstance(event, ReasoningMessageStartEvent | ReasoningMessageContentEvent):
        message_id, delta = event.message_id, getattr(event, "delta", "")
    else:
        return []
    if message_id is None:
        return []
    events = [] if message_id in step.thoughts else _thought_of(step, message_id)
    step.thoughts[message_id].text.append(delta)
    return events


def _thought_of(step: Step, message_id: str) -> list[BaseEvent]:
    """A reasoning message for an id the backend named: stored if the id is free, else only collected."""
    if step.free(message_id):
        return _open_thought(step, message_id)
    log.warning("did not store reasoning message %s: another message has its id", ascii(message_id[:40]))
    step.thoughts[message_id] = Thought(message_id)
    return []


def _content(content: str | Sequence[ContentPart]) -> str | list[ContentPart]:
    """A result's content as a ToolMessage holds it: text, or its parts as a list."""
    return content if isinstance(content, str) else list(content)


def _chunk(item: ToolCallChunk, step: Step) -> list[BaseEvent]:
    """A piece of a call's arguments: opens the call at its first piece, then streams each piece as it comes."""
    events: list[BaseEvent] = []
    if item.id not in step.streaming:
        events += step.close_text() + step.predictor.start(item.id, item.name)
        events.append(
            ToolCallStartEvent(
                tool_call_id=item.id, tool_call_name=item.name, parent_message_id=step.current.message_id
            )
        )
        step.streaming[item.id] = (step.current, [])
    if item.arguments:
        step.streaming[item.id][1].append(item.arguments)
        events.append(ToolCallArgsEvent(tool_call_id=item.id, delta=item.arguments))
        events += step.predictor.feed(item.id, item.arguments)
    return events


def _enter(step: Step, message_id: str | None) -> list[BaseEvent]:
    """Write into the assistant message the backend named: the step's own if nothing was written yet, else a new one."""
    if message_id is None or message_id == step.current.message_id:
        return []
    if message_id in step.taken or any(segment.message_id == message_id for segment in step.segments):
        return []  # a name already used would reopen a message (TXT-3): keep writing where we are
    events = step.close_text()
    if step.said_anything():
        step.segments.append(Segment(message_id))
    else:
        step.current.message_id = message_id
    return events


def _fresh(step: Step, message_id: str | None) -> str:
    """The backend's id for a new tool message if the thread does not use it yet, else one we mint."""
    if message_id is None or message_id in step.taken:
        return new_id("msg")
    step.taken.add(message_id)
    return message_id


def _call(item: ToolCall | ExecutedToolCall | DeferredToolCall, step: Step) -> list[BaseEvent]:
    call = ToolCall(item.id, item.name, item.arguments)
    if call.id in step.streaming:
        segment, sent = step.streaming.pop(call.id)
        events = _rest_of(call, "".join(sent))
    else:
        segment = step.current
        events = (step.predictor.start(call.id, call.name) if isinstance(item, ToolCall) else []) + tool_call_events(
            call, segment.message_id
        )
    segment.calls.append(WireToolCall(id=call.id, function=FunctionCall(name=call.name, arguments=call.arguments)))
    if isinstance(item, ToolCall):
        step.calls.append(item)
        return events[:-1] + step.predictor.finish(call.id, call.arguments) + events[-1:]  # complete before END
    if isinstance(item, DeferredToolCall):
        step.deferred.add(item.id)
        return events
    answer = ToolMessage(
        id=_fresh(step, item.result_id), tool_call_id=item.id, content=_content(item.content), error=item.error
    )
    segment.answers.append(answer)
    events.append(result_event(answer))
    return events


def _rest_of(call: ToolCall, sent: str) -> list[BaseEvent]:
    """End a streamed call: the arguments not streamed yet, then TOOL_CALL_END."""
    events: list[BaseEvent] = []
    if call.arguments.startswith(sent) and len(call.arguments) > len(sent):
        events.append(ToolCallArgsEvent(tool_call_id=call.id, delta=call.arguments[len(sent) :]))
    elif not call.arguments.startswith(sent):
        log.warning(
            "call %s ended with arguments other than the ones streamed; the client has the streamed ones", call.id
        )
    return [*events, ToolCallEndEvent(tool_call_id=call.id)]


def _late_result(item: LateToolResult, step: Step) -> list[BaseEvent]:
    """Answer a call the backend deferred, or keep a provisional answer; a result for any other call is ignored."""
    if item.tool_call_id not in step.deferred:
        log.warning("ignored the backend's result for call %s, which it did not defer", item.tool_call_id)
        return []
    answer = ToolMessage(
        id=_fresh(step, item.message_id),
        tool_call_id=item.tool_call_id,
        content=_content(item.content),
        error=item.error,
    )
    if item.provisional:
        step.provisional[item.tool_call_id] = answer  # the latest one stands, unless a final one comes
        return []
    return _answer_deferred(step, answer)


def settle_deferred(step: Step) -> list[BaseEvent]:
    """After a step that ends without the backend's interrupt, its provisional results stand; the rest stay open.

    A call keeps the last provisional result the backend reported for it, or else the person's answer
    to the interrupt that named it. A call with none was left open
    by its owner, and only its owner may answer it (AG-UI FE-1): the engine never invents a result. It
    goes to the client, as a frontend call does (`Step.left_open`), and the client's answer goes back.
    """
    if step.interrupts:
        return []
    events: list[BaseEvent] = []
    for call_id in [c for c in step.provisional if c in step.deferred]:
        events += _answer_deferred(step, step.provisional[call_id])
    for call_id in [c for c in step.decided if c in step.deferred]:
        events += _answer_deferred(step, step.decided[call_id])
    step.left_open = [call_id for call_id in _call_order(step) if call_id in step.deferred]
    return events


def _call_order(step: Step) -> list[str]:
    """The deferred calls in the order they were made: earlier turns' first (by id), then this step's."""
    made_here = [call.id for segment in step.segments for call in segment.calls]
    return [*sorted(step.deferred - set(made_here)), *made_here]


def _answer_deferred(step: Step, answer: ToolMessage) -> list[BaseEvent]:
    """The final answer to a deferred call: right after the call when this step made it, else after the history."""
    step.deferred.discard(answer.tool_call_id)
    step.provisional.pop(answer.tool_call_id, None)
    made_here = (s for s in step.segments if any(call.id == answer.tool_call_id for call in s.calls))
    segment = next(made_here, None)
    (segment.answers if segment is not None else step.late).append(answer)
    return [result_event(answer)]


def tool_call_events(call: ToolCall, parent_message_id: str) -> list[BaseEvent]:
    """The START/ARGS/END triad of one call."""
    events: list[BaseEvent] = [
        ToolCallStartEvent(tool_call_id=call.id, tool_call_name=call.name, parent_message_id=parent_message_id)
    ]
    if call.arguments:
        events.append(ToolCallArgsEvent(tool_call_id=call.id, delta=call.arguments))
    events.append(ToolCallEndEvent(tool_call_id=call.id))
    return events


@dataclass(slots=True)
class Thought:
    """A reasoning message of a step, collected as it streams."""

    message_id: str
    named: str | None = None
    """The id the backend gave it (`ReasoningDelta.message_id`), which the engine may have replaced."""
    text: list[str] = field(default_factory=list)

    def message(self) -> ReasoningMessage:
        return ReasoningMessage(id=self.message_id, content="".join(self.text))


@dataclass(slots=True)
class Segment:
    """One assistant message of a step: the reasoning that led to it, its text, then the calls made after it."""

    message_id: str
    text: list[str] = field(default_factory=list)
    calls: list[WireToolCall] = field(default_factory=list)
    answers: list[ToolMessage] = field(default_factory=list)
    """Results of the calls the backend ran itself."""
    reasoning: list[Thought] = field(default_factory=list)

    def messages(self) -> list[Message]:
        """The reasoning messages, the assistant message, then the answers the backend gave its own calls."""
        assistant = AssistantMessage(
            id=self.message_id, content="".join(self.text) or None, tool_calls=self.calls or None
        )
        return [*(thought.message() for thought in self.reasoning), assistant, *self.answers]


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
    state_work: StateWork | None = None
    """What following the state may copy beyond what its deltas bring (the state before the step's first delta,
    `copy` operations); `WORK_FACTOR` times `max_state_bytes` for the step when none is given."""
    state_document: PatchedDocument | None = field(default=None, init=False, repr=False)
    """`state`, as the deltas change it in place: copied once, before the first delta, not once per delta."""
    predictor: Predictor = field(default_factory=Predictor)
    """The state the calls' arguments predict, as they stream (`Adapter(predict_state=...)`)."""
    streaming: dict[str, tuple[Segment, list[str]]] = field(default_factory=dict)
    """Calls whose arguments are streaming (`ToolCallChunk`): the message they belong to, the text sent so far."""
    thoughts: dict[str, Thought] = field(default_factory=dict)
    """The step's reasoning messages by id: the backend's `ReasoningDelta`s and the agent's passthrough reasoning."""
    thinking: str | None = None
    """The reasoning message the backend's `ReasoningDelta`s are writing, while it is open."""
    spans: set[str] = field(default_factory=set)
    """The ids of the reasoning spans a passthrough `REASONING_START` opened."""
    chunked_thought: str | None = None
    """The reasoning message the last `REASONING_MESSAGE_CHUNK` wrote: a chunk without an id continues it."""
    encrypted: dict[tuple[str, str], tuple[str, str | None]] = field(default_factory=dict)
    """The encrypted values the backend gave, with their 1.1 type, by (subtype, entity id): kept on the message or
    call they name."""

    def __post_init__(self) -> None:
        self.segments.append(Segment(self.message_id))

    @property
    def current(self) -> Segment:
        """The assistant message being written."""
        return self.segments[-1]

    def messages(self) -> list[Message]:
        """The step's messages, in order, as they join the conversation, with the encrypted values that name them."""
        said = [*self.late, *(message for segment in self.segments for message in segment.messages())]
        return [_sealed(message, self.encrypted) for message in said] if self.encrypted else said

    def said_anything(self) -> bool:
        """Whether the assistant message being written has text, calls or answers (a call streaming counts)."""
        current = self.current
        return bool(
            current.text
            or current.calls
            or current.answers
            or any(segment is current for segment, _ in self.streaming.values())
        )

    def free(self, message_id: str) -> bool:
        """Whether a message the backend names may take `message_id`: neither the thread nor the step uses it."""
        return (
            message_id not in self.taken
            and message_id not in self.thoughts
            and all(segment.message_id != message_id for segment in self.segments)
        )

    def close_reasoning(self) -> list[BaseEvent]:
        """End the reasoning message the backend's `ReasoningDelta`s are writing, if one is open."""
        if self.thinking is None:
            return []
        message_id, self.thinking = self.thinking, None
        return [ReasoningMessageEndEvent(message_id=message_id), ReasoningEndEvent(message_id=message_id)]

    def close_text(self) -> list[BaseEvent]:
        """End the step's text message if it is open."""
        if not self.text_open:
            return []
        self.text_open = False
        return [TextMessageEndEvent(message_id=self.current.message_id)]

    def close_all(self) -> list[BaseEvent]:
        """End everything the step left open, innermost first: for a run that fails mid-step."""
        closing = self.close_reasoning() + self.close_text()
        closing += [ToolCallEndEvent(tool_call_id=call_id) for call_id in self.streaming]
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
            if self.state_document is None:
                if self.state_work is None:
                    self.state_work = StateWork(WORK_FACTOR * self.max_state_bytes)
                self.state_document = shared(self.state, self.max_state_bytes, self.state_work)
            follow(self.state_document, event)
            if self.state_document.changed:
                self.state = self.state_document.value
            self.predictor.rebase()
        elif kind in _OPENERS:
            family, key = _OPENERS[kind]
            name = str(getattr(event, key, ""))
            self.closers[f"{family}:{name}"] = _CLOSING[family](name, getattr(event, "subagent_run_id", None))
        elif kind in _CLOSERS:
            family, key = _CLOSERS[kind]
            self.closers.pop(f"{family}:{getattr(event, key, '')}", None)


def _sealed(message: Message, encrypted: Mapping[tuple[str, str], tuple[str, str | None]]) -> Message:
    """`message` with the encrypted values the backend gave it and its calls (`REASONING_ENCRYPTED_VALUE`)."""
    update: dict[str, Any] = {}
    sealed_with = encrypted.get(("message", message.id))
    if sealed_with is not None and "encrypted_value" in type(message).model_fields:
        update |= _seal(*sealed_with)
    if isinstance(message, AssistantMessage) and message.tool_calls:
        sealed = [_sealed_call(call, encrypted) for call in message.tool_calls]
        if sealed != message.tool_calls:
            update["tool_calls"] = sealed
    return message.model_copy(update=update) if update else message


def _sealed_call(call: WireToolCall, encrypted: Mapping[tuple[str, str], tuple[str, str | None]]) -> WireToolCall:
    sealed_with = encrypted.get(("tool-call", call.id))
    return call if sealed_with is None else call.model_copy(update=_seal(*sealed_with))


def _seal(value: str, kind: str | None) -> dict[str, Any]:
    """The fields that keep an encrypted value on a message or call: the value, and its 1.1 type as an extra."""
    return {"encrypted_value": value} if kind is None else {"encrypted_value": value, ENCRYPTED_VALUE_TYPE: kind}


_OPENERS: Final = {
    EventType.STEP_STARTED: ("step", "step_name"),
    EventType.REASONING_START: ("reasoning", "message_id"),
    EventType.REASONING_MESSAGE_START: ("reasoning-message", "message_id"),
    EventType.TEXT_MESSAGE_START: ("text", "message_id"),
    EventType.TOOL_CALL_START: ("call", "tool_call_id"),
    EventType.SUBAGENT_STARTED: ("subagent", "subagent_run_id"),
}
"""What a passthrough event opens (a sub-agent's text and calls pass through too), by family and the key it names."""
_CLOSERS: Final = {
    EventType.STEP_FINISHED: ("step", "step_name"),
    EventType.REASONING_END: ("reasoning", "message_id"),
    EventType.REASONING_MESSAGE_END: ("reasoning-message", "message_id"),
    EventType.TEXT_MESSAGE_END: ("text", "message_id"),
    EventType.TOOL_CALL_END: ("call", "tool_call_id"),
    EventType.SUBAGENT_FINISHED: ("subagent", "subagent_run_id"),
    EventType.SUBAGENT_ERROR: ("subagent", "subagent_run_id"),
}
SUBAGENT_LEFT: Final = "The run ended before the subagent finished."
_CLOSING: Final[dict[str, Callable[[str, str | None], BaseEvent]]] = {
    "step": lambda name, subagent: StepFinishedEvent(step_name=name, subagent_run_id=subagent),
    "reasoning": lambda name, subagent: ReasoningEndEvent(message_id=name, subagent_run_id=subagent),
    "reasoning-message": lambda name, subagent: ReasoningMessageEndEvent(message_id=name, subagent_run_id=subagent),
    "text": lambda name, subagent: TextMessageEndEvent(message_id=name, subagent_run_id=subagent),
    "call": lambda name, subagent: ToolCallEndEvent(tool_call_id=name, subagent_run_id=subagent),
    "subagent": lambda name, _: SubagentErrorEvent(subagent_run_id=name, message=SUBAGENT_LEFT),
}
"""The event that ends what each family opened, for a run that fails first, attributed as its opener was."""
