"""Opening an SQLite store's file: the busy timeout, WAL, the tables, and what an older file needs, once.

A file from before the append-only layout is migrated (`_sqlite_migrate`); one from before retention,
ownership, the threads' listing, incarnations or grants gains those columns; one from before issue 43 loses the
indexes nothing read or a scan serves as well. Each upgrade runs in its own
`BEGIN IMMEDIATE`, so processes opening the same file together upgrade it once. The journals' tables are new
tables: a file from before them gains them empty.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable
from typing import Final

from adapter.stores._sqlite_migrate import migrate_documents

_WAL_RETRY_PAUSE: Final = 0.01
_UNREAD_INDEXES: Final = ("agui_threads_saved", "agui_journals_appended")
"""Indexes of older files that cost every save or append a page and that no read needs (`_drop_unread_indexes`)."""
_SCHEMA: Final = (
    """
    CREATE TABLE IF NOT EXISTS agui_threads (
        thread_id     TEXT PRIMARY KEY,
        version       INTEGER NOT NULL,
        claim         INTEGER NOT NULL,
        message_count INTEGER NOT NULL,
        open_turn     TEXT NOT NULL DEFAULT 'null',
        applied       TEXT NOT NULL DEFAULT 'null',
        queued        TEXT NOT NULL DEFAULT 'null'
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS agui_messages (
        thread_id  TEXT NOT NULL,
        position   INTEGER NOT NULL,
        message_id TEXT NOT NULL,
        role       TEXT NOT NULL,
        body       TEXT NOT NULL,
        PRIMARY KEY (thread_id, position)
    ) WITHOUT ROWID
    """,
    # `find_message`: a message's position by its id; the primary key's columns ride along in the index.
    "CREATE INDEX IF NOT EXISTS agui_messages_id ON agui_messages (thread_id, message_id)",
    # A run's journal: its status, one row (created by its first append)...
    """
    CREATE TABLE IF NOT EXISTS agui_journals (
        thread_id      TEXT NOT NULL,
        run_id         TEXT NOT NULL,
        last_seq       INTEGER NOT NULL,
        ended          INTEGER NOT NULL DEFAULT 0,
        stop_requested INTEGER NOT NULL DEFAULT 0,
        appended_at    REAL NOT NULL,
        PRIMARY KEY (thread_id, run_id)
    ) WITHOUT ROWID
    """,
    # ... and its events, one row per append (`_protocol.pack_events`): the seqs `first_seq..last_seq`, their JSON
    # one line each. Keyed by the last seq, so a read from `after` is a range of the key that starts at the row
    # holding `after + 1`. A rowid table: rows of many events are large, which WITHOUT ROWID suits badly.
    # Unreleased, like PostgresStore's schema 4, so changed in place (issue 31): a file made on main while the table
    # had one row per event (a `seq` column) is not upgraded; drop its two journal tables.
    """
    CREATE TABLE IF NOT EXISTS agui_journal_events (
        thread_id TEXT NOT NULL,
        run_id    TEXT NOT NULL,
        first_seq INTEGER NOT NULL,
        last_seq  INTEGER NOT NULL,
        body      TEXT NOT NULL,
        PRIMARY KEY (thread_id, run_id, last_seq)
    )
    """,
)


def open_file(path: str, synchronous: str, busy_timeout: float = 5.0) -> sqlite3.Connection:
    """A connection to the file at `path`, in WAL mode, with the tables of this layout (an older file upgraded once).

    `busy_timeout` is the seconds a statement waits for another connection's lock before it fails (SQLITE_BUSY).
    """
    # isolation_level=None: no implicit transactions, so the store's BEGIN IMMEDIATE is its own.
    try:
        connection = sqlite3.connect(path, timeout=busy_timeout, isolation_level=None)
    except sqlite3.Error as error:
        raise naming(error, path) from error
    try:
        connection.execute(f"PRAGMA busy_timeout = {round(busy_timeout * 1000)}")
        _enable_wal(connection, busy_timeout)
        connection.execute(f"PRAGMA synchronous = {synchronous}")
        for statement in _SCHEMA:
            connection.execute(statement)
        migrate_documents(connection)
        _add_retention_columns(connection)
        _add_owner_column(connection)
        _add_listing_columns(connection)
        _add_incarnation_column(connection)
        _add_stamp_column(connection)
        _add_grants_column(connection)
        _drop_unread_indexes(connection)
    except sqlite3.Error as error:
        connection.close()
        raise naming(error, path) from error
    except BaseException:
        connection.close()
        raise
    return connection


def naming(error: sqlite3.Error, path: str) -> sqlite3.Error:
    """`error` (same class, same SQLite code) with the file's path and why it may fail in its message.

    The path is for the app author, in the traceback `StoreUnavailable` is chained to: the store's own message,
    which a client may see in a `RUN_ERROR`, never names it (docs/security.md).
    """
    named = type(error)(f"{error}: the SQLite file {path!r}{_why(path)}")
    named.sqlite_errorcode = error.sqlite_errorcode
    named.sqlite_errorname = error.sqlite_errorname
    return named


def _why(path: str) -> str:
    if path in ("", ":memory:") or path.startswith("file:"):
        return ""
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        return f" (its directory {directory!r} does not exist)"
    if os.path.isdir(path):
        return " (it is a directory, not a file)"
    return ""


def _add_retention_columns(connection: sqlite3.Connection) -> None:
    """Add `saved_at` and `expires_at` (Unix seconds) to a file from before retention, once.

    Threads already there count as saved now, so a first purge never deletes them for their age.
    """

    def upgrade() -> None:
        connection.execute("ALTER TABLE agui_threads ADD COLUMN saved_at REAL")
        connection.execute("ALTER TABLE agui_threads ADD COLUMN expires_at REAL")
        connection.execute("UPDATE agui_threads SET saved_at = ?", (time.time(),))

    _once(connection, "saved_at", upgrade)


def _add_owner_column(connection: sqlite3.Connection) -> None:
    """Add the nullable `owner` to a file from before thread ownership, once: its threads stay unowned."""
    _once(connection, "owner", lambda: connection.execute("ALTER TABLE agui_threads ADD COLUMN owner TEXT"))


def _add_listing_columns(connection: sqlite3.Connection) -> None:
    """Add `title` and `updated_at` (Unix microseconds) and the listing's index to a file from before them, once.

    Threads already there count as updated when they were last saved (`saved_at`). Microseconds in an
    integer, not seconds in a float as `saved_at` is: a page's cursor names a thread's `updated_at` exactly.
    """

    def upgrade() -> None:
        connection.execute("ALTER TABLE agui_threads ADD COLUMN title TEXT")
        connection.execute("ALTER TABLE agui_threads ADD COLUMN updated_at INTEGER NOT NULL DEFAULT 0")
        connection.execute(
            "UPDATE agui_threads SET updated_at = CAST(round(coalesce(saved_at, ?) * 1000000) AS INTEGER)",
            (time.time(),),
        )
        # `list_threads`: an owner's threads in the listing's order, from the index: nothing to sort.
        connection.execute(
            "CREATE INDEX IF NOT EXISTS agui_threads_listing ON agui_threads (owner, updated_at DESC, thread_id DESC)"
        )

    _once(connection, "updated_at", upgrade)


def _add_incarnation_column(connection: sqlite3.Connection) -> None:
    """Add the nullable `incarnation` to a file from before it, once: its threads have none (`ThreadHead`)."""
    _once(connection, "incarnation", lambda: connection.execute("ALTER TABLE agui_threads ADD COLUMN incarnation TEXT"))


def _add_stamp_column(connection: sqlite3.Connection) -> None:
    """Add the nullable `stamp` to a file from before it, once: its threads gain one at their next save."""
    _once(connection, "stamp", lambda: connection.execute("ALTER TABLE agui_threads ADD COLUMN stamp TEXT"))


def _add_grants_column(connection: sqlite3.Connection) -> None:
    """Add `grants` (a head record, JSON text) to a file from before it, once: its threads have none."""
    add = "ALTER TABLE agui_threads ADD COLUMN grants TEXT NOT NULL DEFAULT 'null'"
    _once(connection, "grants", lambda: connection.execute(add))


def _drop_unread_indexes(connection: sqlite3.Connection) -> None:
    """Drop the indexes a file from before issue 43 has and this layout does not, once: each cost a write a page.

    `agui_threads_saved` (every save wrote it): `purge` tests `saved_at` in an OR with `expires_at`, which no index
    holds, so it scans the threads either way. `agui_journals_appended` (every append wrote it, moving the journal's
    entry to the newest end): only `purge` read it, and it now scans the journals (one row per run) beside the threads.
    """
    unread = [name for name in _UNREAD_INDEXES if _has_index(connection, name)]
    if not unread:
        return
    connection.execute("BEGIN IMMEDIATE")
    try:
        for name in unread:  # fixed names, never input; another process may have dropped them meanwhile
            connection.execute(f"DROP INDEX IF EXISTS {name}")
        connection.execute("COMMIT")
    except BaseException:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        raise


def _has_index(connection: sqlite3.Connection, name: str) -> bool:
    found = connection.execute("SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = ?", (name,))
    return found.fetchone() is not None


def _once(connection: sqlite3.Connection, column: str, upgrade: Callable[[], object]) -> None:
    """Run `upgrade` in one `BEGIN IMMEDIATE` if `agui_threads` lacks `column`, which it adds.

    Checked again inside the transaction: another process opening the same file may have upgraded it meanwhile.
    """
    if column in _columns(connection):
        return
    connection.execute("BEGIN IMMEDIATE")
    try:
        if column not in _columns(connection):
            upgrade()
        connection.execute("COMMIT")
    except BaseException:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        raise


def _columns(connection: sqlite3.Connection) -> set[str]:
    return {row[1] for row in connection.execute("PRAGMA table_info(agui_threads)")}


def _enable_wal(connection: sqlite3.Connection, busy_timeout: float) -> None:
    # Switching the journal mode fails with SQLITE_BUSY at once, without the busy handler, while another
    # connection is opening the same new file; retry until the busy timeout instead.
    deadline = time.monotonic() + busy_timeout
    while True:
        try:
            connection.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as error:
            busy = error.sqlite_errorcode & 0xFF == sqlite3.SQLITE_BUSY
            if not busy or time.monotonic() >= deadline:
                raise
            time.sleep(_WAL_RETRY_PAUSE)
