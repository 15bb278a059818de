"""Following a run that another replica drives: one feed of its journal per replica, fanned out to its followers.

    the store's journal ──> Feed (one task per followed journal on this replica): its events, held in memory
                                  ├──> StoreTail (a follower, at its own cursor)
                                  └──> StoreTail ...

A follower is a reader of a run this replica does not drive (a reattach that landed on another replica than the
run's). However many follow one run here, the replica reads that run's journal once per look, for all of them:
the feed reads what is new after the last event it holds and keeps it, and each follower takes what is after its
own cursor. A follower that comes with an earlier `after` than the feed holds (a `Last-Event-ID` from further
back) has the missing events read once, and the feed holds them from then on. The feed ends when the run ended
and it holds every event, when the run is taken as over (below), or when no follower is left.

When a feed looks: on a store that notifies appends (`adapter.stores.JournalWatch`: PostgreSQL's `LISTEN`), each
notification wakes it, and it reads once per append, with a look every `NOTIFIED_POLL` for safety; elsewhere
(memory, SQLite, a PostgreSQL store whose notifications are down) every `Feeds.poll_interval`.

A run whose replica died never ends its journal. A feed takes it as over when the crash-takeover rules say so: a
journal that did not grow for the claim lease while it watched, or, once it stood still for `CHECK_INTERVAL`, a
claim that lapsed (a look at the thread's head every `CHECK_INTERVAL` while it stands still, none while it grows:
a growing journal has a live writer). Its followers then get one `RUN_ERROR` `RUN_INTERRUPTED`, sent without an
`id:` (it is not in the journal).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Final

from ag_ui.core import RunErrorEvent

from adapter import _errors as codes
from adapter._sessions._journal import POLL_INTERVAL, Batch
from adapter._thread._record import ThreadRecord
from adapter.stores import JournalEvent, StoreUnavailable, TurnStore
from adapter.stores._protocol import JournalWatch

log = logging.getLogger("adapter.reattach")

PAGE: Final = 1000
"""Events one read of the store's journal takes at most."""
CHECK_INTERVAL: Final = 1.0
"""Seconds between two looks at the thread's claim while a followed journal does not grow."""
NOTIFIED_POLL: Final = 5.0
"""Seconds between two reads of a journal whose appends are notified, besides one per notification (a safety net)."""

INTERRUPTED: Final = JournalEvent(
    0,
    RunErrorEvent(
        message=(
            "The server running this run stopped before it ended. Read the thread; to finish a resume, send the same"
            " answers again."
        ),
        code=codes.RUN_INTERRUPTED,
    ).model_dump_json(by_alias=True),
)
"""What a reader gets for a run whose replica died: not in the journal (seq 0, sent without an `id:`)."""


class Feeds:
    """The journals this replica follows in the store, one `Feed` each, for the runs other replicas drive.

    Args:
        store: The store the journals are in.
        claim_lease: The crash-takeover lease: a journal that stood still this long is over.
        clock: The current time, to tell a lapsed claim.
    """

    def __init__(self, store: TurnStore, *, claim_lease: timedelta, clock: Callable[[], datetime]) -> None:
        self.store = store
        self.claim_lease = claim_lease
        self.clock = clock
        self.poll_interval = POLL_INTERVAL
        """Seconds between two reads of a journal whose appends are not notified."""
        self._feeds: dict[tuple[str, str], Feed] = {}

    def join(self, ids: tuple[str, str, str], incarnation: str | None) -> Feed:
        """The feed of the run's journal (`ids`: thread, run, journal), started by its first follower."""
        key = (ids[0], ids[2])
        feed = self._feeds.get(key)
        if feed is None:
            feed = self._feeds[key] = Feed(self, ids, incarnation)
        feed.followers += 1
        return feed

    def feed(self, thread_id: str, journal: str) -> Feed | None:
        """The feed of a journal while this replica follows it."""
        return self._feeds.get((thread_id, journal))

    def drop(self, feed: Feed) -> None:
        """Forget a feed that ended or lost its last follower: the next follower starts another."""
        key = (feed.thread_id, feed.journal)
        if self._feeds.get(key) is feed:
            del self._feeds[key]

    def __len__(self) -> int:
        return len(self._feeds)

    async def aclose(self) -> None:
        """Stop every feed (the adapter is closing): its followers get what it holds, then `RUN_INTERRUPTED`."""
        feeds, self._feeds = list(self._feeds.values()), {}
        for feed in feeds:
            await feed.stop()


