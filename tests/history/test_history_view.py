"""`Adapter(history_view=...)`: the app picks the model's view of a long thread; the pairing rule still holds.

Whatever messages the app's view keeps, drops or adds, every tool call the model sees has exactly
one answer right after its assistant message (the recorded one when there is one), and no answer
the model sees is without its call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from ag_ui.core import (
    ActivityMessage,
    AssistantMessage,
    FunctionCall,
    Message,
    SystemMessage,
    ToolMessage,
    UserMessage,
)
from ag_ui.core import ToolCall as WireToolCall
from agui import run_events, run_input, user
from hypothesis import given, settings
from hypothesis import strategies as st

from adapter import Adapter
from adapter._thread._conversation import (  # private on purpose: the view rule, for any selection
    MISSING_RESULT,
    chosen_view,
    model_view,
)
from adapter.backends import Rule, ScriptedBackend
from adapter.stores import SQLiteStore


def last_turns(count: int) -> Any:
    """The docs' example (docs/stores.md, "Long threads"): a summary line, then the last `count` user turns."""

    def view(history: list[Message]) -> list[Message]:
        starts = [i for i, m in enumerate(history) if m.role == "user"]
        if len(starts) <= count:
            return history
        cut = starts[-count]
        summary = SystemMessage(id="summary", content=f"{cut} earlier messages are left out of this view.")
        return [summary, *history[cut:]]

    return view


def call(call_id: str) -> WireToolCall:
    return WireToolCall(id=call_id, type="function", function=FunctionCall(name="lookup", arguments="{}"))


@st.composite
def conversations(draw: st.DrawFn) -> list[Message]:
    """Turns of user text, assistant calls (answered, unanswered, answered twice) and cards, in any mix."""
    messages: list[Message] = []
    for turn in range(draw(st.integers(0, 6))):
        messages.append(UserMessage(id=f"u{turn}", content=f"question {turn}"))
        calls = [f"c{turn}-{k}" for k in range(draw(st.integers(0, 3)))]
        if calls:
            messages.append(AssistantMessage(id=f"a{turn}", tool_calls=[call(c) for c in calls]))
        for k, call_id in enumerate(calls):
            for copy in range(draw(st.integers(0, 2))):
                messages.append(ToolMessage(id=f"t{turn}-{k}-{copy}", tool_call_id=call_id, content="result"))
        if draw(st.booleans()):
            messages.append(ActivityMessage(id=f"card{turn}", activity_type="agent_form", content={"v": 1}))
        messages.append(AssistantMessage(id=f"r{turn}", content=f"answer {turn}"))
    if draw(st.booleans()):
        messages.append(ToolMessage(id="stray", tool_call_id="no-such-call", content="orphan"))
    return messages


def assert_paired(view: Sequence[Message], history: Sequence[Message], picked: Sequence[Message]) -> None:
    """Each call answered once, right after it: by the answer the app picked, else by the recorded one."""
    recorded: dict[str, str] = {}
    for message in [*picked, *history]:
        if isinstance(message, ToolMessage):
            recorded.setdefault(message.tool_call_id, message.id)
    waiting: list[str] = []
    answered: set[str] = set()
    for message in view:
        assert not isinstance(message, ActivityMessage)
        if isinstance(message, ToolMessage):
            assert waiting, "an answer without its call, or out of order"
            assert message.tool_call_id == waiting.pop(0), "an answer without its call, or out of order"
            assert message.tool_call_id not in answered
            answered.add(message.tool_call_id)
            if message.tool_call_id in recorded:
                assert message.id == recorded[message.tool_call_id], "a kept call lost its answer"
            else:
                assert message.content == MISSING_RESULT
            continue
        assert not waiting, "a call without its answer"
        if isinstance(message, AssistantMessage):
            waiting = [c.id for c in message.tool_calls or []]
    assert not waiting


@settings(max_examples=300)
@given(conversations(), st.lists(st.booleans(), max_size=40), st.booleans())
def test_any_view_the_app_picks_keeps_every_call_paired(
    history: list[Message], keep: list[bool], summarize: bool
) -> None:
    def pick(messages: list[Message]) -> list[Message]:
        chosen = [m for i, m in enumerate(messages) if (keep[i] if i < len(keep) else True)]
        return [SystemMessage(id="summary", content="earlier: ..."), *chosen] if summarize else chosen

    view = chosen_view(history, pick)

    picked = pick(list(history))
    assert_paired(view, history, picked)
    shown = [m.id for m in picked if not isinstance(m, ActivityMessage | ToolMessage)]
    assert [m.id for m in view if not isinstance(m, ToolMessage)] == shown


def view_by_the_rule(history: Sequence[Message], unanswered: set[str]) -> list[Message]:
    """`model_view`'s rule, plainly: after each call its first answer anywhere, once; a deferred call may wait."""
    answers: dict[str, ToolMessage] = {}
    for message in history:
        if isinstance(message, ToolMessage):
            answers.setdefault(message.tool_call_id, message)
    view: list[Message] = []
    for message in history:
        if isinstance(message, ToolMessage | ActivityMessage):
            continue
        view.append(message)
        for tool_call in message.tool_calls or [] if isinstance(message, AssistantMessage) else []:
            answer = answers.pop(tool_call.id, None)
            if answer is None and tool_call.id not in unanswered:
                view.append(
                    ToolMessage(id=f"{tool_call.id}:missing", tool_call_id=tool_call.id, content=MISSING_RESULT)
                )
            elif answer is not None:
                view.append(answer)
    return view


