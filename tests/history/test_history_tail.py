"""A view that declares a `tail`: with `history="server"`, a new run reads only the thread's last messages.

Memory per run follows what the model may be sent, not the thread's length: these tests count the
messages the store returned (a real SQLite file, 5,000 stored messages), not time or memory.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from ag_ui.core import AssistantMessage, Message, ToolMessage
from agui import NAVIGATE, run_input, tool_answer, user

from adapter import Adapter, ConfigurationError
from adapter.backends import Call, Rule, ScriptedBackend
from adapter.stores import SQLiteStore, StoredMessage, StoredThread, ThreadChange

if TYPE_CHECKING:
    from conftest import Serve

THREAD = "thread-tail"
STORED = 5_000


class CountingStore(SQLiteStore):
    """A real SQLite store that counts the messages its loads returned."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.returned = 0

    async def load(self, thread_id: str, *, since: int | None = 0, until: int | None = None) -> StoredThread | None:
        stored = await super().load(thread_id, since=since, until=until)
        self.returned += len(stored.messages) if stored is not None else 0
        return stored


class LastMessages:
    """The app's view: the last `tail` messages; it declares that it needs no more of the stored thread."""

    def __init__(self, tail: int) -> None:
        self.tail = tail
        self.seen: list[list[str]] = []

    def __call__(self, history: list[Message]) -> Sequence[Message]:
        self.seen.append([m.id for m in history])
        return history[-self.tail :]


def wire(message: dict[str, Any]) -> StoredMessage:
    return StoredMessage(message["id"], message["role"], json.dumps(message, separators=(",", ":")))


