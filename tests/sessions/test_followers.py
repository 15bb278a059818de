"""Followers of a run on another replica than the run's: one read of its journal for all of them, each event once.

The run is driven by replica A; its followers reattach on replica B, which reads the journal from the store they
share. B's store is wrapped to count what B asks of it (`Counted`): the store itself is real.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from ag_ui.core import RunAgentInput
from agui import new_id
from forwarding_store import ForwardingStore
from pg import base_dsn, fresh_schema_dsn
from sessions_kit import BOUND, Held, answer, body_of, journal_of, postgres_pair, sqlite_pair

from adapter import Adapter
from adapter._edge._sse import body  # private on purpose: the SSE bytes a batch is framed to, once for its readers
from adapter._sessions._feed import Feeds  # private on purpose: a feed's waiters and their one timer, without a run
from adapter.stores import JournalAppend, JournalEvent, MemoryStore, PostgresStore, RunJournal, ThreadChange, TurnStore
from adapter.stores._postgres_notify import Notifier  # private on purpose: a notifier whose probe never returns

WORDS, HOLD = 12, 6
BEFORE_HOLD = HOLD + 2
"""Events in the journal while the run waits: RUN_STARTED, TEXT_MESSAGE_START and six deltas."""


class Counted(ForwardingStore[TurnStore]):
    """A store that counts the journal reads, the events they return and the appends it is asked for."""

    def __init__(self, store: TurnStore) -> None:
        super().__init__(store)
        self.feed_reads = 0
        """Reads that asked for events (`limit` > 0): a status look (`limit=0`) is a reattach's, once each."""
        self.events_read = 0
        self.fruitful = 0
        """Reads that returned events."""
        self.appends = 0

    async def read_events(self, thread_id: str, run_id: str, *, after: int = 0, limit: int = 1000) -> RunJournal | None:
        journal = await super().read_events(thread_id, run_id, after=after, limit=limit)
        self.feed_reads += limit > 0
        self.events_read += 0 if journal is None else len(journal.events)
        self.fruitful += journal is not None and bool(journal.events)
        return journal

    async def append_events(
        self, thread_id: str, run_id: str, events: Sequence[JournalEvent], *, ended: bool = False
    ) -> bool:
        self.appends += 1
        return await super().append_events(thread_id, run_id, events, ended=ended)

    async def save_and_append(
        self, thread_id: str, change: ThreadChange, journal: JournalAppend, **expected: Any
    ) -> tuple[int, bool]:
        self.appends += 1  # the journal's events, in the same call as a save (a new run's RUN_STARTED)
        return await super().save_and_append(thread_id, change, journal, **expected)


def memory_pair(tmp_path: Path) -> tuple[TurnStore, TurnStore]:
    """Two replicas in one process on one in-memory store."""
    store = MemoryStore()
    return store, store


@pytest.fixture(
    params=[
        pytest.param(memory_pair, id="memory"),
        pytest.param(sqlite_pair, id="sqlite"),
        pytest.param(postgres_pair, id="postgres", marks=pytest.mark.postgres),
    ]
)
async def replicas(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[Adapter, Adapter, Held]]:
    pair: Callable[[Path], tuple[TurnStore, TurnStore]] = request.param
    first, second = pair(tmp_path)
    held = Held()
    a, b = Adapter(held, store=Counted(first)), Adapter(held, store=Counted(second))
    yield a, b, held
    held.release_all()
    await a.aclose()
    await b.aclose()


async def until(condition: Callable[[], Awaitable[bool]], what: str) -> None:
    async with asyncio.timeout(BOUND):
        while not await condition():
            await asyncio.sleep(0.01)


async def held_run(a: Adapter, thread_id: str, run_id: str) -> str:
    """Start a run on A that waits after its sixth word, once its journal holds what came before; its journal."""
    await a.start(RunAgentInput.model_validate(body_of(thread_id, run_id, f"hold {WORDS} {HOLD}")))
    journal = await journal_of(a.store, thread_id, run_id)

    async def written() -> bool:
        status = await a.store.read_events(thread_id, journal, limit=0)
        return status is not None and status.last_seq >= BEFORE_HOLD

    await until(written, "the journal to reach the hold")
    return journal


async def follow(b: Adapter, thread_id: str, run_id: str, after: int) -> list[JournalEvent]:
    events = await b.run_events(thread_id, run_id, after=after)
    assert events is not None
    return [event async for event in events]


def text_of(events: list[JournalEvent]) -> str:
    decoded = [json.loads(event.json) for event in events]
    return "".join(event["delta"] for event in decoded if event["type"] == "TEXT_MESSAGE_CONTENT")


