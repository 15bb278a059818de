"""`SQLiteStore`: a turn store in one SQLite file; `_sqlite_open` opens the file."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import Any, Final, Literal, TypeVar

from adapter.stores._deadline import DEFAULT_TIMEOUT, Deadline
from adapter.stores._protocol import (
    KEEP,
    JSONValue,
    StaleClaim,
    StoreConflict,
    StoredMessage,
    StoredThread,
    StoreUnavailable,
    ThreadChange,
    ThreadHead,
)
from adapter.stores._retention import cutoffs, turn_expiry
from adapter.stores._sqlite_open import open_file

_T = TypeVar("_T")

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


class SQLiteStore:
    """A turn store in one SQLite file, shared safely by several processes or replicas on one host.

    Behaviour:

    - Every call runs on one worker thread that owns the connection, so the event loop never blocks
      on disk or on a lock. Calls from one store instance are serialised in order.
    - The file is opened, switched to WAL journal mode and given its tables on first use: a thread's
      head in `agui_threads`, its messages one row each in `agui_messages`. A file from before this
      layout (one JSON document per thread, `agui_turns`) is migrated then, once, in one transaction.
    - `save` is a compare-and-set inside `BEGIN IMMEDIATE`: the write lock is taken before the
      version and claim number are read, so two instances (or processes) racing on one thread
      serialise, and the loser gets `StoreConflict` (or `StaleClaim`) with nothing changed. A writer
      that can't get the lock within the busy timeout (`timeout`) fails with `StoreUnavailable`,
      which is not a conflict. A save writes the rows it changes: appended messages, replaced ones,
      the head; never the rest of the thread.
    - Head records are serialised before the call returns to the loop, so callers may mutate their
      values afterwards; `load` returns fresh copies each time.
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
        self._deadline = Deadline(timeout, "the SQLite store")
        self._synchronous = synchronous
        self._path = os.fspath(path)
        self._connection: sqlite3.Connection | None = None
        self._opened_read_only = False
        # One thread owns the connection: sqlite3 connections are bound to their creating thread.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="agui-sqlite")
        self._closed = False

    async def load(self, thread_id: str, *, since: int | None = 0, until: int | None = None) -> StoredThread | None:
        """Return the thread's head and its messages from position `since` on (before `until`), or None."""
        return await self._call("a load", self._load, thread_id, since, until)

    async def find_message(self, thread_id: str, message_id: str) -> int | None:
        """The position of the thread's first message with this id, or None: one lookup in an index."""
        return await self._call("a lookup", self._find_message, thread_id, message_id)

    async def save(
        self, thread_id: str, change: ThreadChange, *, expected_version: int, fence: int | None = None
    ) -> int:
        """Write `change` if the thread is at `expected_version` (0: absent) and, with `fence`, at that claim.

        Returns:
            The new version, `expected_version + 1`.

        Raises:
            StaleClaim: `fence` is not the thread's claim number; nothing was written.
            StoreConflict: The stored version differs from `expected_version`; nothing was written.
        """
        # Serialised before the call returns to the loop, so callers may mutate their values afterwards.
        records: dict[str, object] = {name: _text(value) for name, value in change.records().items()}
        records["saved_at"] = time.time()
        if change.open_turn is not KEEP:
            expiry = turn_expiry(change.open_turn)
            records["expires_at"] = None if expiry is None else expiry.timestamp()
        return await self._call("a save", self._save, thread_id, change, records, expected_version, fence)

    async def purge(
        self, older_than: timedelta, *, grace: timedelta = timedelta(0), now: datetime | None = None
    ) -> int:
        """Delete finished threads idle longer than `older_than`, and threads whose open turn expired `grace` ago.

        A finished thread has no open turn and no queued answers. One transaction; returns how many
        threads were deleted.
        """
        idle, expired = cutoffs(older_than, grace, now)
        return await self._call("a purge", self._purge, idle.timestamp(), expired.timestamp())

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
        await self._deadline.settle()
        await asyncio.get_running_loop().run_in_executor(self._executor, self._disconnect)
        self._executor.shutdown(wait=False)

    async def _call(self, what: str, function: Callable[..., _T], *args: Any) -> _T:
        if self._closed:
            raise RuntimeError("SQLiteStore is closed")
        work = asyncio.get_running_loop().run_in_executor(self._executor, self._guarded, function, *args)
        return await self._deadline.run(work, what)

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
            self._connection = open_file(self._path, self._synchronous, self._deadline.seconds)
            # SQLite opens a file it may not write read-only, silently, and the connection stays so.
            self._opened_read_only = self._path not in ("", ":memory:") and not os.access(self._path, os.W_OK)
        return self._connection

    def _purge(self, idle: float, expired: float) -> int:
        connection = self._connect()
        doomed = (
            "SELECT thread_id FROM agui_threads WHERE (open_turn = 'null' AND queued = 'null' AND saved_at < ?) "
            "OR (expires_at IS NOT NULL AND expires_at < ?)"
        )
        connection.execute("BEGIN IMMEDIATE")
        try:
            connection.execute(f"DELETE FROM agui_messages WHERE thread_id IN ({doomed})", (idle, expired))
            count = connection.execute(f"DELETE FROM agui_threads WHERE thread_id IN ({doomed})", (idle, expired))
            connection.execute("COMMIT")
        except BaseException:
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            raise
        return count.rowcount

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
                "SELECT version, claim, message_count, open_turn, applied, queued, owner "
                "FROM agui_threads WHERE thread_id = ?",
                (thread_id,),
            ).fetchone()
            if row is None:
                return None
            open_turn, applied, queued = (json.loads(text) for text in row[3:6])
            head = ThreadHead(row[0], row[1], row[2], open_turn, applied, queued, owner=row[6])
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
        expected_version: int,
        fence: int | None,
    ) -> int:
        connection = self._connect()
        # IMMEDIATE takes the write lock before the read, so no other writer can slip in between.
        connection.execute("BEGIN IMMEDIATE")
        try:
            row = connection.execute(
                "SELECT version, claim, message_count FROM agui_threads WHERE thread_id = ?", (thread_id,)
            ).fetchone()
            version, claim, count = row if row is not None else (0, 0, 0)
            if fence is not None and claim != fence:
                raise StaleClaim(thread_id, expected_version, fence)
            if version != expected_version:
                raise StoreConflict(thread_id, expected_version)
            change.check(count)
            count = _write_messages(connection, thread_id, change, count)
            if row is None and change.owner is not None:
                records = {**records, "owner": change.owner}  # set once, by the save that creates the thread
            _write_head(
                connection, thread_id, (version + 1, claim + change.claim, count), records, exists=row is not None
            )
            connection.execute("COMMIT")
        except BaseException:
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            raise
        return version + 1


def _write_messages(connection: sqlite3.Connection, thread_id: str, change: ThreadChange, count: int) -> int:
    """Apply the change's messages; return the thread's new message count."""
    if change.keep is not None:
        connection.execute("DELETE FROM agui_messages WHERE thread_id = ? AND position >= ?", (thread_id, change.keep))
        count = change.keep
    connection.executemany(
        "UPDATE agui_messages SET message_id = ?, role = ?, body = ? WHERE thread_id = ? AND position = ?",
        [(m.id, m.role, m.json, thread_id, position) for position, m in change.replace.items()],
    )
    connection.executemany(
        "INSERT INTO agui_messages (thread_id, position, message_id, role, body) VALUES (?, ?, ?, ?, ?)",
        [(thread_id, count + offset, m.id, m.role, m.json) for offset, m in enumerate(change.append)],
    )
    return count + len(change.append)


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
