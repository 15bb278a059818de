"""How many store calls (hops) a run makes: each costs a round trip, and on SQLite 120-210 us of its thread's CPU.

The counts are held here (issue 43): a new short run makes 2 (the load that creates the absent thread with its
journal's RUN_STARTED in one call, the finishing save with the journal's last batch in one call); a frontend
tool's round trip through `POST /` 5 (that run, then the resume's load, the claim that stores the answer with its
journal's RUN_STARTED in one call, the finishing save with the last batch). The journal's writer appends in
batches per interval: the interval is set past the run here, so a run's events land in the one batch its ending
makes, whatever the machine's speed."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest
from ag_ui.core import RunAgentInput, Tool, UserMessage
from agui import interrupts_of
from forwarding_store import ForwardingStore

from adapter import Adapter
from adapter._sessions import _journal as journal_module  # private on purpose: the batching interval, set past the run
from adapter.backends import Call, Rule, ScriptedBackend
from adapter.stores import (
    JournalAppend,
    JournalEvent,
    MemoryStore,
    RunJournal,
    StoredThread,
    ThreadChange,
)

NAVIGATE = Tool(
    name="navigate",
    description="Open a page.",
    parameters={"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)


class CountingStore(ForwardingStore[MemoryStore]):
    """A memory store that counts the calls a run makes on it, by method; the looks for a stop apart."""

    def __init__(self) -> None:
        super().__init__(MemoryStore())
        self.hops: Counter[str] = Counter()
        self.looks = 0
        """`read_events` calls: the journal writer's looks for a stop request while no event flows, not the run's."""
        self.ended = asyncio.Event()

    @property
    def total(self) -> int:
        return sum(self.hops.values())

    def _ending(self, ended: bool) -> None:
        if ended:
            self.ended.set()

    async def load(self, thread_id: str, **since: Any) -> StoredThread | None:
        self.hops["load"] += 1
        return await super().load(thread_id, **since)

    async def find_message(self, thread_id: str, message_id: str) -> int | None:
        self.hops["find_message"] += 1
        return await super().find_message(thread_id, message_id)

    async def save(self, thread_id: str, change: ThreadChange, **expected: Any) -> int:
        self.hops["save"] += 1
        return await super().save(thread_id, change, **expected)

    async def save_and_append(
        self, thread_id: str, change: ThreadChange, journal: JournalAppend, **expected: Any
    ) -> tuple[int, bool]:
        self.hops["save_and_append"] += 1
        saved = await super().save_and_append(thread_id, change, journal, **expected)
        self._ending(journal.ended)
        return saved

    async def load_or_create(
        self, thread_id: str, change: ThreadChange, journal: JournalAppend | None = None, **since: Any
    ) -> StoredThread | None:
        self.hops["load_or_create"] += 1
        return await super().load_or_create(thread_id, change, journal, **since)

    async def append_events(
        self, thread_id: str, run_id: str, events: Sequence[JournalEvent], *, ended: bool = False
    ) -> bool:
        self.hops["append_events"] += 1
        stop = await super().append_events(thread_id, run_id, events, ended=ended)
        self._ending(ended)
        return stop

    async def read_events(self, thread_id: str, run_id: str, **after: Any) -> RunJournal | None:
        self.looks += 1
        return await super().read_events(thread_id, run_id, **after)


@pytest.fixture(autouse=True)
def one_batch_per_ending(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(journal_module, "GATHER", 3600.0)


def opening(text: str, tools: Sequence[Tool] = ()) -> RunAgentInput:
    return RunAgentInput(
        thread_id="t", run_id="r0", messages=[UserMessage(id="u", content=text)], tools=list(tools), context=[]
    )


async def journaled(store: CountingStore) -> None:
    """Wait until the run's journal has ended in the store: its writer's last append is counted then."""
    await asyncio.wait_for(store.ended.wait(), 30)
    store.ended.clear()


async def test_a_new_short_run_makes_two_hops() -> None:
    store = CountingStore()
    adapter = Adapter(ScriptedBackend([Rule("hi", reply="Hello.")]), store=store)

    events = [event async for event in adapter.run(opening("hi"))]
    await journaled(store)

    assert events[-1].type == "RUN_FINISHED"
    assert store.hops == Counter(load_or_create=1, save_and_append=1)


class Unmerged(CountingStore):
    """A store of one's own that has no `load_or_create`: the load and the creating save are two calls."""

    load_or_create = None  # type: ignore[assignment]  # the method absent, as a store without it


