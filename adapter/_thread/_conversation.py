"""The conversation as the model may see it.

Providers reject a tool call without exactly one answer, and clients send all sorts of history, so
the model's view is repaired rather than trusted: activity messages are dropped, each call gets its
answer right after the assistant message that made it, a missing answer is stated as missing, and
answers to no call are dropped. Reasoning messages stay in their place, with their encrypted values:
the backend decides whether its model takes them back (`ModelRequest.messages`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from operator import attrgetter
from typing import TypeVar, cast

from ag_ui.core import ActivityMessage, AssistantMessage, Message, ReasoningMessage, ToolCall, ToolMessage

from adapter import _errors as codes
from adapter._errors import ConfigurationError, ResumeError
from adapter._types import KIND_BY_CLASS, message_kind

MISSING_RESULT = "No result was recorded for this tool call."

HeldIds = tuple[frozenset[str], frozenset[str], frozenset[str]]
"""The ids of a conversation's messages, of its tool calls (made or answered), and of its answered calls."""

_ID = attrgetter("id")
_CALL_ID = attrgetter("tool_call_id")
_CALLS = attrgetter("tool_calls")

HistoryView = Callable[[list[Message]], Sequence[Message]]
"""`view(history) -> messages`: the part of a long thread the model sees (`Adapter(history_view=...)`)."""


def declared_tail(view: HistoryView | None) -> int | None:
    """How many trailing stored messages `view` may need, from its `tail` attribute; None: the whole thread.

    With `history="server"`, a new run reads only that many of the thread's last stored messages, and
    the view is called with them (and the client's new messages): memory per run follows what the
    model may be sent, not the thread's length.

    Raises:
        ConfigurationError: `tail` is not a positive whole number.
    """
    tail = getattr(view, "tail", None)
    if tail is not None and (isinstance(tail, bool) or not isinstance(tail, int) or tail < 1):
        raise ConfigurationError(f"a history view's tail must be a positive number of messages, not {tail!r}")
    return tail


def chosen_view(
    history: Sequence[Message], choose: HistoryView | None, unanswered: Collection[str] = ()
) -> list[Message]:
    """The model's view of `history`, from the messages the app's `choose` picked (all of them without one).

    The app's view is given copies, which it may edit. Whatever it picks, the view keeps the pairing rule
    of `model_view`: a call it kept is answered by the answer it picked (it may shorten one), else by the
    recorded one, else stated as missing; an answer whose call it dropped is dropped.
    """
    if choose is None:
        return model_view(history, unanswered)
    # The view works on copies: whatever it edits, the stored, cached and streamed messages stay as they are.
    chosen = list(choose([message.model_copy(deep=True) for message in history]))
    present = {message.id for message in chosen}
    calls = {call.id for m in chosen if isinstance(m, AssistantMessage) for call in m.tool_calls or []}
    answers = [m for m in history if isinstance(m, ToolMessage) and m.tool_call_id in calls and m.id not in present]
    return model_view([*chosen, *answers], unanswered)


def model_view(messages: Sequence[Message], unanswered: Collection[str] = ()) -> list[Message]:
    """Return the messages a model may see, with every tool call answered exactly once.

    `unanswered` names calls a backend deferred: they stay without an answer until it gives one.
    """
    # Called at every model step with the whole history: one dispatch by class per message, fields read in C.
    answers: dict[str, ToolMessage] = {}
    for answer in of_kind(messages, ToolMessage):
        answers.setdefault(answer.tool_call_id, answer)
    kinds, view = KIND_BY_CLASS, []
    for message in messages:
        kind = kinds.get(message.__class__) or message_kind(message)
        if kind is AssistantMessage:
            view.append(message)
            calls = _CALLS(message)
            if not calls:
                continue
            # An answer is placed after the call it answers; one call with its answer (the common case) inline.
            only = answers.pop(calls[0].id, None) if len(calls) == 1 else None
            if only is not None:
                view.append(only)
            else:
                view += _answers_for(calls, answers, unanswered)
        elif kind is not ToolMessage and kind is not ActivityMessage:
            view.append(message)
    return view


_Kind = TypeVar("_Kind", ToolMessage, AssistantMessage, ActivityMessage)


def of_kind(messages: Iterable[object], kind: type[_Kind]) -> list[_Kind]:
    """The `messages` that are instances of `kind` (ToolMessage, AssistantMessage or ActivityMessage), in order.

    One pass, each message's kind looked up by its class (`message_kind`), never `isinstance`.
    """
    kinds = KIND_BY_CLASS
    return cast(list[_Kind], [m for m in messages if (kinds.get(m.__class__) or message_kind(m)) is kind])


