"""Reattaching to a run, and stopping one: who may, and where the run's events come from.

    the run is live on this replica   its events from memory (`adapter._journal.Tail`), then as they come
    it is live elsewhere, or ended    the store's journal (`StoreTail`), read again every `POLL_INTERVAL`

Only a principal who may "read" the thread may reattach, and only one who may "run" on it may stop a run;
to any other, and for an unknown thread or run, the answer is the same (None: a 404). A run is found in the
life the thread has now (`adapter._journal.journal_name`): the runs of a deleted thread, live or stored, are
found by no one, not even by whoever owns a thread created again under its id. A run id used more than once in
one life names its latest attempt.

Why polling rather than PostgreSQL's LISTEN/NOTIFY: a reattach lands on the replica that runs the run most
of the time (sticky sessions, one replica), and is then served from memory with no store call at all. The
other case is rare and short (a reload that landed elsewhere), and polling serves it on every store alike
(SQLite shared by processes has no notifications, nor has an in-memory store), with no connection held per
listener (a LISTEN holds one for its whole life, and transaction-mode poolers such as PgBouncer drop it), and
with a bounded cost: one indexed range read per reattached stream per interval. Events still reach such a
reader within `FLUSH_INTERVAL` + `POLL_INTERVAL` (0.3 s) of being made.

A run whose replica died never ends its journal. A reader elsewhere takes it as over when the crash-takeover
rules say it is: a resume whose claim lapsed (no outcome within the claim lease), or any run whose journal
has not grown for the claim lease while it watched. The reader then gets one `RUN_ERROR` `RUN_INTERRUPTED`,
sent without an `id:` (it is not in the journal): the same answers, sent again, finish the turn.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Final

from ag_ui.core import RunErrorEvent

from adapter import _errors as codes
from adapter._config import EngineConfig
from adapter._errors import Forbidden
from adapter._journal import POLL_INTERVAL, Batch, Listener
from adapter._limits import id_problem
from adapter._record import ThreadRecord
from adapter.stores import JournalEvent, StoreUnavailable, ThreadHead, TurnStore

log = logging.getLogger("adapter.reattach")

PAGE: Final = 1000
"""Events one read of the store's journal takes at most."""
CHECK_INTERVAL: Final = 1.0
"""Seconds between two looks at the thread's claim while a watched journal does not grow."""

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


async def open_events(
    config: EngineConfig, thread_id: str, run_id: str, principal: str | None, after: int
) -> Listener | None:
    """A listener for the run's events after seq `after`; None for an unknown thread or run, or a refused caller.

    Raises:
        StoreUnavailable: The store could not be read.
    """
    head = await _readable(config, thread_id, run_id, principal)
    name = None if head is None else await config.journals.latest(thread_id, run_id, head.incarnation)
    if head is None or name is None:
        return None
    live = config.journals.live(thread_id, name)
    if live is not None:
        return live.listen(after)
    store = config.journals.store
    journal = await store.read_events(thread_id, name, after=after, limit=0) if store is not None else None
    if store is None or journal is None:
        return None
    over = journal.ended and after >= journal.last_seq
    return StoreTail(config, store, (thread_id, run_id, name), head.incarnation, after, over=over)


async def journal_events(listener: Listener) -> AsyncIterator[JournalEvent]:
    """The events a listener gets, one by one, until the run's end (`Adapter.run_events`)."""
    try:
        while True:
            batch = await listener.next(3600.0)
            if batch is None:
                continue
            for event in batch.events:
                yield event
            if batch.last:
                break
    finally:
        await listener.close(left=False)


async def stop_run(config: EngineConfig, thread_id: str, run_id: str, principal: str | None) -> bool | None:
    """Ask the run to stop, wherever it runs: True once asked, False when it had ended, None as `open_events`.

    A run that reaches its end before it comes to a safe point ends as it would have (its answer was complete).

    Raises:
        Forbidden: `THREAD_FORBIDDEN` for a caller who may read the thread but not "run" on it.
        StoreUnavailable: The store could not be used.
    """
    head = await _readable(config, thread_id, run_id, principal, action="run")
    name = None if head is None else await config.journals.latest(thread_id, run_id, head.incarnation)
    if name is None:
        return None
    live = config.journals.live(thread_id, name)
    if live is not None:  # this replica runs it: at once, not at the writer's next look
        if live.complete:
            return False
        live.stop.request()
        return True
    store = config.journals.store
    if store is not None and await store.request_stop(thread_id, name):
        return True
    journal = await store.read_events(thread_id, name, limit=0) if store is not None else None
    return None if journal is None else False