async def test_a_store_without_the_merged_load_gets_the_load_and_the_creation_apart() -> None:
    store = Unmerged()
    adapter = Adapter(ScriptedBackend([Rule("hi", reply="Hello.")]), store=store)

    events = [event async for event in adapter.run(opening("hi"))]
    await journaled(store)

    assert events[-1].type == "RUN_FINISHED"
    assert store.hops == Counter(load=1, save_and_append=2)


class HooksLoad(MemoryStore):
    """A store that ships, subclassed to hook `load` alone: the merged call would pass the hook by."""

    loads = 0

    async def load(self, thread_id: str, *, since: int | None = 0, until: int | None = None) -> StoredThread | None:
        self.loads += 1
        return await super().load(thread_id, since=since, until=until)


async def test_a_subclass_that_hooks_load_sees_a_new_runs_load() -> None:
    store = HooksLoad()
    adapter = Adapter(ScriptedBackend([Rule("hi", reply="Hello.")]), store=store)

    events = [event async for event in adapter.run(opening("hi"))]

    assert events[-1].type == "RUN_FINISHED"
    assert store.loads == 1
    stored = await store.load("t")
    assert stored is not None
    assert [m.id for m in stored.messages][0] == "u"


async def test_a_frontend_tool_round_trip_makes_five_hops() -> None:
    store = CountingStore()
    rules = [Rule(r"go to (\w+)", steps=[[Call("navigate", {"path": "/{1}"})]], reply="Opened it.")]
    adapter = Adapter(ScriptedBackend(rules), store=store, frontend_outcome="interrupt")

    events: list[Any] = [event async for event in adapter.run(opening("go to x", [NAVIGATE]))]
    (interrupt,) = interrupts_of(events[-1])
    await journaled(store)
    suspended = store.total
    entry = {"interruptId": interrupt.id, "status": "resolved", "payload": {"navigated": True}}
    answer = {**opening("go to x", [NAVIGATE]).model_dump(by_alias=True), "runId": "r1", "resume": [entry]}
    resumed = [event async for event in adapter.run(RunAgentInput.model_validate(answer))]
    await journaled(store)

    assert resumed[-1].type == "RUN_FINISHED"
    assert (suspended, store.total) == (2, 5), store.hops


class RacedCreation(CountingStore):
    """Another request creates the thread just before this run's load that would create it."""

    async def load_or_create(
        self, thread_id: str, change: ThreadChange, journal: JournalAppend | None = None, **since: Any
    ) -> StoredThread | None:
        if await self.inner.load(thread_id) is None:
            await self.inner.save(thread_id, ThreadChange(title="Theirs"), expected_version=0)
        return await super().load_or_create(thread_id, change, journal, **since)


async def test_a_run_whose_thread_another_request_created_first_opens_its_journal_alone() -> None:
    """The load finds the other's thread and creates nothing, RUN_STARTED with it: the journal opens with an append."""
    store = RacedCreation()
    adapter = Adapter(ScriptedBackend([Rule("hi", reply="Hello.")]), store=store)

    events = [event async for event in adapter.run(opening("hi"))]
    await journaled(store)

    assert events[-1].type == "RUN_FINISHED"
    # The run is decided again on the thread it found (the default policy lets anyone into an unowned one), and its
    # finishing save stores after what it holds, with the journal's last batch.
    assert store.hops == Counter(load_or_create=1, append_events=1, save_and_append=1)
    (name,) = [key[1] for key in store.inner._journals]  # private on purpose: the one journal the run wrote
    journal = await store.inner.read_events("t", name)
    assert journal is not None
    assert journal.ended
    assert '"RUN_STARTED"' in journal.events[0].json
    stored = await store.inner.load("t")
    assert stored is not None
    assert stored.head.title == "Theirs"
    assert [m.id for m in stored.messages][0] == "u"
