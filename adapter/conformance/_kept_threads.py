"""`KeptThreads`: the reference agent's turn store, bounded: past its threads or bytes, the oldest are forgotten.

The reference agent is left running for anyone to play against, so nothing a client sends may make it
keep more and more: each thread lives in a `MemoryStore` of its own, and a save that takes the store past
`max_threads` threads or `max_bytes` bytes (its messages, head records and journals as they take memory, `held`,
not their JSON text) forgets
the threads saved least recently, first. A forgotten thread is gone as if it was never stored: its next
input starts afresh, and a resume of it is refused (there is no open interrupt left to answer).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Final

from adapter.conformance._held import held
from adapter.stores._listing import check_limit, next_cursor, parse_cursor
from adapter.stores._memory import MemoryStore
from adapter.stores._protocol import (
    ANY_INCARNATION,
    JournalEvent,
    RunJournal,
    StoredThread,
    ThreadChange,
    ThreadSummary,
)

MAX_THREADS: Final = 200
MAX_BYTES: Final = 64 * 1024 * 1024


@dataclass(slots=True)
class _Kept:
    store: MemoryStore = field(default_factory=MemoryStore)
    size: int = 0
    journaled: int = 0
    """Of `size`, the bytes of the thread's run journals."""


class KeptThreads:
    """A `TurnStore` in memory that keeps at most `max_threads` threads and `max_bytes` bytes of them.

    Args:
        max_threads: Threads kept; a new one past it forgets the least recently saved.
        max_bytes: Bytes kept, measured as held in memory (stored messages, head records, journal events); a save
            past it forgets the least recently saved threads, and the saved thread itself when it alone is larger.
    """

    def __init__(self, *, max_threads: int = MAX_THREADS, max_bytes: int = MAX_BYTES) -> None:
        self.max_threads = max_threads
        self.max_bytes = max_bytes
        self._threads: OrderedDict[str, _Kept] = OrderedDict()
        self.size = 0
        """Bytes kept, as measured after each save."""

    def __contains__(self, thread_id: str) -> bool:
        return thread_id in self._threads

    def __len__(self) -> int:
        return len(self._threads)

    async def load(self, thread_id: str, *, since: int | None = 0, until: int | None = None) -> StoredThread | None:
        """The thread as its `MemoryStore` holds it, or None for a thread never saved or forgotten."""
        kept = self._threads.get(thread_id)
        return None if kept is None else await kept.store.load(thread_id, since=since, until=until)

    async def find_message(self, thread_id: str, message_id: str) -> int | None:
        """The position of the thread's first message with this id, or None."""
        kept = self._threads.get(thread_id)
        return None if kept is None else await kept.store.find_message(thread_id, message_id)

    async def save(
        self,
        thread_id: str,
        change: ThreadChange,
        *,
        expected_version: int,
        fence: int | None = None,
        incarnation: object = ANY_INCARNATION,
    ) -> int:
        """Save as `MemoryStore` does, then forget what the bounds no longer hold."""
        kept = self._threads.get(thread_id)
        if kept is None:  # made and kept before any await: two first saves of a thread meet in one store
            kept = self._threads[thread_id] = _Kept()
        version = await kept.store.save(
            thread_id, change, expected_version=expected_version, fence=fence, incarnation=incarnation
        )
        if self._threads.get(thread_id) is kept:
            self._threads.move_to_end(thread_id)
            size = await _measure(kept.store, thread_id) + kept.journaled
            self.size += size - kept.size
            kept.size = size
            self._forget()
        return version

    async def append_events(
        self, thread_id: str, run_id: str, events: Sequence[JournalEvent], *, ended: bool = False
    ) -> bool:
        """Append as `MemoryStore` does, in the thread's own store: its journals are forgotten with it."""
        kept = self._threads.get(thread_id)
        if kept is None:  # a run's first events come before its first save
            kept = self._threads[thread_id] = _Kept()
        stop = await kept.store.append_events(thread_id, run_id, events, ended=ended)
        if self._threads.get(thread_id) is kept:
            added = held(list(events))
            kept.journaled += added
            kept.size += added
            self.size += added
            self._forget()
        return stop

    async def read_events(self, thread_id: str, run_id: str, *, after: int = 0, limit: int = 1000) -> RunJournal | None:
        """The run's events after `after`, or None for no journal (or a forgotten thread)."""
        kept = self._threads.get(thread_id)
        return None if kept is None else await kept.store.read_events(thread_id, run_id, after=after, limit=limit)

    async def request_stop(self, thread_id: str, run_id: str) -> bool:
        """Ask the run to stop, as `MemoryStore` does."""
        kept = self._threads.get(thread_id)
        return False if kept is None else await kept.store.request_stop(thread_id, run_id)

    async def list_threads(
        self, owner: str | None, *, before: str | None = None, limit: int = 100
    ) -> tuple[list[ThreadSummary], str | None]:
        """The kept threads of `owner`, newest first, as `MemoryStore` lists them."""
        check_limit(limit)
        below = None if before is None else parse_cursor(before)
        found = [summary for kept in self._threads.values() for summary in (await kept.store.list_threads(owner))[0]]
        found.sort(key=lambda summary: (summary.updated_at, summary.thread_id), reverse=True)
        page = [summary for summary in found if below is None or (summary.updated_at, summary.thread_id) < below]
        shown = page[:limit]
        more = len(page) > limit
        return shown, next_cursor(shown[-1].updated_at, shown[-1].thread_id) if more else None

    async def delete_thread(self, thread_id: str, *, incarnation: object = ANY_INCARNATION) -> bool:
        """Forget the thread and its journals (of that life, if named); False when it was not kept."""
        kept = self._threads.get(thread_id)
        if kept is None:
            return False
        deleted = await kept.store.delete_thread(thread_id, incarnation=incarnation)
        if not deleted:
            return False
        self._drop(thread_id)
        return deleted

    async def purge(
        self, older_than: timedelta, *, grace: timedelta = timedelta(0), now: datetime | None = None
    ) -> int:
        """Purge each thread as `MemoryStore` does; returns how many were deleted."""
        deleted = 0
        for thread_id, kept in list(self._threads.items()):
            if await kept.store.purge(older_than, grace=grace, now=now):
                deleted += 1
                self._drop(thread_id)
        return deleted

    async def ping(self, *, write: bool = False) -> None:
        """Always answers, and can always be written: the store is in this process."""

    async def close(self) -> None:
        """Nothing to release."""

    def _forget(self) -> None:
        """Forget the least recently saved threads (the one just saved is the most recent) until the bounds hold."""
        while len(self._threads) > self.max_threads or (self.size > self.max_bytes and self._threads):
            self._drop(next(iter(self._threads)))

    def _drop(self, thread_id: str) -> None:
        kept = self._threads.pop(thread_id, None)
        if kept is not None:
            self.size -= kept.size


async def _measure(store: MemoryStore, thread_id: str) -> int:
    """The thread's bytes as held: its stored messages and its head records."""
    stored = await store.load(thread_id)
    if stored is None:
        return 0
    head = stored.head
    return held(list(stored.messages)) + held((head.open_turn, head.applied, head.grants))
