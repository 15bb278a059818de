"""`SQLiteStore`: a turn store in one SQLite file; `_sqlite_open` opens the file."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any, Final, Literal, TypeVar

from adapter.stores._deadline import DEFAULT_TIMEOUT
from adapter.stores._listing import check_limit, from_micros, next_cursor, parse_cursor, to_micros
from adapter.stores._protocol import (
    ANY_INCARNATION,
    CREATE_ATTEMPTS,
    KEEP,
    JournalAppend,
    JournalBatch,
    JournalEvent,
    JSONValue,
    RunJournal,
    StaleClaim,
    StoreConflict,
    StoredMessage,
    StoredThread,
    StoreUnavailable,
    ThreadChange,
    ThreadHead,
    ThreadSummary,
    check_append,
    check_life,
    pack_events,
    unpack_rows,
)
from adapter.stores._retention import cutoffs, turn_expiry
from adapter.stores._sqlite_open import open_file
from adapter.stores._worker import Worker

_T = TypeVar("_T")
_LAST: Final = 2**63 - 1  # SQLite's largest integer: a bound past it is clipped, not an OverflowError

# SQLite's primary result codes for a file that cannot be used now, as opposed to a bad statement (a bug): each
# becomes `StoreUnavailable`, with what it says about the file.
_UNUSABLE: Final = {
    sqlite3.SQLITE_BUSY: "is locked by another writer",
    sqlite3.SQLITE_LOCKED: "is locked by another writer",
    sqlite3.SQLITE_PROTOCOL: "could not take its file's lock",
    sqlite3.SQLITE_READONLY: "cannot be written: its file is read-only",
    sqlite3.SQLITE_PERM: "cannot be written: permission denied",
    sqlite3.SQLITE_AUTH: "cannot be written: not authorized",
    sqlite3.SQLITE_FULL: "cannot be written: the disk is full",
    sqlite3.SQLITE_NOLFS: "cannot be written: its file is too large for this system",
    sqlite3.SQLITE_IOERR: "could not read or write its file (an I/O error)",
    sqlite3.SQLITE_CANTOPEN: "could not open its file",
    sqlite3.SQLITE_CORRUPT: "cannot be used: its file is damaged",
    sqlite3.SQLITE_NOTADB: "cannot be used: its file is not a database",
    sqlite3.SQLITE_NOMEM: "ran out of memory",
}


# The rows that hold the seqs `after + 1 .. through` (`through` is `after + limit`): from the one holding `after + 1`
# to the one holding `through` (or the last), two bounds of one range of the key; no row when `limit` is 0. The rows
# are disjoint and consecutive, so the key's order (their last seq) is their first seq's.
_READ_ROWS: Final = """
    SELECT first_seq, body FROM agui_journal_events
    WHERE thread_id = :thread AND run_id = :run AND :limit > 0 AND last_seq > :after AND last_seq <= coalesce(
        (SELECT last_seq FROM agui_journal_events
         WHERE thread_id = :thread AND run_id = :run AND last_seq >= :through ORDER BY last_seq LIMIT 1),
        :through)
    ORDER BY last_seq
