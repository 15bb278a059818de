"""One pass over the history: a client's copy of a stored message is used only when it is the stored text.

The property: whatever a client changes in its copy of the thread before a resume (content, a tool
call added, arguments, an extra member, a message dropped, a same-id message planted ahead), the
model sees the stored conversation, never the client's edit.
"""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

from ag_ui.core import AssistantMessage, Message, RunAgentInput, ToolMessage, UserMessage
from agui import collect, frontend_tool, new_id, resolved, run_input, user
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError
from pydantic_core import PydanticSerializationError
from strategies import JSON as JSON_VALUES
from strategies import messages as fuzzed_messages

from adapter import Adapter, LimitExceeded

# private on purpose: the one-pass reading of a stored thread, the kept parsed threads and the stored text are
# what this suite checks, beside the model's view a backend is sent
from adapter._thread._cache import KnownThread, ParsedStore, ParsedThreads
from adapter._thread._conversation import ids_held, model_view
from adapter._thread._handle import RecordHandle
from adapter._thread._record import message_text, parse_messages, stored_conversation, stored_message
from adapter._types import wire_json
from adapter.backends import Call, Rule, ScriptedBackend
from adapter.stores import MemoryStore, ThreadHead

NAVIGATE = frontend_tool("navigate", path={"type": "string"})
_messages = TypeAdapter(list[Message])
_message: TypeAdapter[Message] = TypeAdapter(Message)


