from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final, Literal, TypeVar

from adapter.stores._protocol import StoreConflict, Versioned

_T = TypeVar("_T")

_BUSY_TIMEOUT_MS: Final = 5_000
_WAL_RETRY_PAUSE: Final = 0.01
_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS agui_turns (
    thread_id TEXT PRIMARY KEY,
    version   INTEGER NOT NULL,
    document  TEXT NOT NULL
)
"""


class SQLiteStore:
    """A turn store in one SQLite file, shared safely by several processes or replicas on one host.

    Behaviour:

    - Every call runs on one worker thread that owns the connection, so the event loop never blocks
      on disk or on a lock. Calls from one store instance are serialised in order.
    - The file is opened, switched to WAL journal mode and given its table on first use.
    - `save` is a compare-and-set inside `BEGIN IMMEDIATE`: the write lock is taken before the
      version is read, so two instances (or processes) racing on one thread serialise, and the loser
      gets `StoreConflict` with nothing changed. A writer that can't get the lock within the busy
      timeout (5 s) fails with `sqlite3.OperationalError`, which is not a conflict.
    - Documents are stored as JSON text, serialised before the call returns to the loop, so callers
      may mutate their dict afterwards; `load` returns a fresh copy each time.
    - `":memory:"` works but is private to this instance. After `close`, every call raises
      `RuntimeError`; `close` itself may be called again.

    - `synchronous="NORMAL"` (the default) makes a commit durable against a crash or restart of the
      program, which is what a suspended turn needs; in WAL mode only a power loss or an OS crash can
      lose the last commits. Pass `"FULL"` to wait for the disk on every commit (several ms each).

    Args:
        path: The database file. Created if missing; its directory must exist.
        synchronous: SQLite's `synchronous` setting: "NORMAL" or "FULL".
    """

    def __init__(self, path: str | os.PathLike[str], *, synchronous: Literal["NORMAL", "FULL"] = "NORMAL") -> None:
        if synchronous not in ("NORMAL", "FULL"):
            raise ValueError(f"synchronous must be 'NORMAL' or 'FULL', not {synchronous!r}")
        self._synchronous = synchronous
        self._path = os.fspath(path)
        self._connection: sqlite3.Connection | None = None
        # One thread owns the connection: sqlite3 connections are bound to their creating thread.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="agui-sqlite")
        self._closed = False

    async def load(self, thread_id: str) -> Versioned | None:
        """Return the thread's document and version, or None when the thread has none."""
        return await self._call(self._load, thread_id)

    async def save(self, thread_id: str, document: dict[str, Any], *, expected_version: int) -> int:
        """Store `document` if the thread is still at `expected_version` (0: absent).

        Returns:
            The new version, `expected_version + 1`.

        Raises:
            StoreConflict: The stored version differs from `expected_version`; nothing was written.
        """
        # ASCII-escaped: a lone surrogate from client JSON would not encode to UTF-8 for SQLite.
        text = json.dumps(document)
        return await self._call(self._save, thread_id, text, expected_version)

    async def close(self) -> None:
        """Close the connection and stop the worker thread."""
        if self._closed:
            return
        self._closed = True
        await asyncio.get_running_loop().run_in_executor(self._executor, self._disconnect)
        self._executor.shutdown(wait=False)

    async def _call(self, function: Callable[..., _T], *args: Any) -> _T:
        if self._closed:
            raise RuntimeError("SQLiteStore is closed")
        return await asyncio.get_running_loop().run_in_executor(self._executor, function, *args)

    # Everything below runs on the worker thread.

    def _connect(self) -> sqlite3.Connection:
        if self._connection is None:
            # isolation_level=None: no implicit transactions, so BEGIN IMMEDIATE below is ours alone.
            connection = sqlite3.connect(self._path, timeout=_BUSY_TIMEOUT_MS / 1000, isolation_level=None)
            try:
                connection.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
                _enable_wal(connection)
                connection.execute(f"PRAGMA synchronous = {self._synchronous}")
                connection.execute(_SCHEMA)
            except BaseException:
                connection.close()
                raise
            self._connection = connection
        return self._connection

    def _disconnect(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def _load(self, thread_id: str) -> Versioned | None:
        row = (
            self._connect()
            .execute("SELECT document, version FROM agui_turns WHERE thread_id = ?", (thread_id,))
            .fetchone()
        )
        if row is None:
            return None
        return Versioned(json.loads(row[0]), row[1])

    def _save(self, thread_id: str, text: str, expected_version: int) -> int:
        connection = self._connect()
        # IMMEDIATE takes the write lock before the read, so no other writer can slip in between.
        connection.execute("BEGIN IMMEDIATE")
        try:
            row = connection.execute("SELECT version FROM agui_turns WHERE thread_id = ?", (thread_id,)).fetchone()
            current = 0 if row is None else int(row[0])
            if current != expected_version:
                raise StoreConflict(thread_id, expected_version)
            connection.execute(
                "INSERT INTO agui_turns (thread_id, version, document) VALUES (?, ?, ?) "
                "ON CONFLICT (thread_id) DO UPDATE SET version = excluded.version, document = excluded.document",
                (thread_id, current + 1, text),
            )
            connection.execute("COMMIT")
        except BaseException:
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            raise
        return current + 1


def _enable_wal(connection: sqlite3.Connection) -> None:
    # Switching the journal mode fails with SQLITE_BUSY at once, without the busy handler, while another
    # connection is opening the same new file; retry until the busy timeout instead.
    deadline = time.monotonic() + _BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            connection.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as error:
            busy = error.sqlite_errorcode & 0xFF == sqlite3.SQLITE_BUSY
            if not busy or time.monotonic() >= deadline:
                raise
            time.sleep(_WAL_RETRY_PAUSE)