class Feed:
    """One run's journal as this replica reads it: its events after `base`, read once, for every follower.

    `events[i]` is the event of seq `base + 1 + i`.
    """

    def __init__(self, feeds: Feeds, ids: tuple[str, str, str], incarnation: str | None) -> None:
        self.feeds = feeds
        self.thread_id, self.run_id, self.journal = ids
        self.incarnation = incarnation
        self.base: int | None = None
        """The seq the held events follow; None until a follower says where it starts."""
        self.events: list[JournalEvent] = []
        self.ended = False
        """The run ended, and the feed holds its last event."""
        self.interrupted = False
        """The run is taken as over without an end (its replica died, its thread was deleted)."""
        self.followers = 0
        self._waiters: dict[asyncio.Future[None], float] = {}
        """The followers waiting for more, each with when it stops waiting (`grew`'s timeout)."""
        self._alarm: asyncio.TimerHandle | None = None
        """One timer for all the waiters, at the earliest of their deadlines: a timer per wait, made and cancelled
        for each follower at each append, was some 15 % of the event loop's time at 500 followers."""
        self._wake = asyncio.Event()
        self._backfill = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._quiet = False
        self._batch: tuple[tuple[int, int, bool], Batch] | None = None
        """The last batch handed out, and what it holds: the seq it follows, the feed's cursor and end then."""
        loop = asyncio.get_running_loop()
        self._grown_at = self._checked_at = loop.time()

    @property
    def cursor(self) -> int:
        """The last seq the feed holds (its `base` until it holds any)."""
        return (self.base or 0) + len(self.events)

    @property
    def done(self) -> bool:
        """Nothing more will come: the run ended, or it is taken as over."""
        return self.ended or self.interrupted

    def start_at(self, after: int) -> None:
        """The first follower starts after seq `after`: the feed reads from there, and starts following."""
        if self.base is None:
            self.base = after
            self._task = asyncio.ensure_future(self._follow())

    def batch_after(self, after: int) -> Batch | None:
        """The held events after seq `after` (at or past `base`) as one batch, None for none.

        The same object for every follower there, until more come: the SSE responses frame it once
        (`adapter._edge._sse.body`).
        """
        shared = self._batch
        if shared is not None and shared[0] == (after, self.cursor, self.ended):
            return shared[1]
        events = self.events[after - (self.base or 0) :]
        if not events:
            return None
        batch = Batch.of(events, self.ended)
        self._batch = ((after, self.cursor, self.ended), batch)
        return batch

    def wake(self) -> None:
        """Read the journal now: an append was notified, or the notifications went up or down."""
        self._wake.set()

    def leave(self) -> None:
        """A follower is done; the last one ends the feed."""
        self.followers -= 1
        if self.followers <= 0:
            self.feeds.drop(self)
            self._wake.set()

    async def grew(self, timeout: float) -> None:
        """Wait until the feed holds more, is done, or `timeout` seconds passed."""
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        deadline = loop.time() + timeout
        self._waiters[waiter] = deadline  # a dict: with hundreds of followers, a list's removal was quadratic
        alarm = self._alarm
        if alarm is None or deadline < alarm.when():
            if alarm is not None:
                alarm.cancel()
            self._alarm = loop.call_at(deadline, self._ring)
        try:
            await waiter
        finally:
            self._waiters.pop(waiter, None)
            if not self._waiters and self._alarm is not None:  # the last waiter left: the feed is not held for it
                self._alarm.cancel()
                self._alarm = None

    def _ring(self) -> None:
        """Wake the waiters whose deadline passed, and set the alarm for the next deadline."""
        self._alarm = None
        loop = asyncio.get_running_loop()
        now, earliest = loop.time(), None
        for waiter, deadline in list(self._waiters.items()):
            if deadline <= now:
                del self._waiters[waiter]
                _expire(waiter)
            elif earliest is None or deadline < earliest:
                earliest = deadline
        if earliest is not None:
            self._alarm = loop.call_at(earliest, self._ring)

    async def backfill(self, after: int) -> None:
        """Hold the events from seq `after` + 1 on too: read once, for whichever follower asks first.

        Raises:
            StoreUnavailable: The store could not be read; nothing changed.
        """
        async with self._backfill:
            base = self.base or 0
            got: list[JournalEvent] = []
            while after + len(got) < base and not self.done:
                start = after + len(got)
                limit = min(PAGE, base - start)
                journal = await self.feeds.store.read_events(self.thread_id, self.journal, after=start, limit=limit)
                if journal is None:  # the thread was deleted, with its journals
                    self._end(interrupted=True)
                    return
                if not journal.events:
                    break
                got.extend(journal.events)
            if after + len(got) == base:
                self.events[:0] = got
                self.base = after

    async def stop(self) -> None:
        """End the feed now; its followers get what it holds, then `RUN_INTERRUPTED`."""
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._end(interrupted=True)

    def _end(self, *, interrupted: bool) -> None:
        if not self.done:
            self.interrupted = interrupted
            self.ended = not interrupted
        self.feeds.drop(self)
        self._grown()

    def _grown(self) -> None:
        waiters, self._waiters = self._waiters, {}
        if self._alarm is not None:  # no one waits now: the next waiter sets it again
            self._alarm.cancel()
            self._alarm = None
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def _follow(self) -> None:
        """Read what is new whenever the journal may have grown, until the run is over or nobody follows."""
        watch_journal = getattr(self.feeds.store, "watch_journal", None)
        watch: JournalWatch | None = None
        if watch_journal is not None:
            watch = watch_journal(self.thread_id, self.journal, self.wake)
        loop = asyncio.get_running_loop()
        next_read = loop.time()
        try:
            while self.followers > 0 and not self.done:
                if self._wake.is_set() or loop.time() >= next_read:
                    self._wake.clear()  # before the read: a notification during it is read next
                    if await self._read():
                        continue  # a full page: the rest at once
                    if self.done:
                        break
                    notified = watch is not None and watch.live
                    interval = self.feeds.poll_interval
                    next_read = loop.time() + (max(interval, NOTIFIED_POLL) if notified else interval)
                if await self._dead(loop.time()):
                    self._end(interrupted=True)
                    break
                pause = min(next_read - loop.time(), CHECK_INTERVAL)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), max(pause, 0))
        except Exception:
            log.exception("run %s: following its journal failed", self.run_id)
            self._end(interrupted=True)
        finally:
            if watch is not None:
                watch.close()
            self.feeds.drop(self)

    async def _read(self) -> bool:
        """Read what is new once; whether a full page came (more may wait)."""
        try:
            journal = await self.feeds.store.read_events(self.thread_id, self.journal, after=self.cursor, limit=PAGE)
        except StoreUnavailable as down:  # read again at the next look
            if not self._quiet:
                log.warning("run %s: its journal could not be read (%s); reading again", self.run_id, down)
            self._quiet = True
            return False
        self._quiet = False
        if journal is None:  # the thread was deleted, with its journals
            self._end(interrupted=True)
            return False
        if journal.events:
            self.events.extend(journal.events)
            self._grown_at = asyncio.get_running_loop().time()
        if journal.ended and self.cursor >= journal.last_seq:
            self._end(interrupted=False)
        elif journal.events:
            self._grown()
        return len(journal.events) >= PAGE

    async def _dead(self, now: float) -> bool:
        """Whether the crash-takeover rules take the run as over: its journal stood still, or its claim lapsed."""
        lease = self.feeds.claim_lease
        if now - self._grown_at >= lease.total_seconds():
            return True
        if now - max(self._grown_at, self._checked_at) < CHECK_INTERVAL:
            return False
        self._checked_at = now
        try:
            stored = await self.feeds.store.load(self.thread_id, since=None)
        except StoreUnavailable:
            return False
        if stored is None or stored.head.incarnation != self.incarnation:
            return True  # the thread was deleted: its run's life is over
        record = ThreadRecord.from_head(self.thread_id, stored.head)
        at = self.feeds.clock()
        applied, turn = record.applied, record.open_turn
        if applied is not None and applied.run_id == self.run_id and applied.outcome is None:
            return not applied.still_applying(at, lease)
        return turn is not None and turn.claimed_by == self.run_id and turn.claim_lapsed(at, lease)