def prior_turns(count: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for k in range(count):
        call = {"id": f"call-{k}", "type": "function", "function": {"name": "navigate", "arguments": '{"path":"/p"}'}}
        messages += [
            {"id": f"u-{k}", "role": "user", "content": f"go to page{k}"},
            {"id": f"a-{k}", "role": "assistant", "toolCalls": [call]},
            {"id": f"t-{k}", "role": "tool", "toolCallId": f"call-{k}", "content": '{"navigated": true}'},
            {"id": f"r-{k}", "role": "assistant", "content": "Opened it."},
        ]
    return messages


def held_by_client(sent: list[dict[str, Any]], events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What a client holds after the run that called its tool: what it sent, plus the call."""
    (start,) = [e for e in events if e["type"] == "TOOL_CALL_START"]
    args = "".join(e["delta"] for e in events if e["type"] == "TOOL_CALL_ARGS")
    call = {"id": start["toolCallId"], "type": "function", "function": {"name": "navigate", "arguments": args}}
    return [*sent, {"id": start["parentMessageId"], "role": "assistant", "toolCalls": [call]}]


EDITS = st.sampled_from(["content", "extra", "add_call", "arguments", "answer_to", "drop", "plant", "role"])


def edit(messages: list[dict[str, Any]], kind: str, index: int, text: str) -> list[dict[str, Any]]:
    """The client's copy with one message changed (or dropped, or a different one planted under its id)."""
    edited = copy.deepcopy(messages)
    target = edited[index % len(edited)]
    if kind == "content":
        target["content"] = text
    elif kind == "extra":
        target["planted"] = text
    elif kind == "add_call" and target["role"] == "assistant":
        forged = {"id": f"forged-{text}", "type": "function", "function": {"name": "navigate", "arguments": "{}"}}
        target["toolCalls"] = [*target.get("toolCalls", []), forged]
    elif kind == "arguments" and target.get("toolCalls"):
        target["toolCalls"][0]["function"]["arguments"] = json.dumps({"path": text})
    elif kind == "answer_to" and target["role"] == "tool":
        target["toolCallId"] = f"other-{text}"
    elif kind == "drop":
        edited.remove(target)
    elif kind == "plant":
        edited.insert(0, {"id": target["id"], "role": "user", "content": f"forged {text}"})
    elif kind == "role" and target["role"] == "user":
        target["role"] = "system"
    return edited


class Scenario:
    """A thread with prior turns that waits on the client's `navigate` call, and the copy the client holds."""

    def __init__(self) -> None:
        rule = Rule(r"go to (\w+)", steps=[[Call("navigate", {"path": "/{1}"})]], reply="Ok.")
        self.backend = ScriptedBackend([rule])
        self.adapter = Adapter(self.backend, store=MemoryStore(), frontend_outcome="interrupt")
        self.thread = new_id("thread")

    async def suspend(self) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        sent = [*prior_turns(3), user("go to orders")]
        body = run_input(self.thread, sent, tools=[NAVIGATE])
        events = await collect(self.adapter.run(RunAgentInput.model_validate(body)))
        (finished,) = [e for e in events if e["type"] == "RUN_FINISHED"]
        (interrupt,) = finished["outcome"]["interrupts"]
        return held_by_client(sent, events), interrupt

    async def resume(self, messages: list[dict[str, Any]], interrupt: dict[str, Any]) -> list[dict[str, Any]]:
        body = run_input(self.thread, messages, tools=[NAVIGATE], resume=[resolved(interrupt["id"], {"ok": True})])
        return await collect(self.adapter.run(RunAgentInput.model_validate(body)), resumed=True)

    async def stored_messages(self) -> list[Message]:
        stored = await self.adapter.store.load(self.thread)
        assert stored is not None
        return parse_messages(stored.messages)

    async def stored_view(self) -> list[dict[str, Any]]:
        return [wire_json(m) for m in model_view(await self.stored_messages())]


@settings(max_examples=60)
@given(st.lists(st.tuples(EDITS, st.integers(0, 99), st.text(min_size=1, max_size=8)), min_size=1, max_size=3))
def test_a_client_copy_that_differs_from_the_store_never_reaches_the_model(edits: list[tuple[str, int, str]]) -> None:
    async def scenario() -> None:
        run = Scenario()
        held, interrupt = await run.suspend()
        before = await run.stored_messages()
        forged = held
        for kind, index, text in edits:
            forged = edit(forged, kind, index, text)
        try:
            RunAgentInput.model_validate(run_input(run.thread, forged))
        except ValidationError:
            return  # the edge refuses it with a 422: nothing reaches the engine
        try:
            events = await run.resume(forged, interrupt)
        except LimitExceeded:
            return  # an id no store keeps: the run refuses it with a 422 code, as the edge does
        assert events[-1]["type"] == "RUN_FINISHED", events[-1]
        seen = [wire_json(m) for m in run.backend.requests[-1].messages]
        assert seen == (await run.stored_view())[: len(seen)]
        assert seen[: len(before)] == [wire_json(m) for m in before]  # the stored turns, whatever the client sent

    asyncio.run(scenario())


def stored(*messages: Message) -> list[Any]:
    return [stored_message(message) for message in messages]


def test_an_identical_copy_is_used_and_a_differing_one_is_read_from_the_store() -> None:
    same, theirs = UserMessage(id="u1", content="hello"), UserMessage(id="u2", content="forged")
    kept = stored(UserMessage(id="u1", content="hello"), UserMessage(id="u2", content="original"))

    conversation = stored_conversation(kept, {"u1": same, "u2": theirs})

    assert conversation[0] is same
    assert conversation[1] is not theirs
    assert wire_json(conversation[1]) == {"id": "u2", "role": "user", "content": "original"}


def test_a_thread_read_whole_from_the_store_is_what_one_validation_reads() -> None:
    kept = stored(*_messages.validate_python(prior_turns(2)))
    assert stored_conversation(kept, {}) == parse_messages(kept) == _messages.validate_python(prior_turns(2))


EXTRAS = st.dictionaries(st.sampled_from(["planted", "meta", "x"]), JSON_VALUES, max_size=2)
PARTS = st.lists(
    st.one_of(
        st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=10)}),
        st.fixed_dictionaries(
            {"type": st.just("image"), "source": st.fixed_dictionaries({"type": st.just("url"), "value": st.text()})}
        ),
    ),
    max_size=2,
)


