"""`PostgresStore`: a turn store in PostgreSQL; `_postgres_schema` holds its schema and migrations."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Final

from adapter.stores._postgres_schema import migrate
from adapter.stores._protocol import (
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

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool

_INSTALL_HINT: Final = "PostgresStore needs psycopg 3 and psycopg_pool: pip install 'agui-adapter[postgres]'"
# SQLSTATEs our save function raises (class "AG", user-defined), mapped back to the protocol's exceptions.
_STALE_CLAIM: Final = "AG001"
_CONFLICT: Final = "AG002"
_BAD_POSITION: Final = "AG003"
_UNIQUE_VIOLATION: Final = "23505"
_LAST: Final = 2**31 - 1  # past any position (an integer column)

_LOAD: Final = """
    SELECT t.version, t.claim, t.message_count, t.open_turn, t.applied, t.queued, t.owner,
           m.message_id, m.role, m.body
    FROM agui_threads t
    LEFT JOIN agui_messages m
        ON m.thread_id = t.thread_id AND m.position >= %(since)s AND m.position < %(until)s
    WHERE t.thread_id = %(thread)s
    ORDER BY m.position
"""
_FIND: Final = "SELECT min(position) FROM agui_messages WHERE thread_id = %s AND message_id = %s"
_SAVE: Final = """
    SELECT agui_save(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
"""
_SET_OWNER: Final = "UPDATE agui_threads SET owner = %s WHERE thread_id = %s"
# One statement: the threads go, and their messages with them.
_PURGE: Final = """
    WITH doomed AS (
        DELETE FROM agui_threads
        WHERE (open_turn = 'null' AND queued = 'null' AND saved_at < %(idle)s)
           OR (expires_at IS NOT NULL AND expires_at < %(expired)s)
        RETURNING thread_id
    ), gone AS (
        DELETE FROM agui_messages m USING doomed d WHERE m.thread_id = d.thread_id
    )
    SELECT count(*) FROM doomed
"""


class PostgresStore:
    """A turn store in PostgreSQL, shared by every replica on every host that connects to it.

    Behaviour:

    - Connections come from a `psycopg_pool.AsyncConnectionPool`, opened on first use. Its tables
      (`agui_threads`, `agui_messages`, `agui_schema_version`) and the `agui_save` function are
      created then, under a transaction-level advisory lock, so replicas starting together on an empty
      database migrate it once and the others wait for it.
    - `load` is one statement (the head joined with the messages from `since` on), so one round trip
      and one consistent snapshot.
    - `save` is one statement too: `agui_save` locks the thread's head row (`SELECT ... FOR UPDATE`),
      checks the fencing token and the version, and writes the change, all in the statement's
      transaction. The loser of a race gets `StoreConflict` (or `StaleClaim`) with nothing written.
    - Head records and messages are stored as the JSON text they were given, so they come back as is.
    - After `aclose`, every call raises `RuntimeError`; `aclose` may be called again.

    Args:
        dsn: A libpq connection string or URL, e.g. `postgresql://user@host:5432/db`.
        min_size: Connections the pool keeps open.
        max_size: Connections the pool may open.
        timeout: Seconds a call waits for a connection before it fails as `StoreUnavailable`
            (`STORE_UNAVAILABLE`): while PostgreSQL is down, a request waits this long. The pool's
            own default, 30, would hold a client's request for half a minute.
        **options: Passed to `psycopg_pool.AsyncConnectionPool` (e.g. `max_idle`).

    Raises:
        ImportError: psycopg or psycopg_pool is missing (the `postgres` extra).
    """

    def __init__(
        self, dsn: str, *, min_size: int = 1, max_size: int = 10, timeout: float = 5.0, **options: Any
    ) -> None:
        try:
            from psycopg_pool import AsyncConnectionPool
        except ImportError as error:  # pragma: no cover - depends on what is installed
            raise ImportError(_INSTALL_HINT) from error
        self._pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            dsn,
            min_size=min_size,
            max_size=max_size,
            kwargs={"autocommit": True},
            open=False,
            name="agui-postgres",
            timeout=timeout,
            **options,
        )
        self._ready: asyncio.Task[None] | None = None
        self._closed = False

    async def load(self, thread_id: str, *, since: int | None = 0, until: int | None = None) -> StoredThread | None:
        """Return the thread's head and its messages from position `since` on (before `until`), or None."""
        from_position = _LAST if since is None else min(max(since, 0), _LAST)
        before = _LAST if until is None else min(max(until, 0), _LAST)
        async with self._connection() as connection:
            cursor = await connection.execute(_LOAD, {"thread": thread_id, "since": from_position, "until": before})
            rows = await cursor.fetchall()
        if not rows:
            return None
        first = rows[0]
        open_turn, applied, queued = (json.loads(text) for text in first[3:6])
        head = ThreadHead(first[0], first[1], first[2], open_turn, applied, queued, owner=first[6])
        start = min(from_position, head.message_count)
        messages = [StoredMessage(row[7], row[8], row[9]) for row in rows if row[7] is not None]
        return StoredThread(head, start, messages)

    async def find_message(self, thread_id: str, message_id: str) -> int | None:
        """The position of the thread's first message with this id, or None: one lookup in an index."""
        async with self._connection() as connection:
            cursor = await connection.execute(_FIND, (thread_id, message_id))
            row = await cursor.fetchone()
        return None if row is None or row[0] is None else int(row[0])

    async def save(
        self, thread_id: str, change: ThreadChange, *, expected_version: int, fence: int | None = None
    ) -> int:
        """Write `change` if the thread is at `expected_version` (0: absent) and, with `fence`, at that claim.

        Returns:
            The new version, `expected_version + 1`.

        Raises:
            StaleClaim: `fence` is not the thread's claim number; nothing was written.
            StoreConflict: The stored version differs from `expected_version`; nothing was written.
            ValueError: `keep` or a replaced position is past the thread's messages.
        """
        import psycopg

        params = _save_params(thread_id, change, expected_version, fence)
        try:
            async with self._connection() as connection:
                if expected_version == 0 and change.owner is not None:
                    # A save that creates the thread sets its owner, in the same transaction.
                    async with connection.transaction():
                        cursor = await connection.execute(_SAVE, params)
                        row = await cursor.fetchone()
                        await connection.execute(_SET_OWNER, (change.owner, thread_id))
                else:
                    cursor = await connection.execute(_SAVE, params)
                    row = await cursor.fetchone()
        except psycopg.Error as error:
            refused = _refusal(error.sqlstate, thread_id, change, expected_version, fence)
            if refused is None:
                raise
            raise refused from None
        assert row is not None
        return int(row[0])

    async def purge(
        self, older_than: timedelta, *, grace: timedelta = timedelta(0), now: datetime | None = None
    ) -> int:
        """Delete finished threads idle longer than `older_than`, and threads whose open turn expired `grace` ago.

        A finished thread has no open turn and no queued answers. One statement; returns how many
        threads were deleted. A save racing with it either lands first (and the thread is kept if it is
        no longer finished) or finds the thread gone (`StoreConflict`).
        """
        idle, expired = cutoffs(older_than, grace, now)
        async with self._connection() as connection:
            cursor = await connection.execute(_PURGE, {"idle": idle, "expired": expired})
            row = await cursor.fetchone()
        return int(row[0]) if row else 0

    async def ping(self) -> None:
        """Raise unless the database answers a trivial query (for a health check)."""
        async with self._connection() as connection:
            await connection.execute("SELECT 1")

    async def close(self) -> None:
        """Close the pool's connections."""
        await self.aclose()

    async def aclose(self) -> None:
        """Close the pool's connections; later calls raise `RuntimeError`."""
        if self._closed:
            return
        self._closed = True
        await self._pool.close()

    @contextlib.asynccontextmanager
    async def _connection(self) -> AsyncIterator[Any]:
        """A pooled connection; a server that cannot be reached (restarting, cut off) raises `StoreUnavailable`."""
        import psycopg

        try:
            pool = await self._open()
            async with pool.connection() as connection:
                yield connection
        except (psycopg.OperationalError, psycopg.InterfaceError) as error:
            raise StoreUnavailable(f"PostgreSQL could not be reached: {type(error).__name__}") from error

    async def _open(self) -> AsyncConnectionPool[Any]:
        if self._closed:
            raise RuntimeError("PostgresStore is closed")
        if self._ready is None or (self._ready.done() and self._ready.exception() is not None):
            self._ready = asyncio.ensure_future(self._start())
        await asyncio.shield(self._ready)
        return self._pool

    async def _start(self) -> None:
        await self._pool.open(wait=False)
        async with self._pool.connection() as connection:
            await migrate(connection)


def _record(records: dict[str, JSONValue], name: str) -> tuple[bool, str | None]:
    if name not in records:
        return False, None
    # ASCII-escaped, like SQLite's copy: a lone surrogate from client JSON survives the round trip.
    return True, json.dumps(records[name])


def _save_params(thread_id: str, change: ThreadChange, expected_version: int, fence: int | None) -> tuple[Any, ...]:
    """The arguments of `agui_save`, in its order: the change as arrays of columns, then the records it sets."""
    records = change.records()
    replaced = sorted(change.replace.items())
    return (
        thread_id,
        expected_version,
        fence,
        change.claim,
        change.keep,
        [position for position, _ in replaced],
        [m.id for _, m in replaced],
        [m.role for _, m in replaced],
        [m.json for _, m in replaced],
        [m.id for m in change.append],
        [m.role for m in change.append],
        [m.json for m in change.append],
        *_record(records, "open_turn"),
        *_record(records, "applied"),
        *_record(records, "queued"),
        turn_expiry(change.open_turn),
    )


def _refusal(
    sqlstate: str | None, thread_id: str, change: ThreadChange, expected_version: int, fence: int | None
) -> Exception | None:
    """The protocol's exception for what `agui_save` refused, by the SQLSTATE it raised; None for any other error."""
    if sqlstate == _STALE_CLAIM:
        return StaleClaim(thread_id, expected_version, fence or 0)
    if sqlstate in (_CONFLICT, _UNIQUE_VIOLATION):
        return StoreConflict(thread_id, expected_version)
    if sqlstate == _BAD_POSITION:
        return ValueError(f"{change.keep=} or a replaced position is outside the thread's messages")
    return None