class StoreTail:
    """A follower of a run's journal in the store: what it holds after `after`, then what is appended (a `Feed`)."""

    ids = True

    def __init__(
        self, feeds: Feeds, ids: tuple[str, str, str], incarnation: str | None, after: int, *, over: bool
    ) -> None:
        self.feeds = feeds
        self.key = ids
        """The thread, the run, and the journal of its attempt that this reads (`_journal.journal_name`)."""
        self.incarnation = incarnation
        self.cursor = max(after, 0)
        self.over = over
        """Nothing is left to send: the run ended, and its last event is at or before `after`."""
        self._feed: Feed | None = None

    async def next(self, timeout: float) -> Batch | None:
        """The journal's events after the last ones sent, or the next within `timeout`; None if none came."""
        if self.over:
            return Batch((), True)
        feed = self._feed
        if feed is None:
            feed = self._feed = self.feeds.join(self.key, self.incarnation)
            feed.start_at(self.cursor)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            if self.cursor < (feed.base or 0):
                try:
                    await feed.backfill(self.cursor)
                except StoreUnavailable as down:
                    log.warning("run %s: its journal could not be read (%s); reading again", feed.run_id, down)
            if self.cursor >= (feed.base or 0):
                batch = feed.batch_after(self.cursor)
                if batch is not None:
                    self.cursor, self.over = feed.cursor, batch.last
                    return batch
            if feed.interrupted:
                self.over = True
                return Batch.of((INTERRUPTED,), True)
            if feed.ended and self.cursor >= feed.cursor:
                self.over = True
                return Batch((), True)
            remaining = deadline - loop.time()
            if remaining <= 0:
                return None
            await feed.grew(min(remaining, self.feeds.poll_interval) if self.cursor < (feed.base or 0) else remaining)

    async def close(self, *, left: bool) -> None:
        """The run goes on without this follower; the last one ends the feed."""
        feed, self._feed = self._feed, None
        if feed is not None:
            feed.leave()


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