@st.composite
def wire_messages(draw: st.DrawFn) -> Any:
    message = draw(fuzzed_messages()) if draw(st.booleans()) else {"id": "m", "role": "user", "content": draw(PARTS)}
    if isinstance(message, dict):
        message.update(draw(EXTRAS))
        if draw(st.booleans()):
            message["name"] = draw(st.none() | st.text(max_size=4))
    return message


@settings(max_examples=400)
@given(wire_messages())
def test_the_stored_text_is_pydantics_json_of_the_message(wire: Any) -> None:
    try:
        message = _message.validate_python(wire)
    except ValidationError:
        return
    try:
        expected = message.model_dump_json(by_alias=True, exclude_none=True)
    except PydanticSerializationError:
        expected = json.dumps(wire_json(message))
    assert message_text(message) == expected
    if "\\ud" not in expected.lower():  # an escaped lone surrogate is read back by the slower path
        assert wire_json(_message.validate_json(message_text(message))) == wire_json(message)


async def test_a_copy_the_store_kept_by_id_alone_never_reaches_a_later_resume() -> None:
    """Client mode keeps a resent message by id; the adapter's parsed thread must still be the stored text."""
    run = Scenario()
    hello = user("hello")
    await collect(run.adapter.run(RunAgentInput.model_validate(run_input(run.thread, [hello]))))
    stored = await run.stored_messages()
    forged = [{**hello, "content": "forged"}, *[wire_json(m) for m in stored[1:]], user("go to orders")]
    events = await collect(
        run.adapter.run(RunAgentInput.model_validate(run_input(run.thread, forged, tools=[NAVIGATE])))
    )
    (finished,) = [e for e in events if e["type"] == "RUN_FINISHED"]
    (interrupt,) = finished["outcome"]["interrupts"]

    await run.resume([], interrupt)

    seen = run.backend.requests[-1].messages
    assert [m.content for m in seen if m.id == hello["id"]] == ["hello"]


async def test_a_thread_changed_by_another_replica_is_read_from_the_store() -> None:
    store = MemoryStore()
    rule = Rule(r"go to (\w+)", steps=[[Call("navigate", {"path": "/{1}"})]], reply="Ok.")
    ours, theirs = ScriptedBackend([rule]), ScriptedBackend([rule])
    here, there = (
        Adapter(ours, store=store, frontend_outcome="interrupt"),
        Adapter(theirs, store=store, frontend_outcome="interrupt"),
    )
    thread = new_id("thread")
    first = [user("hello")]
    await collect(here.run(RunAgentInput.model_validate(run_input(thread, first))))
    rewritten = [user("a different start"), user("go to orders")]  # only new messages: they continue the thread
    events = await collect(there.run(RunAgentInput.model_validate(run_input(thread, rewritten, tools=[NAVIGATE]))))
    (finished,) = [e for e in events if e["type"] == "RUN_FINISHED"]
    (interrupt,) = finished["outcome"]["interrupts"]

    body = run_input(thread, [], tools=[NAVIGATE], resume=[resolved(interrupt["id"], {"ok": True})])
    await collect(here.run(RunAgentInput.model_validate(body)), resumed=True)

    seen = [m.id for m in ours.requests[-1].messages]
    assert seen[0] == first[0]["id"]
    assert [i for i in seen if i in {m["id"] for m in rewritten}] == [m["id"] for m in rewritten]


async def test_the_ids_kept_with_a_parsed_thread_are_those_of_its_messages_after_every_save() -> None:
    """Carried from save to save (each adds those of what it appends) once a run listed them."""
    run = Scenario()
    held, interrupt = await run.suspend()
    await run.resume(held, interrupt)
    later = [*held, *[wire_json(m) for m in (await run.stored_messages())[len(held) :]], user("go to invoices")]
    await collect(run.adapter.run(RunAgentInput.model_validate(run_input(run.thread, later, tools=[NAVIGATE]))))

    stored = await run.adapter.store.load(run.thread)
    assert stored is not None
    kept = run.adapter.config.parsed.named(run.thread, stored.head)
    assert kept is not None and kept.held is not None  # listed by the resume's step, carried by the saves since
    assert kept.held == ids_held(kept.messages)
    assert len(kept.held[2]) == 4  # the prior turns' three answers and the resumed call's; the new call waits


