"""A run's ending goes to the store with its last save, in one call, and to no reader before that save commits.

The run makes its ending's events first; the journal holds them back until the save that stores the turn (finished
or suspended) commits with them (`LiveRun.seal`); a save that fails ends the run with its error, in memory and in
the store's journal alike, and one whose outcome is unknown keeps in the store whichever ending landed.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from ag_ui.core import BaseEvent, RunAgentInput, Tool, UserMessage

from adapter import Adapter
from adapter.backends import Call, Rule, ScriptedBackend
from adapter.stores import ANY_INCARNATION, JournalAppend, MemoryStore, StoredThread, StoreUnavailable, ThreadChange

NAVIGATE = Tool(
    name="navigate",
    description="Open a page.",
    parameters={"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)


class EndingStore(MemoryStore):
    """A memory store whose save that ends a journal waits for `release`, and fails as told (before or after it)."""

    def __init__(self, fail: str | None = None) -> None:
        super().__init__()
        self.fail = fail
        """None, "before" (the store took nothing) or "after" (it took both, and the caller never heard)."""
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def save_and_append(
        self,
        thread_id: str,
        change: ThreadChange,
        journal: JournalAppend,
        *,
        expected_version: int,
        fence: int | None = None,
        incarnation: object = ANY_INCARNATION,
    ) -> tuple[int, bool]:
        if journal.ended:
            self.entered.set()
            await self.release.wait()
            if self.fail == "before":
                raise StoreUnavailable("the store is down")
        saved = await super().save_and_append(
            thread_id, change, journal, expected_version=expected_version, fence=fence, incarnation=incarnation
        )
        if journal.ended and self.fail == "after":
            raise StoreUnavailable("the connection dropped before the commit was heard")
        return saved


def opening() -> RunAgentInput:
    return RunAgentInput(
        thread_id="t", run_id="r", messages=[UserMessage(id="u", content="hi")], tools=[], context=[], state=None
    )


async def stored_types(store: MemoryStore) -> list[str]:
    (name,) = [key[1] for key in store._journals]  # private on purpose: the one journal the run wrote
    journal = await store.read_events("t", name)
    assert journal is not None
    assert journal.ended
    return [json.loads(event.json)["type"] for event in journal.events]


async def test_no_reader_hears_of_the_ending_before_the_store_holds_the_turn() -> None:
    store = EndingStore()
    adapter = Adapter(ScriptedBackend([Rule("hi", reply="Hello.")]), store=store)
    events = await adapter.start(opening())
    reading = asyncio.ensure_future(types_of(events))

    await asyncio.wait_for(store.entered.wait(), 30)
    held = [json.loads(entry)["type"] for entry in events.live.entries]
    stored = await store.load("t")
    store.release.set()
    types = await asyncio.wait_for(reading, 30)

    assert "TEXT_MESSAGE_END" in held
    assert "RUN_FINISHED" not in held
    assert stored is not None
    assert stored.messages == []  # the thread was created with RUN_STARTED; its turn is not stored yet
    assert types[-1] == "RUN_FINISHED"
    assert await stored_types(store) == types
    assert [m.role for m in (await loaded(store)).messages] == ["user", "assistant"]


async def test_no_reader_hears_of_a_waiting_turn_before_the_store_holds_it() -> None:
    store = EndingStore()
    rules = [Rule("go", steps=[[Call("navigate", {"path": "/x"})]], reply="Opened it.")]
    adapter = Adapter(ScriptedBackend(rules), store=store, frontend_outcome="interrupt")
    run_input = opening().model_copy(update={"messages": [UserMessage(id="u", content="go")], "tools": [NAVIGATE]})
    events = await adapter.start(run_input)
    reading = asyncio.ensure_future(types_of(events))

    await asyncio.wait_for(store.entered.wait(), 30)
    held = [json.loads(entry)["type"] for entry in events.live.entries]
    waiting = (await loaded(store)).head.open_turn
    store.release.set()
    types = await asyncio.wait_for(reading, 30)

    assert "TOOL_CALL_END" in held
    assert "MESSAGES_SNAPSHOT" not in held
    assert "RUN_FINISHED" not in held
    assert waiting is None
    assert types[-2:] == ["MESSAGES_SNAPSHOT", "RUN_FINISHED"]
    assert await stored_types(store) == types
    assert (await loaded(store)).head.open_turn is not None


@pytest.mark.parametrize("fail", ["before", "after"])
async def test_a_last_save_the_store_may_not_have_taken_ends_the_run_store_unavailable(fail: str) -> None:
    store = EndingStore(fail)
    store.release.set()
    adapter = Adapter(ScriptedBackend([Rule("hi", reply="Hello.")]), store=store)

    types = await types_of(await adapter.start(opening()))
    await adapter.drain(timedelta(seconds=30))

    assert types[-1] == "RUN_ERROR"
    assert "RUN_FINISHED" not in types
    landed = await stored_types(store)
    if fail == "before":  # nothing of the ending was stored: the journal ends as its readers heard
        assert landed == types
        assert (await loaded(store)).messages == []
    else:  # the ending landed with the turn: the journal keeps it, and the readers were told it may have
        assert landed[-1] == "RUN_FINISHED"
        assert [m.role for m in (await loaded(store)).messages] == ["user", "assistant"]


async def types_of(events: AsyncIterator[BaseEvent]) -> list[str]:
    return [event.type async for event in events]


async def loaded(store: MemoryStore) -> StoredThread:
    stored = await store.load("t")
    assert stored is not None
    return stored
