"""The engine's reasoning rules, for any backend: `ReasoningDelta` items and an agent's own `REASONING_*` events.

Reasoning streams as reasoning messages, is stored in its place (before the answer it led to, never inside one
already said), keeps its encrypted value, and goes back to the backend in `ModelRequest.messages`.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from ag_ui.core import RunAgentInput
from agui import collect, run_events, run_input, user
from hypothesis import given
from hypothesis import strategies as st
from protocol_models import Recorder, upstream

from adapter import Adapter
from adapter._types import wire_json  # private on purpose: what the backend is given, as the store keeps it
from adapter.backends import (
    AGUIUpstream,
    BackendItem,
    ExecutedToolCall,
    ModelRequest,
    ReasoningDelta,
    TextDelta,
)


@dataclass
class Scripted:
    """A backend that yields each step's items as given (an exception item is raised), and keeps every request."""

    steps: list[list[BackendItem | Exception]]
    requests: list[ModelRequest] = field(default_factory=list)

    async def stream(self, request: ModelRequest) -> AsyncIterator[BackendItem]:
        self.requests.append(request)
        for item in self.steps.pop(0):
            if isinstance(item, Exception):
                raise item
            yield item


async def run(adapter: Adapter, thread_id: str, messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return await collect(adapter.run(RunAgentInput.model_validate(run_input(thread_id, messages))))


async def stored(adapter: Adapter, thread_id: str) -> list[dict[str, Any]]:
    thread = await adapter.thread(thread_id)
    assert thread is not None
    messages: list[dict[str, Any]] = thread["messages"]
    return messages


counter = itertools.count()
thoughts = st.builds(ReasoningDelta, st.text(min_size=1, max_size=4), st.sampled_from([None, None, "r-a", "r-b"]))
said = st.builds(TextDelta, st.text(min_size=1, max_size=4))
ran = st.builds(lambda: ExecutedToolCall(f"own-{next(counter)}", "search", "{}", "found"))
steps = st.lists(st.one_of(thoughts, said, ran), max_size=10)


def kind_of(item: ReasoningDelta | TextDelta) -> str:
    return "reasoning" if isinstance(item, ReasoningDelta) else "assistant"


def runs_of(pairs: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """Adjacent pieces of one kind, joined: what a reader sees of reasoning, then text, then reasoning..."""
    return [(kind, "".join(text for _, text in group)) for kind, group in itertools.groupby(pairs, lambda p: p[0])]


@given(st.lists(steps, min_size=1, max_size=2))
def test_reasoning_is_stored_in_its_place_and_goes_back_to_the_backend(turns: list[list[BackendItem]]) -> None:
    backend = Scripted([list(items) for items in turns])
    adapter = Adapter(backend)

    async def scenario() -> None:
        for number, items in enumerate(turns):
            events = await run(adapter, "t1", [user(f"turn {number}")])
            messages = await stored(adapter, "t1")
            turn = messages[messages.index(next(m for m in messages if m.get("content") == f"turn {number}")) + 1 :]
            told = [(kind_of(item), item.text) for item in items if isinstance(item, ReasoningDelta | TextDelta)]
            kept = [
                (m["role"], m["content"]) for m in turn if m["role"] in ("reasoning", "assistant") and m.get("content")
            ]
            assert runs_of(kept) == runs_of(told)  # nothing lost, nothing moved across what was said
            for message, following in itertools.pairwise(turn):
                if message["role"] == "reasoning":
                    assert following["role"] in ("reasoning", "assistant")  # reasoning leads to an answer
            streamed: dict[str, str] = {}
            for event in events:
                if event["type"] == "REASONING_MESSAGE_CONTENT":
                    streamed[event["messageId"]] = streamed.get(event["messageId"], "") + event["delta"]
            assert streamed == {m["id"]: m["content"] for m in turn if m["role"] == "reasoning"}
        messages = await stored(adapter, "t1")
        assert len({m["id"] for m in messages}) == len(messages)
        for request in backend.requests:
            seen = [wire_json(message) for message in request.messages]
            assert seen == messages[: len(seen)]  # the backend gets the reasoning back, in its place

    asyncio.run(scenario())


async def test_reasoning_left_open_is_closed_before_the_error() -> None:
    adapter = Adapter(Scripted([[ReasoningDelta("Let me"), RuntimeError("the model went away")]]))

    events = await run_events(adapter, run_input("t1", [user("hi")]))

    assert [e["type"] for e in events] == [
        "RUN_STARTED",
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_END",
        "REASONING_END",
        "RUN_ERROR",
    ]
    assert events[-1]["code"] == "BACKEND_ERROR"


async def test_an_encrypted_value_is_streamed_untouched_and_kept_on_its_message() -> None:
    backend = Scripted([[ReasoningDelta("", "r-1", encrypted_value="c2ln+/=="), TextDelta("Hi")], [TextDelta("Again")]])
    adapter = Adapter(backend)

    events = await run_events(adapter, run_input("t1", [user("hi")]))
    await run_events(adapter, run_input("t1", [user("again")]))

    (sealed,) = [e for e in events if e["type"] == "REASONING_ENCRYPTED_VALUE"]
    assert sealed == {
        "type": "REASONING_ENCRYPTED_VALUE",
        "subtype": "message",
        "entityId": "r-1",
        "encryptedValue": "c2ln+/==",
    }
    reasoning = {"id": "r-1", "role": "reasoning", "content": "", "encryptedValue": "c2ln+/=="}
    assert (await stored(adapter, "t1"))[1] == reasoning
    assert wire_json(backend.requests[1].messages[1]) == reasoning


async def test_a_reasoning_id_the_thread_holds_is_replaced() -> None:
    backend = Scripted([[ReasoningDelta("one", "r-1"), TextDelta("A")], [ReasoningDelta("two", "r-1"), TextDelta("B")]])
    adapter = Adapter(backend)

    await run_events(adapter, run_input("t1", [user("hi")]))
    second = await run_events(adapter, run_input("t1", [user("again")]))

    messages = await stored(adapter, "t1")
    reasoning = [m for m in messages if m["role"] == "reasoning"]
    assert [m["content"] for m in reasoning] == ["one", "two"]
    assert reasoning[0]["id"] == "r-1"
    assert reasoning[1]["id"] == second[1]["messageId"] != "r-1"


def thread_of(events: list[dict[str, Any]], asked: dict[str, Any]) -> list[dict[str, Any]]:
    """The conversation as a client that keeps reasoning holds it after one run."""
    messages: list[dict[str, Any]] = [asked]
    for event in events:
        if event["type"] == "REASONING_MESSAGE_START":
            messages.append({"id": event["messageId"], "role": "reasoning", "content": ""})
        elif event["type"] == "REASONING_MESSAGE_CONTENT":
            messages[-1]["content"] += event["delta"]
        elif event["type"] == "TEXT_MESSAGE_START":
            messages.append({"id": event["messageId"], "role": "assistant", "content": ""})
        elif event["type"] == "TEXT_MESSAGE_CONTENT":
            messages[-1]["content"] += event["delta"]
    return messages


@pytest.mark.parametrize(
    ("branch", "seen"),
    [
        pytest.param(lambda held: held, ["user", "reasoning", "assistant", "user"], id="kept"),
        pytest.param(
            lambda held: [m for m in held if m["role"] != "reasoning"],
            ["user", "reasoning", "assistant", "user"],
            id="left out",
        ),
        pytest.param(
            lambda held: [{**m, "content": "forged"} if m["role"] == "reasoning" else m for m in held],
            ["user", "reasoning", "assistant", "user"],
            id="edited",
        ),
        pytest.param(lambda held: held[:1], ["user", "user"], id="regenerated"),
    ],
)
async def test_a_client_history_gets_the_stored_reasoning_of_each_answer_it_keeps(branch: Any, seen: list[str]) -> None:
    backend = Scripted([[ReasoningDelta("I think", encrypted_value="sig"), TextDelta("Hi")], [TextDelta("Again")]])
    adapter = Adapter(backend, history="client")
    asked = user("hi")
    events = await run_events(adapter, run_input("t1", [asked]))

    await run_events(adapter, run_input("t1", [*branch(thread_of(events, asked)), user("again")]))

    view = [wire_json(message) for message in backend.requests[1].messages]
    assert [m["role"] for m in view] == seen
    for message in view:
        if message["role"] == "reasoning":
            assert (message["content"], message["encryptedValue"]) == ("I think", "sig")


async def test_an_upstreams_encrypted_values_stay_on_the_messages_and_calls_they_name() -> None:
    call = {"type": "TOOL_CALL_START", "toolCallId": "own-1", "toolCallName": "search", "parentMessageId": "up-m1"}
    first = [
        {"type": "REASONING_START", "messageId": "up-r1"},
        {"type": "REASONING_ENCRYPTED_VALUE", "subtype": "message", "entityId": "up-r1", "encryptedValue": "redacted"},
        {"type": "REASONING_END", "messageId": "up-r1"},
        call,
        {"type": "REASONING_ENCRYPTED_VALUE", "subtype": "tool-call", "entityId": "own-1", "encryptedValue": "kind"},
        {"type": "TOOL_CALL_END", "toolCallId": "own-1"},
        {"type": "TOOL_CALL_RESULT", "messageId": "up-t1", "toolCallId": "own-1", "content": "3 hits"},
        {"type": "REASONING_ENCRYPTED_VALUE", "subtype": "message", "entityId": "up-t1", "encryptedValue": "outcome"},
    ]
    recorded = Recorder(upstream([first, []]))
    adapter = Adapter(AGUIUpstream(recorded))

    await run_events(adapter, run_input("t1", [user("search")]))
    await run_events(adapter, run_input("t1", [user("again")]))

    reasoning, assistant, result = (await stored(adapter, "t1"))[1:4]
    assert reasoning == {"id": "up-r1", "role": "reasoning", "content": "", "encryptedValue": "redacted"}
    assert assistant["toolCalls"][0]["encryptedValue"] == "kind"
    assert (result["id"], result["encryptedValue"]) == ("up-t1", "outcome")
    sent = recorded.request(1)["messages"][1:4]
    assert sent == [reasoning, assistant, result]


def reasoned(message_id: str, words: str, **attributed: str) -> list[dict[str, Any]]:
    """An upstream's reasoning message, whole."""
    return [
        {"type": "REASONING_START", "messageId": message_id, **attributed},
        {"type": "REASONING_MESSAGE_START", "messageId": message_id, "role": "reasoning", **attributed},
        {"type": "REASONING_MESSAGE_CONTENT", "messageId": message_id, "delta": words, **attributed},
        {"type": "REASONING_MESSAGE_END", "messageId": message_id, **attributed},
        {"type": "REASONING_END", "messageId": message_id, **attributed},
    ]


async def test_an_upstreams_reasoning_under_a_used_id_or_of_a_subagent_is_forwarded_not_stored(
    caplog: pytest.LogCaptureFixture,
) -> None:
    adapter = Adapter(
        AGUIUpstream(
            upstream(
                [reasoned("up-r1", "first"), [*reasoned("up-r1", "again"), *reasoned("s-r", "sub", subagentRunId="s1")]]
            )
        )
    )

    await run_events(adapter, run_input("t1", [user("hi")]))
    second = await run_events(adapter, run_input("t1", [user("again")]))

    assert second[1:-1] == [*reasoned("up-r1", "again"), *reasoned("s-r", "sub", subagentRunId="s1")]
    reasoning = [m for m in await stored(adapter, "t1") if m["role"] == "reasoning"]
    assert reasoning == [{"id": "up-r1", "role": "reasoning", "content": "first"}]
    assert "did not store reasoning message 'up-r1': another message has its id" in caplog.messages