def ids_held(messages: Sequence[Message]) -> HeldIds:
    """The ids `messages` hold: a backend's new message or call may not take one (`HeldIds`).

    The ids of two conversations together are those of each, joined: kept with a thread's parsed messages, they are
    carried to its next state by joining those of the messages a save appends (`adapter._thread._cache`).
    """
    # One walk by class for both kinds (a resume lists a whole thread's ids here), the call ids read in C.
    kinds, answers, made = KIND_BY_CLASS, list[str](), list[str]()
    for message in messages:
        kind = kinds.get(message.__class__) or message_kind(message)
        if kind is ToolMessage:
            answers.append(_CALL_ID(message))
        elif kind is AssistantMessage:
            calls = _CALLS(message)
            if calls:
                made += map(_ID, calls)
    answered = frozenset(answers)
    return frozenset(map(_ID, messages)), answered.union(made), answered


def refuse_second_answers(
    history: Sequence[Message], stored: Collection[str], older: Mapping[str, str] | None = None
) -> None:
    """One call, one answer: a message the store does not hold may not answer a call that has one.

    `stored` holds the ids of the stored messages the history was built from, `older` the stored answers
    outside them (by call id): the check is against the whole thread, never a loaded slice. A stored
    answer says what happened (a tool's result, a refusal); a second one would contradict it for every
    later reader. Two new answers to one call would store two.

    Raises:
        ResumeError: `RESUME_DUPLICATE`, naming the call.
    """
    answers = of_kind(history, ToolMessage)
    answered = dict(older or {}) | {m.tool_call_id: m.id for m in answers if m.id in stored}
    for message in answers:
        if message.id in stored:
            continue
        if message.tool_call_id in answered:
            raise ResumeError(f"tool call {message.tool_call_id} already has an answer", code=codes.RESUME_DUPLICATE)
        answered[message.tool_call_id] = message.id


def server_said(branch: Sequence[Message], stored: Sequence[Message]) -> list[Message]:
    """A client's branch with what the server said as stored: its messages by id, and each kept call's answer.

    The client may leave messages out, or edit what it said (user, system and developer messages); an
    assistant, tool, reasoning or activity message the store holds is the stored one, and a call the
    branch keeps without its stored answer gets it back, right after the call. So does an assistant
    message the branch keeps without the reasoning that led to it (many clients keep no reasoning, and
    a provider that signs its thinking needs it back): the stored reasoning, right before the message.
    """
    by_id = {message.id: message for message in stored}
    stored_answers = {m.tool_call_id: m for m in of_kind(stored, ToolMessage)}
    leading = _reasoning_before(stored)
    present = set(map(_ID, branch))
    result: list[Message] = []
    kinds = KIND_BY_CLASS  # a new run's whole history passes here: a lookup per message, not `isinstance`
    for message in branch:
        kept = by_id.get(message.id)
        said = kept if kept is not None and kept.role not in _CLIENT_ROLES else message
        if (kinds.get(said.__class__) or message_kind(said)) is not AssistantMessage:
            result.append(said)
            continue
        for thought in leading.get(said.id, ()):
            if thought.id not in present:
                present.add(thought.id)
                result.append(thought)
        result.append(said)
        for call in _CALLS(said) or ():
            answer = stored_answers.get(call.id)
            if answer is not None and answer.id not in present:
                present.add(answer.id)
                result.append(answer)
    return result


_CLIENT_ROLES = frozenset({"user", "system", "developer"})
"""What a client says: a branch may edit these; everything else the server said stays as stored."""


def _reasoning_before(messages: Sequence[Message]) -> dict[str, list[ReasoningMessage]]:
    """The reasoning messages right before each assistant message, by the assistant message's id."""
    leading: dict[str, list[ReasoningMessage]] = {}
    run: list[ReasoningMessage] = []
    for message in messages:
        if isinstance(message, ReasoningMessage):
            run.append(message)
            continue
        if run and isinstance(message, AssistantMessage):
            leading[message.id] = run
        run = []
    return leading


def _answers_for(
    calls: Sequence[ToolCall], answers: dict[str, ToolMessage], unanswered: Collection[str]
) -> list[ToolMessage]:
    placed: list[ToolMessage] = []
    for call in calls:
        answer = answers.pop(call.id, None)
        if answer is None and call.id in unanswered:
            continue
        if answer is None:
            answer = ToolMessage(id=f"{call.id}:missing", tool_call_id=call.id, content=MISSING_RESULT, error="missing")
        placed.append(answer)
    return placed


def keep_server_activity(
    client: Sequence[Message], stored_ids: Sequence[str], cards: Mapping[str, ActivityMessage]
) -> list[Message]:
    """The client's history, with the server's activity messages as the server stored them.

    `stored_ids` are the ids of the stored conversation in order, `cards` its activity messages by id.
    A card the client sent back is replaced by the stored one, so a client can never move a form's
    status. Each card it left out goes right after the message it followed on the server, so a form's
    card stays where it was asked for.
    """
    if not cards:
        return list(client)
    merged = [cards.get(m.id, m) if isinstance(m, ActivityMessage) else m for m in client]
    present = {message.id for message in merged}
    previous: str | None = None
    for message_id in stored_ids:
        card = cards.get(message_id)
        if card is not None and message_id not in present:
            at = next((i + 1 for i, m in enumerate(merged) if m.id == previous), len(merged))
            merged.insert(at, card)
            present.add(message_id)
        previous = message_id
    return merged