async def _readable(
    config: EngineConfig, thread_id: str, run_id: str, principal: str | None, action: str = "read"
) -> ThreadHead | None:
    """The thread's head if it exists and `principal` may read it, else None.

    With `action="run"`, `Forbidden` for a caller who may read the thread but not run on it.
    """
    if id_problem(thread_id) is not None or id_problem(run_id) is not None:
        return None  # ids no store can keep name no run; the store is not asked
    stored = await config.store.load(thread_id, since=None)
    if stored is None or not await config.access.allows(principal, stored.head.owner, "read"):
        return None
    if action == "run" and not await config.access.allows(principal, stored.head.owner, "run"):
        raise Forbidden("this caller may not stop runs of this thread", code=codes.THREAD_FORBIDDEN)
    return stored.head


class StoreTail:
    """A listener on a run's journal in the store: what it holds after `after`, then what is appended, polled."""

    ids = True

    def __init__(
        self,
        config: EngineConfig,
        store: TurnStore,
        ids: tuple[str, str, str],
        incarnation: str | None,
        after: int,
        *,
        over: bool,
    ) -> None:
        self.config = config
        self.store = store
        self.thread_id, self.run_id, self.journal = ids
        """The thread, the run, and the journal of its attempt that this reads (`adapter._journal.journal_name`)."""
        self.incarnation = incarnation
        self.cursor = max(after, 0)
        self.over = over
        """Nothing is left to send: the run ended, and its last event is at or before `after`."""
        loop = asyncio.get_running_loop()
        self._grown_at = loop.time()
        self._checked_at = loop.time()

    async def next(self, timeout: float) -> Batch | None:
        """The journal's events after the last ones sent, or the next within `timeout` (polled); None if none came."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            if self.over:
                return Batch((), True)
            try:
                journal = await self.store.read_events(self.thread_id, self.journal, after=self.cursor, limit=PAGE)
            except StoreUnavailable as down:  # read again at the next interval
                log.warning("run %s: its journal could not be read (%s); reading again", self.run_id, down)
            else:
                if journal is None:  # the thread was deleted, with its journals
                    self.over = True
                    return Batch((INTERRUPTED,), True)
                if journal.events:
                    self.cursor = journal.events[-1].seq
                    self._grown_at = loop.time()
                    self.over = journal.ended and self.cursor >= journal.last_seq
                    return Batch(journal.events, self.over)
                if journal.ended:
                    self.over = True
                    return Batch((), True)
            if await self._dead(loop.time()):
                self.over = True
                return Batch((INTERRUPTED,), True)
            remaining = deadline - loop.time()
            if remaining <= 0:
                return None
            await asyncio.sleep(min(POLL_INTERVAL, remaining))

    async def close(self, *, left: bool) -> None:
        """Nothing to release: the run goes on without this reader."""

    async def _dead(self, now: float) -> bool:
        """Whether the crash-takeover rules take the run as over: its claim lapsed, or its journal stood still."""
        lease = self.config.claim_lease.total_seconds()
        if now - self._grown_at >= lease:
            return True
        if now - self._checked_at < CHECK_INTERVAL:
            return False
        self._checked_at = now
        try:
            stored = await self.store.load(self.thread_id, since=None)
        except StoreUnavailable:
            return False
        if stored is None or stored.head.incarnation != self.incarnation:
            return True  # the thread was deleted: its run's life is over
        record = ThreadRecord.from_head(self.thread_id, stored.head)
        at, lease_td = self.config.now(), self.config.claim_lease
        applied, turn = record.applied, record.open_turn
        if applied is not None and applied.run_id == self.run_id and applied.outcome is None:
            return not applied.still_applying(at, lease_td)
        return turn is not None and turn.claimed_by == self.run_id and turn.claim_lapsed(at, lease_td)