def check_once_in_order(got: list[JournalEvent], after: int) -> None:
    """Every event after `after`, once, in order, up to the run's end; with the text they carry, the whole answer."""
    assert [event.seq for event in got] == list(range(after + 1, after + 1 + len(got)))
    assert '"RUN_FINISHED"' in got[-1].json
    assert all('"RUN_FINISHED"' not in event.json for event in got[:-1])


async def followed_by(b: Adapter, thread_id: str, journal: str, count: int) -> None:
    async def joined() -> bool:
        feed = b.feeds.feed(thread_id, journal)
        return feed is not None and feed.followers == count

    await until(joined, f"{count} followers to join")


@pytest.mark.parametrize("followers", [1, 50])
async def test_followers_on_another_replica_read_each_event_from_the_store_once_however_many(
    replicas: tuple[Adapter, Adapter, Held], followers: int
) -> None:
    """Each reattaches with its own Last-Event-ID; the replica reads each event once for all of them."""
    a, b, held = replicas
    thread_id, run_id = new_id("thread"), new_id("run")
    journal = await held_run(a, thread_id, run_id)
    afters = [HOLD // 2] + [index % (BEFORE_HOLD + 1) for index in range(followers - 1)]

    reading = [asyncio.ensure_future(follow(b, thread_id, run_id, after)) for after in afters]
    await followed_by(b, thread_id, journal, followers)
    held.release(thread_id)
    got = await asyncio.gather(*reading)

    for events, after in zip(got, afters, strict=True):
        check_once_in_order(events, after)
    reads, writes = b.store, a.store
    assert isinstance(reads, Counted)
    assert isinstance(writes, Counted)
    read, fruitful = reads.events_read, reads.fruitful
    whole = await follow(b, thread_id, run_id, 0)
    assert text_of(whole) == answer(WORDS)
    # What B read from the store to serve them all: each event of the journal after the lowest `after`, once, in
    # at most one read per append of A's, and one per place below the first follower's `after` that a later one
    # reads back from (followers join in any order: one from 2 before one from 0 makes two such reads, not one).
    assert read == len(whole) - min(afters)
    assert fruitful <= writes.appends + len({after for after in afters if after < afters[0]})


async def test_readers_at_the_same_place_get_one_batch_framed_once(replicas: tuple[Adapter, Adapter, Held]) -> None:
    """On the run's replica (from memory) and on another (its feed), the SSE bytes are made once, not per reader."""
    a, b, held = replicas
    thread_id, run_id = new_id("thread"), new_id("run")
    await held_run(a, thread_id, run_id)

    for replica in (a, b):
        one, other = [await replica.listen(thread_id, run_id, after=2) for _ in range(2)]
        assert one is not None
        assert other is not None
        got, same = await one.next(BOUND), await other.next(BOUND)
        assert got is not None
        assert same is got
        assert [event.seq for event in got.events] == list(range(3, BEFORE_HOLD + 1))
        assert body(same, ids=True) is body(got, ids=True)
        for reader in (one, other):
            await reader.close(left=True)


@pytest.mark.postgres
@pytest.mark.parametrize("followers", [1, 20])
async def test_with_notifications_followers_get_each_append_with_no_poll_and_one_read_per_append(
    tmp_path: Path, followers: int
) -> None:
    first, second = postgres_pair(tmp_path)
    held, appends, reads = Held(), Counted(first), Counted(second)
    a, b = Adapter(held, store=appends), Adapter(held, store=reads)
    b.feeds.poll_interval = 3600.0  # a follower that polled would wait an hour
    try:
        thread_id, run_id = new_id("thread"), new_id("run")
        journal = await held_run(a, thread_id, run_id)
        reading = [asyncio.ensure_future(follow(b, thread_id, run_id, BEFORE_HOLD)) for _ in range(followers)]
        await followed_by(b, thread_id, journal, followers)
        appended = appends.appends
        held.release(thread_id)
        async with asyncio.timeout(BOUND):
            got = await asyncio.gather(*reading)
    finally:
        held.release_all()
        await a.aclose()
        await b.aclose()

    for events in got:
        check_once_in_order(events, BEFORE_HOLD)
    # One read when the feed started, one when its LISTEN took effect, then one per append at most.
    assert reads.feed_reads <= 2 + (appends.appends - appended)


@pytest.mark.postgres
async def test_a_lost_listen_connection_is_made_again_and_its_followers_miss_nothing(tmp_path: Path) -> None:
    import psycopg

    dsn = fresh_schema_dsn()
    first, second = PostgresStore(dsn), PostgresStore(dsn)
    held = Held()
    a, b = Adapter(held, store=first), Adapter(held, store=second)
    notifier = second._notifier  # private on purpose: the test cuts the store's LISTEN connection
    assert notifier is not None
    try:
        thread_id, run_id = new_id("thread"), new_id("run")
        journal = await held_run(a, thread_id, run_id)
        reading = asyncio.ensure_future(follow(b, thread_id, run_id, BEFORE_HOLD))
        await followed_by(b, thread_id, journal, 1)

        async def listening() -> bool:
            return notifier.backend_pid is not None and bool(notifier.listening)

        await until(listening, "the LISTEN connection")
        cut = notifier.backend_pid
        with psycopg.connect(base_dsn(), autocommit=True) as connection:
            connection.execute("SELECT pg_terminate_backend(%s)", (cut,))

        async def made_again() -> bool:
            return await listening() and notifier.backend_pid != cut

        await until(made_again, "the LISTEN connection to be made again")
        held.release(thread_id)
        async with asyncio.timeout(BOUND):
            got = await reading
    finally:
        held.release_all()
        await a.aclose()
        await b.aclose()

    check_once_in_order(got, BEFORE_HOLD)


@pytest.mark.postgres
async def test_where_notifications_do_not_come_back_followers_poll_and_the_log_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A transaction-mode pooler loses the probe's notification: here a probe that sends none stands for it."""
    dsn = fresh_schema_dsn()
    first, second = PostgresStore(dsn), PostgresStore(dsn, timeout=1.0)

    async def lost(channel: str) -> None:
        return None

    notifier = second._notifier = Notifier(second._listen_connection, lost, 1.0)  # private on purpose: the loss
    held = Held()
    a, b = Adapter(held, store=first), Adapter(held, store=second)
    try:
        thread_id, run_id = new_id("thread"), new_id("run")
        await held_run(a, thread_id, run_id)
        reading = asyncio.ensure_future(follow(b, thread_id, run_id, BEFORE_HOLD))

        async def warned() -> bool:
            return any("journal notifications are unavailable" in r.getMessage() for r in caplog.records)

        await until(warned, "the warning")
        assert not notifier.listening
        held.release(thread_id)
        async with asyncio.timeout(BOUND):
            got = await reading
    finally:
        held.release_all()
        await a.aclose()
        await b.aclose()

    check_once_in_order(got, BEFORE_HOLD)


async def test_a_feed_ends_when_its_last_follower_leaves_and_the_run_goes_on(
    replicas: tuple[Adapter, Adapter, Held],
) -> None:
    a, b, held = replicas
    thread_id, run_id = new_id("thread"), new_id("run")
    journal = await held_run(a, thread_id, run_id)
    leaving = []
    for _ in range(3):
        events = await b.run_events(thread_id, run_id)
        assert isinstance(events, AsyncGenerator)
        assert (await anext(events)).seq == 1
        leaving.append(events)
    await followed_by(b, thread_id, journal, 3)

    for events in leaving:
        await events.aclose()

    assert b.feeds.feed(thread_id, journal) is None
    held.release(thread_id)
    check_once_in_order(await follow(b, thread_id, run_id, 0), 0)


async def test_a_waiting_follower_wakes_at_its_own_timeout_or_when_the_feed_grows_and_no_timer_outlives_it() -> None:
    feeds = Feeds(MemoryStore(), claim_lease=timedelta(minutes=5), clock=lambda: datetime.now(UTC))
    feed = feeds.join(("t", "r", "j"), None)
    woken: list[str] = []

    async def wait(timeout: float, who: str) -> None:
        await feed.grew(timeout)
        woken.append(who)

    await asyncio.wait_for(asyncio.gather(wait(0.2, "later"), wait(0.01, "sooner")), BOUND)
    grown = asyncio.ensure_future(wait(3600.0, "grown"))
    left = asyncio.ensure_future(wait(3600.0, "left"))
    await asyncio.sleep(0)
    left.cancel()
    await asyncio.wait_for(asyncio.wait({left}), BOUND)
    feed._grown()
    await asyncio.wait_for(grown, BOUND)
    alone = asyncio.ensure_future(wait(3600.0, "alone"))
    await asyncio.sleep(0)
    alone.cancel()
    await asyncio.wait_for(asyncio.wait({alone}), BOUND)

    assert woken == ["sooner", "later", "grown"]
    assert feed._alarm is None  # nothing holds the feed for an hour once no one waits on it
