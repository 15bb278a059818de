"""Each store against a model of journals and listed threads, over any sequence of calls (a hypothesis state machine).

The model is a few dicts: what each thread's head says (its owner, title and open turn, and the
`updated_at` the store reported for its last save, the one thing only the store's clock knows), and each
journal's events and status. Every rule calls the store and the model and compares what they answer:
appends (right, with a gap, a repeat, out of order, after the end), reads from any seq, stop requests,
deletes, every page of a listing, and a purge of everything idle.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    precondition,
    rule,
    run_state_machine_as_test,
)
from pg import every_store

from adapter.stores import KEEP, JournalEvent, RunJournal, ThreadChange, ThreadSummary, TurnStore

T = TypeVar("T")

THREADS = st.sampled_from(["t1", "t2", "t3"])
RUNS = st.sampled_from(["r1", "r2"])
OWNERS = st.sampled_from([None, "alice", "bob"])
TITLES = st.sampled_from([KEEP, None, "", "Trip", "Trip 2"])
TURNS = st.sampled_from([KEEP, None, {"turn_id": "turn1", "pending": [{"interrupt_id": "i1"}]}])


@dataclass
class Thread:
    owner: str | None
    version: int = 0
    title: str | None = None
    open_turn: Any = None
    updated_at: datetime | None = None


@dataclass
class Journal:
    events: list[JournalEvent] = field(default_factory=list)
    ended: bool = False
    stop_requested: bool = False


class JournalMachine(RuleBasedStateMachine):
    """One store, fresh for each example, and the model it must agree with."""

    def __init__(self, factory: Callable[[Path], TurnStore]) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.folder = Path(tempfile.mkdtemp(prefix="agui-journal-machine-"))
        try:
            self.store = self.run(self.made(factory))
        except BaseException:  # a skip (no PostgreSQL here) too: teardown never runs for a machine not made
            self.loop.close()
            shutil.rmtree(self.folder, ignore_errors=True)
            raise
        self.threads: dict[str, Thread] = {}
        self.journals: dict[tuple[str, str], Journal] = {}
        self.appended = 0

    async def made(self, factory: Callable[[Path], TurnStore]) -> TurnStore:
        return factory(self.folder)  # on the loop: a pool is bound to the loop it was made on

    def run(self, call: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(call)

    def teardown(self) -> None:
        try:
            self.run(self.store.close())
        finally:
            self.loop.close()
            shutil.rmtree(self.folder, ignore_errors=True)

    @rule(thread_id=THREADS, owner=OWNERS, title=TITLES, open_turn=TURNS)
    def save(self, thread_id: str, owner: str | None, title: Any, open_turn: Any) -> None:
        thread = self.threads.setdefault(thread_id, Thread(owner))
        change = ThreadChange(owner=owner, title=title, open_turn=open_turn)
        assert self.run(self.store.save(thread_id, change, expected_version=thread.version)) == thread.version + 1
        thread.version += 1
        thread.title = thread.title if title is KEEP else title
        thread.open_turn = thread.open_turn if open_turn is KEEP else open_turn
        loaded = self.run(self.store.load(thread_id, since=None))
        assert loaded is not None
        head = loaded.head
        assert (head.version, head.owner, head.title, head.open_turn) == (
            thread.version,
            thread.owner,
            thread.title,
            thread.open_turn,
        )
        assert head.updated_at is not None
        assert head.updated_at.utcoffset() == timedelta(0)
        thread.updated_at = head.updated_at

    @initialize(count=st.integers(min_value=0, max_value=6))
    def seed(self, count: int) -> None:
        """A journal from the start, so that most examples read, stop and delete one that exists."""
        events = [JournalEvent(seq, f'{{"seq": {seq}}}') for seq in range(1, count + 1)]
        assert self.run(self.store.append_events("t1", "r1", events)) is False
        self.journals[("t1", "r1")] = Journal(events)

    def journal_key(self, data: st.DataObject) -> tuple[str, str]:
        """Mostly a journal that exists, so that journals grow long and reads find them; else any."""
        known = st.sampled_from(sorted(self.journals)) if self.journals else st.nothing()
        return data.draw(st.one_of(known, known, known, st.tuples(THREADS, RUNS)))

    @rule(
        data=st.data(),
        count=st.integers(min_value=0, max_value=5),
        shift=st.sampled_from([0, 0, 0, 0, -2, -1, 1, 2]),  # mostly right: journals grow long enough to read
        swap=st.sampled_from([False, False, False, True]),
        ended=st.sampled_from([False, False, False, True]),
    )
    def append(self, data: st.DataObject, count: int, shift: int, swap: bool, ended: bool) -> None:
        thread_id, run_id = self.journal_key(data)
        journal = self.journals.get((thread_id, run_id))
        last = len(journal.events) if journal is not None else 0
        seqs = [last + 1 + shift + i for i in range(count)]
        if swap and count >= 2:
            seqs[0], seqs[1] = seqs[1], seqs[0]
        self.appended += 1
        batch = [JournalEvent(seq, f'{{"seq": {seq}, "append": {self.appended}}}') for seq in seqs]
        continues = seqs == list(range(last + 1, last + 1 + count))
        if (journal is not None and journal.ended) or not continues:
            with pytest.raises(ValueError):
                self.run(self.store.append_events(thread_id, run_id, batch, ended=ended))
            return
        stop = self.run(self.store.append_events(thread_id, run_id, batch, ended=ended))
        journal = self.journals.setdefault((thread_id, run_id), Journal())
        journal.events.extend(batch)
        journal.ended = ended
        assert stop is journal.stop_requested

    @rule(data=st.data(), limit=st.integers(min_value=0, max_value=4))
    def read(self, data: st.DataObject, limit: int) -> None:
        thread_id, run_id = self.journal_key(data)
        journal = self.journals.get((thread_id, run_id))
        after = data.draw(st.integers(min_value=-1, max_value=(len(journal.events) if journal else 0) + 1))
        expected = None
        if journal is not None:
            start = max(after, 0)
            events = journal.events[start : start + limit]
            expected = RunJournal(events, journal.ended, journal.stop_requested, len(journal.events))
        assert self.run(self.store.read_events(thread_id, run_id, after=after, limit=limit)) == expected

    @rule(data=st.data())
    def stop(self, data: st.DataObject) -> None:
        thread_id, run_id = self.journal_key(data)
        journal = self.journals.get((thread_id, run_id))
        kept = journal is not None and not journal.ended
        if journal is not None and kept:
            journal.stop_requested = True
        assert self.run(self.store.request_stop(thread_id, run_id)) is kept

    @rule(thread_id=THREADS)
    def delete(self, thread_id: str) -> None:
        existed = self.threads.pop(thread_id, None) is not None
        for key in [key for key in self.journals if key[0] == thread_id]:
            del self.journals[key]
        assert self.run(self.store.delete_thread(thread_id)) is existed
        assert self.run(self.store.load(thread_id)) is None

    @rule(owner=OWNERS, limit=st.integers(min_value=1, max_value=4))
    def list_every_page(self, owner: str | None, limit: int) -> None:
        pages: list[list[ThreadSummary]] = []
        before: str | None = None
        while not pages or before is not None:
            page, before = self.run(self.store.list_threads(owner, before=before, limit=limit))
            # only a first page may be empty
            assert len(page) <= limit
            assert page or not pages
            pages.append(page)
            assert len(pages) <= len(self.threads) + 1
        listed = [(s.thread_id, s.title, s.updated_at, s.owner, s.open_turn) for page in pages for s in page]
        mine = [(i, t.title, t.updated_at, t.owner, t.open_turn) for i, t in self.threads.items() if t.owner == owner]
        assert listed == sorted(mine, key=lambda row: (row[2], row[0]), reverse=True)
        assert all(len(page) == limit for page in pages[:-1])

    @precondition(lambda self: bool(self.threads or self.journals))
    @rule()
    def purge_everything_idle(self) -> None:
        """A purge from a day ahead: finished threads and every journal go (idle at all), waiting turns stay."""
        finished = [thread_id for thread_id, thread in self.threads.items() if thread.open_turn is None]
        for thread_id in finished:
            del self.threads[thread_id]
        self.journals.clear()
        ahead = datetime.now(UTC) + timedelta(days=1)
        assert self.run(self.store.purge(timedelta(0), now=ahead)) == len(finished)


@pytest.mark.slow
@pytest.mark.parametrize("factory", every_store())
def test_each_store_agrees_with_the_model_of_journals_and_listed_threads(factory: Callable[[Path], TurnStore]) -> None:
    class OnThisStore(JournalMachine):
        def __init__(self) -> None:
            super().__init__(factory)

    run_state_machine_as_test(OnThisStore)