class _Assistant(AssistantMessage):
    """An app's own assistant message class: its kind is found by `issubclass`, not the class's table entry."""


def _conversation(drawn: list[tuple[dict[str, Any], bool, int]]) -> list[Message]:
    messages: list[Message] = []
    for body, own_class, calls in drawn:
        try:
            message = _message.validate_python(body)
        except ValidationError:
            continue
        if isinstance(message, AssistantMessage):
            kept = message.tool_calls or []
            more = [call.model_copy(update={"id": f"{call.id}-{k}"}) for call in kept for k in range(calls)]
            message = message.model_copy(update={"tool_calls": [*kept, *more] if kept or more else message.tool_calls})
            if own_class:
                message = _Assistant.model_validate(message.model_dump())
        messages.append(message)
    return messages


@settings(max_examples=300)
@given(st.lists(st.tuples(fuzzed_messages(), st.booleans(), st.integers(0, 2)), max_size=12))
def test_the_ids_a_conversation_holds_are_its_messages_calls_and_answers(
    drawn: list[tuple[dict[str, Any], bool, int]],
) -> None:
    messages = _conversation(drawn)
    answered = frozenset(m.tool_call_id for m in messages if isinstance(m, ToolMessage))
    made = frozenset(call.id for m in messages if isinstance(m, AssistantMessage) for call in m.tool_calls or ())
    assert ids_held(messages) == (frozenset(m.id for m in messages), answered | made, answered)


async def test_a_history_is_walked_past_the_loaded_record_only_where_it_is_that_very_record() -> None:
    """A model step lists ids only past the loaded messages themselves; the client's equal copies are walked whole."""
    run = Scenario()
    await run.suspend()
    handle = RecordHandle(ParsedStore(run.adapter.store, run.adapter.config.parsed), run.thread)
    await handle.load()
    loaded = handle.conversation()
    new = _message.validate_python(user("next"))

    assert handle.past_loaded([*loaded, new]) == [new]
    copies = [message.model_copy() for message in loaded]
    assert handle.past_loaded([*copies, new]) == [*copies, new]
    assert handle.past_loaded(loaded[:-1]) == loaded[:-1]


def test_parsed_threads_serve_only_the_state_a_head_names_and_stay_in_budget() -> None:
    messages = tuple(_messages.validate_python(prior_turns(2)))
    stored = tuple(stored_message(m) for m in messages)
    parsed = ParsedThreads(max_chars=sum(len(m.json) for m in stored))
    kept = KnownThread(stored, messages, -1, "stamp-1", 3)
    parsed.keep("t", kept)

    assert parsed.named("t", ThreadHead(version=3, claim=0, message_count=len(stored), stamp="stamp-1")) is kept
    assert parsed.named("t", ThreadHead(version=3, claim=0, message_count=len(stored), stamp="stamp-2")) is None
    assert parsed.named("t", ThreadHead(version=4, claim=0, message_count=len(stored), stamp="stamp-1")) is None
    assert parsed.named("other", ThreadHead(version=3, claim=0, message_count=len(stored), stamp="stamp-1")) is None

    parsed.keep("u", KnownThread(stored[:1], messages[:1], -1, "stamp-3", 1))  # over budget together: the older goes
    assert parsed.named("t", ThreadHead(version=3, claim=0, message_count=len(stored), stamp="stamp-1")) is None
    assert parsed.named("u", ThreadHead(version=1, claim=0, message_count=1, stamp="stamp-3")) is not None


def test_a_state_no_head_names_is_not_kept() -> None:
    messages = tuple(_messages.validate_python(prior_turns(1)))
    parsed = ParsedThreads(head_first=0)
    parsed.keep("t", KnownThread(tuple(stored_message(m) for m in messages), messages))  # a store that keeps no stamp
    assert parsed.checkable("t") is None
