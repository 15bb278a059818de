"""The run owns its conversation: a save takes the messages to store as values, and keeps no list of the run's."""

from __future__ import annotations

from ag_ui.core import Message, UserMessage

# Private on purpose: the handle's saves and the cache around the store are what this checks.
from adapter._thread._cache import ParsedStore, ParsedThreads
from adapter._thread._handle import RecordHandle
from adapter._thread._record import message_text
from adapter.stores import MemoryStore


def texts(messages: list[Message]) -> list[str]:
    return [message_text(m) for m in messages]


async def test_changing_the_runs_list_after_a_save_changes_nothing_stored_or_kept() -> None:
    store, parsed = MemoryStore(), ParsedThreads(head_first=0)
    handle = RecordHandle(ParsedStore(store, parsed), "t")
    await handle.load()
    history: list[Message] = [UserMessage(id="u1", content="hello"), UserMessage(id="u2", content="there")]
    saved = texts(history)
    await handle.finish(history, "run", None)

    history[0] = UserMessage(id="u1", content="changed by the run")
    history.append(UserMessage(id="u3", content="never saved"))
    del history[1]

    stored = await store.load("t")
    assert stored is not None and [m.json for m in stored.messages] == saved
    assert not any(value is history for value in vars(handle).values())
    again = RecordHandle(ParsedStore(store, parsed), "t")
    await again.load()
    assert texts(again.conversation()) == saved


async def test_a_save_appends_only_the_new_messages_the_store_does_not_hold() -> None:
    store = MemoryStore()
    first = RecordHandle(ParsedStore(store), "t")
    await first.load()
    hello = UserMessage(id="u1", content="hello")
    await first.finish([hello], "run", None)
    second = RecordHandle(ParsedStore(store), "t")
    await second.load()

    await second.finish([hello, UserMessage(id="u2", content="again")], "run-2", None)  # one it holds, one new

    stored = await store.load("t")
    assert stored is not None and [m.id for m in stored.messages] == ["u1", "u2"]