def earlier() -> list[dict[str, Any]]:
    """5,000 messages: turns of a question and an answer, every tenth turn a tool call and its result."""
    messages: list[dict[str, Any]] = []
    turn = 0
    while len(messages) < STORED:
        messages.append({"id": f"u{turn}", "role": "user", "content": f"note {turn}"})
        if turn % 10 == 9:
            call = {"id": f"c{turn}", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
            messages.append({"id": f"a{turn}", "role": "assistant", "toolCalls": [call]})
            messages.append({"id": f"t{turn}", "role": "tool", "toolCallId": f"c{turn}", "content": "found"})
        messages.append({"id": f"r{turn}", "role": "assistant", "content": f"noted {turn}"})
        turn += 1
    return messages[:STORED]


@pytest.fixture
async def seeded(tmp_path: Path) -> tuple[CountingStore, list[dict[str, Any]]]:
    store = CountingStore(tmp_path / "turns.db")
    messages = earlier()
    await store.save(THREAD, ThreadChange(append=[wire(m) for m in messages]), expected_version=0)
    store.returned = 0
    return store, messages


async def stored_ids(store: SQLiteStore) -> list[str]:
    loaded = await store.load(THREAD)
    assert loaded is not None
    return [m.id for m in loaded.messages]


async def test_a_new_run_reads_only_the_declared_tail_of_a_long_thread(serve: Serve, seeded: Any) -> None:
    store, messages = seeded
    backend, view = ScriptedBackend([Rule(r"question", reply="ok")]), LastMessages(8)
    served = await serve(Adapter(backend, store=store, history="server", history_view=view))
    asked = user("question now")

    reply = await served.client.post(run_input(THREAD, [asked]))

    assert reply.outcome == {"type": "success"}
    assert store.returned == 8  # the head, then the last 8 of 5,000: nothing else was read
    assert view.seen == [[*(m["id"] for m in messages[-8:]), asked["id"]]]
    assert [m.id for m in backend.requests[-1].messages] == view.seen[0][-8:]
    after = await stored_ids(store)
    assert after[:STORED] == [m["id"] for m in messages]
    assert after[STORED] == asked["id"]
    assert len(after) == STORED + 2  # the question and the answer, appended once


async def test_a_client_that_resends_older_messages_adds_only_the_new_one(serve: Serve, seeded: Any) -> None:
    store, messages = seeded
    served = await serve(
        Adapter(
            ScriptedBackend([Rule(r"question", reply="ok")]),
            store=store,
            history="server",
            history_view=LastMessages(4),
        )
    )
    asked = user("question now")

    reply = await served.client.post(run_input(THREAD, [*messages[:20], *messages[-30:], asked]))

    assert reply.outcome == {"type": "success"}
    assert store.returned == 4
    after = await stored_ids(store)
    assert after[STORED:] == [asked["id"], after[-1]]
    assert len(after) == len(set(after))


async def test_a_tail_that_starts_at_an_answer_never_shows_it_without_its_call(serve: Serve, seeded: Any) -> None:
    store, messages = seeded
    cut = next(i for i in range(STORED - 40, STORED) if messages[i]["role"] == "tool")
    backend, view = ScriptedBackend([Rule(r"question", reply="ok")]), LastMessages(10**6)
    view.tail = STORED - cut  # the stored tail begins with a tool result whose call is older
    served = await serve(Adapter(backend, store=store, history="server", history_view=view))

    reply = await served.client.post(run_input(THREAD, [user("question now")]))

    assert reply.outcome == {"type": "success"}
    assert view.seen[0][0] == messages[cut]["id"]
    seen = backend.requests[-1].messages
    calls = {c.id for m in seen if isinstance(m, AssistantMessage) for c in m.tool_calls or []}
    assert all(m.tool_call_id in calls for m in seen if isinstance(m, ToolMessage))
    assert messages[cut]["id"] not in [m.id for m in seen]


async def test_an_interrupt_still_restates_the_whole_thread(serve: Serve, seeded: Any) -> None:
    """SNAP-2: a MESSAGES_SNAPSHOT is complete, so a run that read the tail reads the rest for it."""
    store, messages = seeded
    backend = ScriptedBackend([Rule(r"go", steps=[[Call("navigate", {"path": "/x"})]])])
    served = await serve(
        Adapter(backend, store=store, history="server", history_view=LastMessages(6), frontend_outcome="interrupt")
    )
    asked = user("go somewhere")

    reply = await served.client.post(run_input(THREAD, [asked], tools=[NAVIGATE]))

    assert reply.outcome["type"] == "interrupt"
    snapshot = [m["id"] for m in reply.snapshot]
    assert snapshot == await stored_ids(store)
    assert snapshot[: STORED + 1] == [*(m["id"] for m in messages), asked["id"]]


async def test_the_interrupted_turn_resumes_from_the_whole_thread(serve: Serve, seeded: Any) -> None:
    """A resume is checked against the stored turn and reads the whole thread; the tail bounds new runs only."""
    store, messages = seeded
    backend = ScriptedBackend([Rule(r"go", steps=[[Call("navigate", {"path": "/x"})]], reply="went")])
    served = await serve(
        Adapter(backend, store=store, history="server", history_view=LastMessages(6), frontend_outcome="interrupt")
    )
    interrupted = await served.client.post(run_input(THREAD, [user("go somewhere")], tools=[NAVIGATE]))
    call_id = interrupted.interrupts[0]["toolCallId"]
    store.returned = 0

    reply = await served.client.post(run_input(THREAD, [tool_answer(call_id, "at /x")], tools=[NAVIGATE]))

    assert reply.outcome == {"type": "success"}, reply.types
    assert store.returned >= STORED  # the resume read the thread whole (one read of each message at least)
    after = await stored_ids(store)
    assert after[:STORED] == [m["id"] for m in messages]
    assert len(after) == len(set(after))
    assert [m.role for m in backend.requests[-1].messages][-2:] == ["assistant", "tool"]


async def test_without_a_server_history_the_tail_changes_nothing(serve: Serve, seeded: Any) -> None:
    store, messages = seeded
    served = await serve(
        Adapter(ScriptedBackend([Rule(r"question", reply="ok")]), store=store, history_view=LastMessages(4))
    )

    reply = await served.client.post(run_input(THREAD, [*messages, user("question now")]))

    assert reply.outcome == {"type": "success"}
    assert store.returned == STORED  # a client-kept history compares the whole stored thread, as before


@pytest.mark.parametrize("tail", [0, -1, 2.5, True, "10"])
def test_a_tail_that_is_not_a_positive_whole_number_is_refused_at_once(tail: Any) -> None:
    view = LastMessages(1)
    view.tail = tail
    with pytest.raises(ConfigurationError, match="tail"):
        Adapter(ScriptedBackend(), history="server", history_view=view)
