"""`MemoryStore`: the turn store in one process's memory, for tests and a single replica that may forget."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from adapter.stores._listing import check_limit, next_cursor, parse_cursor
from adapter.stores._protocol import (
    ANY_INCARNATION,
    KEEP,
    JournalAppend,
    JournalEvent,
    JSONValue,
    RunJournal,
    StaleClaim,
    StoreConflict,
    StoredMessage,
    StoredThread,
    ThreadChange,
    ThreadHead,
    ThreadSummary,
    check_append,
    check_life,
)
from adapter.stores._retention import cutoffs, turn_expiry


@dataclass(slots=True)
class _Thread:
    version: int = 0
    claim: int = 0
    messages: list[StoredMessage] = field(default_factory=list)
    records: dict[str, str] = field(default_factory=dict)
    """Head records as JSON text, so that no caller can mutate what the store holds."""
    saved_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    expires_at: datetime | None = None
    owner: str | None = None
    incarnation: str | None = None
    title: str | None = None
    stamp: str | None = None


@dataclass(slots=True)
class _Journal:
    events: list[JournalEvent] = field(default_factory=list)
    ended: bool = False
    stop_requested: bool = False
    appended_at: datetime = field(default_factory=lambda: datetime.now(UTC))


class MemoryStore:
    """A process-local store, for tests and single-process use. Nothing survives a restart.

    Messages are kept as the immutable `StoredMessage`s the engine appended: a load hands out the
    same objects, never a copy. No call ever waits (nothing is read or written outside this process,
    and the lock is never held across an `await`), so it needs no deadline, and it is always writable.
    """

    def __init__(self) -> None:
        self._threads: dict[str, _Thread] = {}
        self._journals: dict[tuple[str, str], _Journal] = {}
        self._lock = asyncio.Lock()

    async def load(self, thread_id: str, *, since: int | None = 0, until: int | None = None) -> StoredThread | None:
        """Return the thread's head and its messages from position `since` on (before `until`), or None."""
        thread = self._threads.get(thread_id)
        if thread is None:
            return None
        head = ThreadHead(
            version=thread.version,
            claim=thread.claim,
            message_count=len(thread.messages),
            owner=thread.owner,
            title=thread.title,
            updated_at=thread.saved_at,
            incarnation=thread.incarnation,
            stamp=thread.stamp,
            **{name: json.loads(text) for name, text in thread.records.items()},
        )
        start = len(thread.messages) if since is None else min(max(since, 0), len(thread.messages))
        stop = len(thread.messages) if until is None else max(start, until)
        return StoredThread(head, start, thread.messages[start:stop])

    async def find_message(self, thread_id: str, message_id: str) -> int | None:
        """The position of the thread's first message with this id, or None.

        A scan of the kept objects (no text is decoded): this store is for tests and small threads.
        """
        thread = self._threads.get(thread_id)
        messages = thread.messages if thread is not None else ()
        return next((i for i, message in enumerate(messages) if message.id == message_id), None)

    async def save(
        self,
        thread_id: str,
        change: ThreadChange,
        *,
        expected_version: int,
        fence: int | None = None,
        incarnation: object = ANY_INCARNATION,
    ) -> int:
        """Write `change` if the thread is of `incarnation` and at `expected_version` (with `fence`, at that claim)."""
        async with self._lock:
            current = self._checked(thread_id, change, (expected_version, fence, incarnation))
            return self._write(thread_id, current, change)

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
        """`save` and `append_events` together: both checked before either is written; the version and the stop."""
        async with self._lock:
            current = self._checked(thread_id, change, (expected_version, fence, incarnation))
            self._check_append(thread_id, journal.run_id, journal.events)
            version = self._write(thread_id, current, change)
            return version, self._append(thread_id, journal.run_id, journal.events, journal.ended)

    async def load_or_create(
        self, thread_id: str, change: ThreadChange, journal: JournalAppend | None = None, *, since: int | None = 0
    ) -> StoredThread | None:
        """The thread as `load` reads it; or, when it is absent, created by `change` with `journal` (None then).

        Under the lock: no other save comes between the look and the creation.
        """
        async with self._lock:
            if thread_id in self._threads:
                return await self.load(thread_id, since=since)
            current = self._checked(thread_id, change, (0, None, ANY_INCARNATION))
            if journal is not None:
                self._check_append(thread_id, journal.run_id, journal.events)
            self._write(thread_id, current, change)
            if journal is not None:
                self._append(thread_id, journal.run_id, journal.events, journal.ended)
            return None

    def _checked(self, thread_id: str, change: ThreadChange, expected: tuple[int, int | None, object]) -> _Thread:
        """The thread `change` is written to (a new one when it creates it), once every check of `save` passed."""
        expected_version, fence, incarnation = expected
        found = self._threads.get(thread_id)
        check_life(thread_id, expected_version, incarnation, (found is not None, found.incarnation if found else None))
        current = found or _Thread(owner=change.owner, incarnation=change.incarnation)
        if fence is not None and current.claim != fence:
            raise StaleClaim(thread_id, expected_version, fence)
        if current.version != expected_version:
            raise StoreConflict(thread_id, expected_version)
        change.check(len(current.messages))
        return current

    def _write(self, thread_id: str, current: _Thread, change: ThreadChange) -> int:
        records = {name: _text(value) for name, value in change.records().items()}
        _apply(current, change, records)
        current.saved_at = datetime.now(UTC)
        current.stamp = change.stamp
        if change.title is not KEEP:
            current.title = change.title
        if "open_turn" in records:
            current.expires_at = turn_expiry(change.open_turn)
        self._threads[thread_id] = current
        return current.version

    async def purge(
        self, older_than: timedelta, *, grace: timedelta = timedelta(0), now: datetime | None = None
    ) -> int:
        """Delete finished threads idle longer than `older_than`, and threads whose open turn expired `grace` ago.

        A finished thread has no open turn. Returns how many threads were deleted.
        """
        idle, expired = cutoffs(older_than, grace, now)
        async with self._lock:
            doomed = {
                thread_id
                for thread_id, thread in self._threads.items()
                if (_finished(thread) and thread.saved_at < idle)
                or (thread.expires_at is not None and thread.expires_at < expired)
            }
            for thread_id in doomed:
                del self._threads[thread_id]
            for key in [
                key for key, journal in self._journals.items() if key[0] in doomed or journal.appended_at < idle
            ]:
                del self._journals[key]
        return len(doomed)

    async def append_events(
        self, thread_id: str, run_id: str, events: Sequence[JournalEvent], *, ended: bool = False
    ) -> bool:
        """Append to the run's journal (created by the first append); return whether a stop was requested."""
        self._check_append(thread_id, run_id, events)
        return self._append(thread_id, run_id, events, ended)

    def _check_append(self, thread_id: str, run_id: str, events: Sequence[JournalEvent]) -> None:
        journal = self._journals.get((thread_id, run_id))
        last = journal.events[-1].seq if journal is not None and journal.events else 0
        check_append(thread_id, run_id, events, last_seq=last, ended=journal is not None and journal.ended)

    def _append(self, thread_id: str, run_id: str, events: Sequence[JournalEvent], ended: bool) -> bool:
        journal = self._journals.setdefault((thread_id, run_id), _Journal())
        journal.events.extend(events)
        journal.ended = ended
        journal.appended_at = datetime.now(UTC)
        return journal.stop_requested

    async def read_events(self, thread_id: str, run_id: str, *, after: int = 0, limit: int = 1000) -> RunJournal | None:
        """The run's events with seq > `after`, at most `limit`, or None for no journal."""
        if limit < 0:
            raise ValueError(f"limit must not be negative, not {limit}")
        journal = self._journals.get((thread_id, run_id))
        if journal is None:
            return None
        start = min(max(after, 0), len(journal.events))  # seq n is at index n - 1: no gap
        last = len(journal.events)
        return RunJournal(journal.events[start : start + limit], journal.ended, journal.stop_requested, last)

    async def request_stop(self, thread_id: str, run_id: str) -> bool:
        """Ask the run to stop; False when there is no such journal or it already ended."""
        journal = self._journals.get((thread_id, run_id))
        if journal is None or journal.ended:
            return False
        journal.stop_requested = True
        return True

    async def list_threads(
        self, owner: str | None, *, before: str | None = None, limit: int = 100
    ) -> tuple[list[ThreadSummary], str | None]:
        """The threads of `owner`, newest first (then greatest id first), and the next page's cursor or None.

        A sort of the owner's threads on each call: this store is for tests and small deployments.
        """
        check_limit(limit)
        below = None if before is None else parse_cursor(before)
        keys = sorted(
            ((thread.saved_at, thread_id) for thread_id, thread in self._threads.items() if thread.owner == owner),
            reverse=True,
        )
        page = [key for key in keys if below is None or key < below][: limit + 1]
        summaries = [self._summary(thread_id) for _, thread_id in page[:limit]]
        return summaries, next_cursor(*page[limit - 1]) if len(page) > limit else None

    async def delete_thread(self, thread_id: str, *, incarnation: object = ANY_INCARNATION) -> bool:
        """Delete the thread, its messages, its head records and every journal of its runs (of that life, if named)."""
        found = self._threads.get(thread_id)
        if incarnation is not ANY_INCARNATION and found is not None and found.incarnation != incarnation:
            return False
        for key in [key for key in self._journals if key[0] == thread_id]:
            del self._journals[key]
        return self._threads.pop(thread_id, None) is not None

    async def ping(self, *, write: bool = False) -> None:
        """Always answers, and can always be written: the store is in this process."""

    async def close(self) -> None:
        """Nothing to release."""

    def _summary(self, thread_id: str) -> ThreadSummary:
        thread = self._threads[thread_id]
        open_turn = json.loads(thread.records.get("open_turn", "null"))
        return ThreadSummary(thread_id, thread.title, thread.saved_at, thread.owner, open_turn)


def _apply(thread: _Thread, change: ThreadChange, records: dict[str, str]) -> None:
    """Change `thread` in place; `change.check` has passed, so nothing below can fail half-way."""
    if change.keep is not None:
        del thread.messages[change.keep :]
    for position, message in change.replace.items():
        thread.messages[position] = message
    thread.messages.extend(change.append)
    thread.records.update(records)
    thread.version += 1
    thread.claim += change.claim


def _finished(thread: _Thread) -> bool:
    return thread.records.get("open_turn", "null") == "null"


def _text(value: JSONValue) -> str:
    # ASCII-escaped, like SQLite's copy: a lone surrogate from client JSON survives the round trip.
    return json.dumps(value)