CALL_IDS = ["x", "y", "z"]


@st.composite
def tangled_histories(draw: st.DrawFn) -> list[Message]:
    """Calls that repeat an id, answers before their call, twice or to no call, cards: any order of a few ids."""
    messages: list[Message] = []
    for n in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(["user", "calls", "answer", "card", "text"]))
        if kind == "user":
            messages.append(UserMessage(id=f"m{n}", content="question"))
        elif kind == "calls":
            ids = draw(st.lists(st.sampled_from(CALL_IDS), min_size=1, max_size=3))
            messages.append(AssistantMessage(id=f"m{n}", tool_calls=[call(c) for c in ids]))
        elif kind == "answer":
            messages.append(ToolMessage(id=f"m{n}", tool_call_id=draw(st.sampled_from(CALL_IDS)), content=f"r{n}"))
        elif kind == "card":
            messages.append(ActivityMessage(id=f"m{n}", activity_type="agent_form", content={"v": 1}))
        else:
            messages.append(AssistantMessage(id=f"m{n}", content="answer"))
    return messages


@settings(max_examples=500)
@given(st.one_of(tangled_histories(), conversations()), st.sets(st.sampled_from([*CALL_IDS, "c0-0", "c1-1"])))
def test_the_model_view_answers_each_call_by_the_rule(history: list[Message], unanswered: set[str]) -> None:
    """One call with its answer is placed by a fast path; any other case by the general one, to the same view."""
    view = model_view(history, unanswered)
    expected = view_by_the_rule(history, unanswered)
    assert [(m.id, m.role, getattr(m, "content", None)) for m in view] == [
        (m.id, m.role, getattr(m, "content", None)) for m in expected
    ]
    assert all(a is b for a, b in zip(view, expected, strict=True) if not a.id.endswith(":missing"))


def test_without_a_view_the_model_sees_the_whole_repaired_history() -> None:
    history: list[Message] = [UserMessage(id="u", content="hi"), AssistantMessage(id="a", tool_calls=[call("c")])]
    assert [m.id for m in chosen_view(history, None)] == ["u", "a", "c:missing"]


def test_a_view_cannot_change_the_history_it_is_given() -> None:
    history: list[Message] = [UserMessage(id="u", content="hi")]

    def clear(messages: list[Message]) -> list[Message]:
        messages.clear()
        return []

    assert chosen_view(history, clear) == []
    assert [m.id for m in history] == ["u"]


async def test_a_view_that_edits_messages_in_place_changes_nothing_stored_cached_or_streamed(tmp_path: Any) -> None:
    def shout(history: list[Message]) -> list[Message]:
        for message in history:
            if isinstance(message.content, str):
                message.content = message.content.upper()  # an app's view that edits what it is given
        return history

    backend = ScriptedBackend([Rule(r".*", reply="fine")])
    agent = Adapter(backend, store=SQLiteStore(tmp_path / "t.db"), history="server", history_view=shout)
    first = user("hello there")
    await run_events(agent, run_input("thread-edit", [first]))
    stored = await agent.thread("thread-edit")

    events = await run_events(agent, run_input("thread-edit", [user("again")]))

    assert stored is not None
    assert stored["messages"][0]["content"] == "hello there"
    assert (await agent.thread("thread-edit"))["messages"][:2] == stored["messages"]  # type: ignore[index]
    assert backend.requests[-1].messages[0].content == "HELLO THERE"  # the model saw the view
    snapshots = [e for e in events if e["type"] == "MESSAGES_SNAPSHOT"]
    assert all(m.get("content") != "HELLO THERE" for e in snapshots for m in e["messages"])
    again = await run_events(agent, run_input("thread-edit", [user("third")]))
    assert again[-1]["type"] == "RUN_FINISHED"
    assert backend.requests[-1].messages[0].content == "HELLO THERE"  # upper-cased once, from the stored text


@pytest.mark.parametrize("count", [1, 2])
async def test_the_backend_is_sent_the_apps_view_of_a_long_thread(count: int) -> None:
    backend = ScriptedBackend([Rule(r"question", reply="ok")])
    agent = Adapter(backend, history_view=last_turns(count))
    earlier: list[dict[str, Any]] = []
    for turn in range(4):
        earlier += [user(f"question {turn}"), {"id": f"r{turn}", "role": "assistant", "content": f"answer {turn}"}]
    asked = user("question now")

    events = await run_events(agent, run_input("thread-long", [*earlier, asked]))

    assert events[-1]["type"] == "RUN_FINISHED"
    seen = backend.requests[-1].messages
    assert seen[0].id == "summary"
    assert [m.id for m in seen[1:]] == [m["id"] for m in [*earlier, asked][-(2 * count - 1) :]]