"""


class SQLiteStore:
    """A turn store in one SQLite file, shared safely by several processes or replicas on one host.

    Behaviour:

    - Every call runs on one worker thread of its own that owns the connection (`_worker`), so the event loop
      never blocks on disk or on a lock. Calls from one store instance are serialised in order.
    - The file is opened, switched to WAL journal mode and given its tables on first use: a thread's
      head in `agui_threads`, its messages one row each in `agui_messages`, the runs' journals in
      `agui_journals` (one row per run: its status) and `agui_journal_events` (one row per append: its
      events' seqs from `first_seq` to `last_seq`, their JSON one line each). A file from before this
      layout (one JSON document per thread, `agui_turns`) is migrated then, once, in one transaction.
    - `save` is a compare-and-set inside `BEGIN IMMEDIATE`: the write lock is taken before the
      version and claim number are checked, so two instances (or processes) racing on one thread
      serialise, and the loser gets `StoreConflict` (or `StaleClaim`) with nothing changed. A writer
      that can't get the lock within the busy timeout (`timeout`) fails with `StoreUnavailable`,
      which is not a conflict. A save writes the rows it changes: appended messages, replaced ones,
      the head; never the rest of the thread.
    - Head records are serialised before the call returns to the loop, so callers may mutate their
      values afterwards; `load` returns fresh copies each time.
    - Every write (a save, an append, a stop request, a delete, a purge) is one transaction; an append
      checks the journal's last seq under the write lock, so two appenders racing on one journal cannot
      both write one seq. `save_and_append` is a save and an append in one transaction.
    - `":memory:"` works but is private to this instance. After `close`, every call raises
      `RuntimeError`; `close` itself may be called again.
    - Every call ends within `timeout` (waiting behind earlier calls, for the file's lock, or for a
      disk that hangs included) or raises `StoreUnavailable`; the busy timeout is the same. A file that
      cannot be used (locked, read-only, full, unreadable, damaged) raises `StoreUnavailable` naming
      why, never a driver error. The connection that failed is closed, and one opened while the file
      was read-only (which SQLite does silently, for good) serves one call: the next call opens the
      file again, so the store works again as soon as the file does, without a restart.

    - `synchronous="NORMAL"` (the default) makes a commit durable against a crash or restart of the
      program, which is what a suspended turn needs; in WAL mode only a power loss or an OS crash can
      lose the last commits. Pass `"FULL"` to wait for the disk on every commit (several ms each).

    Args:
        path: The database file. Created if missing; its directory must exist.
        synchronous: SQLite's `synchronous` setting: "NORMAL" or "FULL".
        timeout: Seconds one call may take in all before it raises `StoreUnavailable` (`STORE_UNAVAILABLE`).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        synchronous: Literal["NORMAL", "FULL"] = "NORMAL",
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        if synchronous not in ("NORMAL", "FULL"):
            raise ValueError(f"synchronous must be 'NORMAL' or 'FULL', not {synchronous!r}")
        # One thread owns the connection: sqlite3 connections are bound to their creating thread.
        self._worker = Worker(timeout, "the SQLite store", "agui-sqlite")
        self._synchronous = synchronous
        self._path = os.fspath(path)
        self._connection: sqlite3.Connection | None = None
        self._opened_read_only = False
        self._closed = False

    async def load(self, thread_id: str, *, since: int | None = 0, until: int | None = None) -> StoredThread | None:
        """Return the thread's head and its messages from position `since` on (before `until`), or None."""
        return await self._call("a load", self._load, thread_id, since, until)

    async def find_message(self, thread_id: str, message_id: str) -> int | None:
        """The position of the thread's first message with this id, or None: one lookup in an index."""
        return await self._call("a lookup", self._find_message, thread_id, message_id)

    async def save(
        self,
        thread_id: str,
        change: ThreadChange,
        *,
        expected_version: int,
        fence: int | None = None,
        incarnation: object = ANY_INCARNATION,
    ) -> int:
        """Write `change` if the thread is of `incarnation`, at `expected_version` (0: absent) and, with `fence`, claim.

        Returns:
            The new version, `expected_version + 1`.

        Raises:
            ThreadGone: The thread is absent or of another incarnation than the one named; nothing was written.
            StaleClaim: `fence` is not the thread's claim number; nothing was written.
            StoreConflict: The stored version differs from `expected_version`; nothing was written.
        """
        records = _records(change)
        return await self._call(
            "a save", self._save, thread_id, change, records, (expected_version, fence, incarnation)
        )

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
        """`save` and `append_events` in one transaction: both written, or neither; the version and the stop.

        Raises:
            ThreadGone, StaleClaim, StoreConflict, ValueError: As `save` and `append_events`; nothing was written.
        """
        records = _records(change)
        expected = (expected_version, fence, incarnation)
        appended = (journal.run_id, _held(journal.events), journal.ended)
        return await self._call("a save", self._save_and_append, thread_id, change, records, expected, appended)

    async def load_or_create(
        self, thread_id: str, change: ThreadChange, journal: JournalAppend | None = None, *, since: int | None = 0
    ) -> StoredThread | None:
        """The thread as `load` reads it; or, when it is absent, created by `change` with `journal` (None then).

        One call to the worker: the load's read transaction, and only for an absent thread the save's (and
        append's) `BEGIN IMMEDIATE`; a thread another writer created in between is read then.

        Raises:
            StoreConflict: The thread was created and deleted again meanwhile, each time it was looked at.
            ValueError: `journal` does not open its journal; nothing was written.
        """
        records = _records(change)
        appended = None if journal is None else (journal.run_id, _held(journal.events), journal.ended)
        return await self._call("a load", self._load_or_create, thread_id, change, records, appended, since)

    async def purge(
        self, older_than: timedelta, *, grace: timedelta = timedelta(0), now: datetime | None = None
    ) -> int:
        """Delete finished threads idle longer than `older_than`, and threads whose open turn expired `grace` ago.

        A finished thread has no open turn. One transaction; returns how many
        threads were deleted.
        """
        idle, expired = cutoffs(older_than, grace, now)
        return await self._call("a purge", self._purge, idle.timestamp(), expired.timestamp())

    async def append_events(
        self, thread_id: str, run_id: str, events: Sequence[JournalEvent], *, ended: bool = False
    ) -> bool:
        """Append to the run's journal (created by the first append); return whether a stop was requested.

        One transaction: the journal's last seq is read under the write lock, the events (one row) and the status
        written, or nothing (`ValueError` for seqs that do not continue it, an ended journal, or a newline in an
        event's JSON).
        """
        return await self._call("an append", self._append, thread_id, run_id, _held(events), ended)

    async def read_events(self, thread_id: str, run_id: str, *, after: int = 0, limit: int = 1000) -> RunJournal | None:
        """The run's events with seq > `after`, at most `limit`, or None for no journal.

        A range of the rows' key: the rows that hold those events, and no other.
        """
        if limit < 0:
            raise ValueError(f"limit must not be negative, not {limit}")
        after, limit = min(max(after, 0), _LAST), min(limit, _LAST)
        return await self._call("a journal read", self._read_events, thread_id, run_id, after, limit)

    async def request_stop(self, thread_id: str, run_id: str) -> bool:
        """Ask the run to stop; False when there is no such journal or it already ended. One statement."""
        return await self._call("a stop request", self._request_stop, thread_id, run_id)

    async def list_threads(
        self, owner: str | None, *, before: str | None = None, limit: int = 100
    ) -> tuple[list[ThreadSummary], str | None]:
        """The threads of `owner`, newest first (then greatest id first), and the next page's cursor or None.

        One query on the index `(owner, updated_at DESC, thread_id DESC)`: a page reads its own rows only.
        """
        check_limit(limit)
        below = None if before is None else parse_cursor(before)
        key = None if below is None else (to_micros(below[0]), below[1])
        rows = await self._call("a listing", self._list_threads, owner, key, min(limit, _LAST - 1) + 1)
        summaries = [
            ThreadSummary(thread_id, title, from_micros(micros), row_owner, json.loads(open_turn))
            for thread_id, title, micros, row_owner, open_turn in rows[:limit]
        ]
        last = summaries[-1] if len(rows) > limit else None
        return summaries, None if last is None else next_cursor(last.updated_at, last.thread_id)

    async def delete_thread(self, thread_id: str, *, incarnation: object = ANY_INCARNATION) -> bool:
        """Delete the thread, its messages, its head records and every journal of its runs, in one transaction.

        With `incarnation`, only that life of the thread: another is left whole (False).
        """
        return await self._call("a delete", self._delete_thread, thread_id, incarnation)

    async def ping(self, *, write: bool = False) -> None:
        """Raise unless the file opens and answers a trivial query; with `write`, unless it can be written too.

        The write check takes the write lock and changes nothing (a statement that updates no row).
        """
        await self._call("a ping", self._ping, write)

    async def close(self) -> None:
        """Close the connection and stop the worker thread."""
        if self._closed:
            return
        self._closed = True
        await self._worker.stop(self._disconnect)

    async def _call(self, what: str, function: Callable[..., _T], *args: Any) -> _T:
        if self._closed:
            raise RuntimeError("SQLiteStore is closed")
        return await self._worker.call(what, self._guarded, function, *args)

    # Everything below runs on the worker thread.

    def _guarded(self, function: Callable[..., _T], *args: Any) -> _T:
        """`function(*args)`; a file that cannot be used is `StoreUnavailable`, and its connection is dropped."""
        try:
            return function(*args)
        except sqlite3.Error as error:
            code = getattr(error, "sqlite_errorcode", None)
            reason = _UNUSABLE.get(code & 0xFF) if isinstance(code, int) else None
            if reason is None:
                raise  # a bad statement: a bug, not an outage
            self._disconnect()  # never used again: a connection opened read-only stays so after the file is fixed
            raise StoreUnavailable(f"the SQLite store {reason} ({error.sqlite_errorname})") from error
        finally:
            if self._opened_read_only:
                self._disconnect()  # serves this call only: the next one opens the file again, writable or not

    def _connect(self) -> sqlite3.Connection:
        if self._connection is None:
            self._connection = open_file(self._path, self._synchronous, self._worker.seconds)
            # SQLite opens a file it may not write read-only, silently, and the connection stays so.
            self._opened_read_only = self._path not in ("", ":memory:") and not os.access(self._path, os.W_OK)
        return self._connection

    def _purge(self, idle: float, expired: float) -> int:
        connection = self._connect()
        doomed = (
            "SELECT thread_id FROM agui_threads WHERE (open_turn = 'null' AND saved_at < ?) "
            "OR (expires_at IS NOT NULL AND expires_at < ?)"
        )
        # The journals of the doomed threads, and every journal idle past the cutoff, whatever its thread: a scan of
        # the journals (one row per run), like the threads'. An index on `appended_at` would cost every append a page.
        journals = f"SELECT thread_id, run_id FROM agui_journals WHERE appended_at < ? OR thread_id IN ({doomed})"
        connection.execute("BEGIN IMMEDIATE")
        try:
            marks = (idle, idle, expired)
            connection.execute(f"DELETE FROM agui_journal_events WHERE (thread_id, run_id) IN ({journals})", marks)
            connection.execute(f"DELETE FROM agui_journals WHERE (thread_id, run_id) IN ({journals})", marks)
            connection.execute(f"DELETE FROM agui_messages WHERE thread_id IN ({doomed})", (idle, expired))
            count = connection.execute(f"DELETE FROM agui_threads WHERE thread_id IN ({doomed})", (idle, expired))
            connection.execute("COMMIT")
        except BaseException:
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            raise
        return count.rowcount

    def _append(self, thread_id: str, run_id: str, events: Sequence[JournalEvent], ended: bool) -> bool:
        connection = self._connect()
        # IMMEDIATE: the last seq is read under the write lock, so no other appender can slip in between.
        connection.execute("BEGIN IMMEDIATE")
        try:
            stop = _append_in(connection, thread_id, run_id, events, ended)
            connection.execute("COMMIT")
        except BaseException:
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            raise
        return stop

    def _read_events(self, thread_id: str, run_id: str, after: int, limit: int) -> RunJournal | None:
        connection = self._connect()
        # One read transaction, so the status and the events are of the same moment.
        connection.execute("BEGIN")
        try:
            status = connection.execute(
                "SELECT last_seq, ended, stop_requested FROM agui_journals WHERE thread_id = ? AND run_id = ?",
                (thread_id, run_id),
            ).fetchone()
            if status is None:
                return None
            through = min(after + limit, _LAST)
            keys = {"thread": thread_id, "run": run_id, "after": after, "through": through, "limit": limit}
            rows = connection.execute(_READ_ROWS, keys).fetchall()
        finally:
            connection.execute("COMMIT")
        last, ended, stop = status
        return RunJournal(unpack_rows(rows, after=after, limit=limit), bool(ended), bool(stop), last)

    def _request_stop(self, thread_id: str, run_id: str) -> bool:
        updated = self._connect().execute(
            "UPDATE agui_journals SET stop_requested = 1 WHERE thread_id = ? AND run_id = ? AND ended = 0",
            (thread_id, run_id),
        )
        return updated.rowcount == 1

    def _list_threads(self, owner: str | None, key: tuple[int, str] | None, count: int) -> list[Any]:
        columns = "SELECT thread_id, title, updated_at, owner, open_turn FROM agui_threads"
        order = "ORDER BY updated_at DESC, thread_id DESC LIMIT ?"
        connection = self._connect()
        if key is None:
            return connection.execute(f"{columns} WHERE owner IS ? {order}", (owner, count)).fetchall()
        query = f"{columns} WHERE owner IS ? AND (updated_at, thread_id) < (?, ?) {order}"
        return connection.execute(query, (owner, *key, count)).fetchall()

    def _delete_thread(self, thread_id: str, incarnation: object) -> bool:
        connection = self._connect()
        connection.execute("BEGIN IMMEDIATE")
        try:
            if incarnation is not ANY_INCARNATION:
                row = connection.execute("SELECT incarnation FROM agui_threads WHERE thread_id = ?", (thread_id,))
                found = row.fetchone()
                if found is not None and found[0] != incarnation:
                    connection.execute("COMMIT")
                    return False
            for table in ("agui_journal_events", "agui_journals", "agui_messages"):  # fixed names, never input
                connection.execute(f"DELETE FROM {table} WHERE thread_id = ?", (thread_id,))
            deleted = connection.execute("DELETE FROM agui_threads WHERE thread_id = ?", (thread_id,))
            connection.execute("COMMIT")
        except BaseException:
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            raise
        return deleted.rowcount == 1

    def _ping(self, write: bool) -> None:
        connection = self._connect()
        connection.execute("SELECT 1").fetchone()
        if not write:
            return
        connection.execute("BEGIN IMMEDIATE")
        try:
            connection.execute("UPDATE agui_threads SET version = version WHERE 0")  # refused by a read-only file
        finally:
            if connection.in_transaction:
                connection.execute("ROLLBACK")

    def _disconnect(self) -> None:
        connection, self._connection, self._opened_read_only = self._connection, None, False
        if connection is not None:
            try:
                connection.close()
            except sqlite3.Error:  # pragma: no cover - closing a connection whose file failed
                pass

    def _find_message(self, thread_id: str, message_id: str) -> int | None:
        row = (
            self._connect()
            .execute(
                "SELECT min(position) FROM agui_messages WHERE thread_id = ? AND message_id = ?",
                (thread_id, message_id),
            )
            .fetchone()
        )
        return None if row is None or row[0] is None else int(row[0])

    def _load(self, thread_id: str, since: int | None, until: int | None) -> StoredThread | None:
        connection = self._connect()
        # One read transaction, so the head and the messages are of the same version.
        connection.execute("BEGIN")
        try:
            row = connection.execute(
                "SELECT version, claim, message_count, open_turn, applied, owner, title, updated_at, "
                "incarnation, stamp, grants FROM agui_threads WHERE thread_id = ?",
                (thread_id,),
            ).fetchone()
            if row is None:
                return None
            open_turn, applied = (json.loads(text) for text in row[3:5])
            head = ThreadHead(
                row[0],
                row[1],
                row[2],
                open_turn,
                applied,
                row[5],
                title=row[6],
                updated_at=from_micros(row[7]),
                incarnation=row[8],
                stamp=row[9],
                grants=json.loads(row[10]),
            )
            start = head.message_count if since is None else min(max(since, 0), head.message_count)
            stop = head.message_count if until is None else until
            rows = connection.execute(
                "SELECT message_id, role, body FROM agui_messages "
                "WHERE thread_id = ? AND position >= ? AND position < ? ORDER BY position",
                (thread_id, start, stop),
            ).fetchall()
        finally:
            connection.execute("COMMIT")
        return StoredThread(head, start, [StoredMessage(*row) for row in rows])

    def _save(
        self,
        thread_id: str,
        change: ThreadChange,
        records: dict[str, object],
        expected: tuple[int, int | None, object],
    ) -> int:
        connection = self._connect()
        # IMMEDIATE takes the write lock before the read, so no other writer can slip in between.
        connection.execute("BEGIN IMMEDIATE")
        try:
            version = _save_in(connection, thread_id, change, records, expected)
            connection.execute("COMMIT")
        except BaseException:
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            raise
        return version

    def _save_and_append(
        self,
        thread_id: str,
        change: ThreadChange,
        records: dict[str, object],
        expected: tuple[int, int | None, object],
        appended: tuple[str, Sequence[JournalEvent], bool],
    ) -> tuple[int, bool]:
        connection = self._connect()
        connection.execute("BEGIN IMMEDIATE")
        try:
            version = _save_in(connection, thread_id, change, records, expected)
            stop = _append_in(connection, thread_id, *appended)
            connection.execute("COMMIT")
        except BaseException:
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            raise
        return version, stop

    def _load_or_create(
        self,
        thread_id: str,
        change: ThreadChange,
        records: dict[str, object],
        appended: tuple[str, Sequence[JournalEvent], bool] | None,
        since: int | None,
    ) -> StoredThread | None:
        creation = (0, None, ANY_INCARNATION)
        for _ in range(CREATE_ATTEMPTS):
            found = self._load(thread_id, since, None)
            if found is not None:
                return found
            try:
                if appended is None:
                    self._save(thread_id, change, records, creation)
                else:
                    self._save_and_append(thread_id, change, records, creation, appended)
            except StoreConflict:
                continue  # another writer created it since the read: read it
            return None
        raise StoreConflict(thread_id, 0)


def _held(events: Sequence[JournalEvent]) -> Sequence[JournalEvent]:
    """`events` as the worker thread reads them: a copy, unless a `JournalBatch` (which never changes).

    The caller's sequence may change once the call returns to the loop.
    """
    return events if type(events) is JournalBatch else tuple(events)


def _records(change: ThreadChange) -> dict[str, object]:
    """The head columns a save of `change` sets: serialised before the call returns to the loop, callers may mutate."""
    records: dict[str, object] = {name: _text(value) for name, value in change.records().items()}
    now = time.time_ns() // 1000
    records["saved_at"] = now / 1_000_000
    records["updated_at"] = now
    records["stamp"] = change.stamp
    if change.title is not KEEP:
        records["title"] = change.title
    if change.open_turn is not KEEP:
        expiry = turn_expiry(change.open_turn)
        records["expires_at"] = None if expiry is None else expiry.timestamp()
    return records


def _save_in(
    connection: sqlite3.Connection,
    thread_id: str,
    change: ThreadChange,
    records: dict[str, object],
    expected: tuple[int, int | None, object],
) -> int:
    """`save`'s checks and writes, in the caller's write transaction; the new version.

    The head is written first, by a statement that holds the checks in its condition: an insert that creates the
    thread unless it exists, or an update of the version expected (of the claim and life named, of enough messages).
    Only when it writes nothing does a read find out why, and refuse the save with the error the checks name.
    """
    kept = _head_written(connection, thread_id, change, records, expected)
    if kept is None:
        kept = _save_checked(connection, thread_id, change, records, expected)
    _write_messages(connection, thread_id, change, kept)
    return expected[0] + 1


def _head_written(
    connection: sqlite3.Connection,
    thread_id: str,
    change: ThreadChange,
    records: dict[str, object],
    expected: tuple[int, int | None, object],
) -> int | None:
    """The head written when the checks hold (one statement): the messages kept before the change's; else None."""
    expected_version, fence, incarnation = expected
    if not _positions_possible(change):
        return None  # `change.check` refuses it whatever the thread holds
    appended = len(change.append)
    if expected_version == 0:
        if change.keep or change.replace or fence not in (None, 0):
            return None  # a new thread has no message to keep or replace, and claim 0: refused below
        created = {"owner": change.owner, "incarnation": change.incarnation, **records}
        columns = ["version", "claim", "message_count", *created]  # record and retention column names, never input
        marks = ", ".join("?" for _ in range(len(columns) + 1))
        inserted = connection.execute(
            f"INSERT INTO agui_threads (thread_id, {', '.join(columns)}) VALUES ({marks}) ON CONFLICT DO NOTHING",
            (thread_id, 1, int(change.claim), appended, *created.values()),
        )
        return 0 if inserted.rowcount == 1 else None
    # The messages the change needs the thread to hold: those it keeps, or past the last it replaces.
    needed = change.keep if change.keep is not None else max(change.replace, default=-1) + 1
    assignments = "".join(f", {column} = ?" for column in records)  # record and retention column names, never input
    conditions = ["thread_id = ?", "version = ?", "message_count >= ?"]
    parameters: list[object] = [int(change.claim), change.keep, appended, *records.values()]
    parameters += [thread_id, expected_version, needed]
    if fence is not None:
        conditions.append("claim = ?")
        parameters.append(fence)
    if incarnation is not ANY_INCARNATION:
        conditions.append("incarnation IS ?")
        parameters.append(incarnation)
    row = connection.execute(
        "UPDATE agui_threads SET version = version + 1, claim = claim + ?, "
        f"message_count = coalesce(?, message_count) + ?{assignments} "
        f"WHERE {' AND '.join(conditions)} RETURNING message_count",
        parameters,
    ).fetchone()
    return None if row is None else int(row[0]) - appended


def _positions_possible(change: ThreadChange) -> bool:
    """Whether some thread could hold the change's positions: `keep` not negative, each replaced one before it."""
    keep = change.keep
    if keep is not None and keep < 0:
        return False
    return all(0 <= position and (keep is None or position < keep) for position in change.replace)


def _save_checked(
    connection: sqlite3.Connection,
    thread_id: str,
    change: ThreadChange,
    records: dict[str, object],
    expected: tuple[int, int | None, object],
) -> int:
    """`save` read, checked and written step by step: refused with the error that names why; else the kept count."""
    expected_version, fence, incarnation = expected
    row = connection.execute(
        "SELECT version, claim, message_count, incarnation FROM agui_threads WHERE thread_id = ?", (thread_id,)
    ).fetchone()
    check_life(thread_id, expected_version, incarnation, (row is not None, row[3] if row else None))
    version, claim, count = row[:3] if row is not None else (0, 0, 0)
    if fence is not None and claim != fence:
        raise StaleClaim(thread_id, expected_version, fence)
    if version != expected_version:
        raise StoreConflict(thread_id, expected_version)
    change.check(count)
    kept = count if change.keep is None else change.keep
    if row is None:  # set once, by the save that creates the thread
        records = {**records, "owner": change.owner, "incarnation": change.incarnation}
    numbers = (version + 1, claim + change.claim, kept + len(change.append))
    _write_head(connection, thread_id, numbers, records, exists=row is not None)
    return kept


def _append_in(
    connection: sqlite3.Connection, thread_id: str, run_id: str, events: Sequence[JournalEvent], ended: bool
) -> bool:
    """`append_events`' check and writes, in the caller's write transaction; whether a stop was requested.

    The status is written first, by a statement that holds the check in its condition: an insert that creates the
    journal with seq 1, or an update of the one whose last seq comes just before the batch's first, that has not
    ended and was not asked to stop. Only when it writes nothing (or the batch is empty) does a read find out why, or
    what to write: a stop request is then read, and the append goes on.
    """
    stop = _status_written(connection, thread_id, run_id, events, ended)
    if stop is None:
        stop = _append_checked(connection, thread_id, run_id, events, ended)
    if events:  # one row, whatever the batch's size
        connection.execute(
            "INSERT INTO agui_journal_events (thread_id, run_id, first_seq, last_seq, body) VALUES (?, ?, ?, ?, ?)",
            (thread_id, run_id, events[0].seq, events[-1].seq, pack_events(events)),
        )
    return stop


def _status_written(
    connection: sqlite3.Connection, thread_id: str, run_id: str, events: Sequence[JournalEvent], ended: bool
) -> bool | None:
    """The status written if the batch continues the journal and no stop was asked (one statement): False; else None."""
    if not events:
        return None
    try:
        check_append(thread_id, run_id, events, last_seq=None, ended=False)  # the batch's own order: the seqs below
    except ValueError:
        return None  # refused below, as the journal it meets says
    first, last = events[0].seq, events[-1].seq
    if first == 1:
        inserted = connection.execute(
            "INSERT INTO agui_journals (thread_id, run_id, last_seq, ended, appended_at) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT DO NOTHING",
            (thread_id, run_id, last, int(ended), time.time()),
        )
        return False if inserted.rowcount == 1 else None  # a journal no append made yet has no stop request
    # "Not asked to stop" is a condition rather than `RETURNING stop_requested`, which costs the statement some 2 us
    # (half of it): a journal asked to stop is rare, so its append writes nothing here and takes the read below.
    updated = connection.execute(
        "UPDATE agui_journals SET last_seq = ?, ended = ?, appended_at = ? "
        "WHERE thread_id = ? AND run_id = ? AND last_seq = ? AND ended = 0 AND stop_requested = 0",
        (last, int(ended), time.time(), thread_id, run_id, first - 1),
    )
    return False if updated.rowcount == 1 else None


def _append_checked(
    connection: sqlite3.Connection, thread_id: str, run_id: str, events: Sequence[JournalEvent], ended: bool
) -> bool:
    """`append_events`' status read, checked and written: refused with the error that names why; else the stop."""
    row = connection.execute(
        "SELECT last_seq, ended, stop_requested FROM agui_journals WHERE thread_id = ? AND run_id = ?",
        (thread_id, run_id),
    ).fetchone()
    last, was_ended, stop = row if row is not None else (0, 0, 0)
    check_append(thread_id, run_id, events, last_seq=last, ended=bool(was_ended))
    connection.execute(
        "INSERT INTO agui_journals (thread_id, run_id, last_seq, ended, appended_at) VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT (thread_id, run_id) DO UPDATE SET "
        "last_seq = excluded.last_seq, ended = excluded.ended, appended_at = excluded.appended_at",
        (thread_id, run_id, last + len(events), int(ended), time.time()),
    )
    return bool(stop)


def _write_messages(connection: sqlite3.Connection, thread_id: str, change: ThreadChange, kept: int) -> None:
    """Apply the change's messages: those past `kept` dropped, the replaced rewritten, the appended from `kept` on."""
    if change.keep is not None:
        connection.execute("DELETE FROM agui_messages WHERE thread_id = ? AND position >= ?", (thread_id, change.keep))
    if change.replace:
        connection.executemany(
            "UPDATE agui_messages SET message_id = ?, role = ?, body = ? WHERE thread_id = ? AND position = ?",
            [(m.id, m.role, m.json, thread_id, position) for position, m in change.replace.items()],
        )
    if change.append:
        connection.executemany(
            "INSERT INTO agui_messages (thread_id, position, message_id, role, body) VALUES (?, ?, ?, ?, ?)",
            [(thread_id, kept + offset, m.id, m.role, m.json) for offset, m in enumerate(change.append)],
        )


def _write_head(
    connection: sqlite3.Connection,
    thread_id: str,
    numbers: tuple[int, int, int],
    records: dict[str, object],
    *,
    exists: bool,
) -> None:
    columns = ["version", "claim", "message_count", *records]  # record and retention column names, never input
    values = [*numbers, *records.values()]
    if exists:
        assignments = ", ".join(f"{column} = ?" for column in columns)
        connection.execute(f"UPDATE agui_threads SET {assignments} WHERE thread_id = ?", (*values, thread_id))
    else:
        marks = ", ".join("?" for _ in range(len(columns) + 1))
        connection.execute(
            f"INSERT INTO agui_threads (thread_id, {', '.join(columns)}) VALUES ({marks})", (thread_id, *values)
        )


def _text(value: JSONValue) -> str:
    # ASCII-escaped: a lone surrogate from client JSON would not encode to UTF-8 for SQLite.
    return json.dumps(value)
