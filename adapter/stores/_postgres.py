from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Final

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
_MIGRATION_LOCK: Final = 0x61677569  # "agui": the advisory lock every replica takes around the migration
_SCHEMA_VERSION: Final = 3
# SQLSTATEs our save function raises (class "AG", user-defined), mapped back to the protocol's exceptions.
_STALE_CLAIM: Final = "AG001"
_CONFLICT: Final = "AG002"
_BAD_POSITION: Final = "AG003"
_UNIQUE_VIOLATION: Final = "23505"
_LAST: Final = 2**31 - 1  # past any position (an integer column)

# Version 1 of the schema: a thread's head, its messages one row each, and the save as one function so
# that the compare-and-set, the fence check and every write are one statement: one round trip.
_MIGRATIONS: Final[dict[int, str]] = {
    1: """
    CREATE TABLE agui_threads (
        thread_id     text PRIMARY KEY,
        version       bigint NOT NULL,
        claim         bigint NOT NULL,
        message_count integer NOT NULL,
        open_turn     text NOT NULL DEFAULT 'null',
        applied       text NOT NULL DEFAULT 'null',
        queued        text NOT NULL DEFAULT 'null',
        saved_at      timestamptz NOT NULL DEFAULT now(),
        expires_at    timestamptz
    );
    CREATE INDEX agui_threads_saved ON agui_threads (saved_at);
    CREATE INDEX agui_threads_expiry ON agui_threads (expires_at) WHERE expires_at IS NOT NULL;
    CREATE TABLE agui_messages (
        thread_id  text NOT NULL,
        position   integer NOT NULL,
        message_id text NOT NULL,
        role       text NOT NULL,
        body       text NOT NULL,
        PRIMARY KEY (thread_id, position)
    );
    CREATE FUNCTION agui_save(
        p_thread text, p_expected bigint, p_fence bigint, p_claim boolean, p_keep integer,
        p_replace_at integer[], p_replace_id text[], p_replace_role text[], p_replace_body text[],
        p_append_id text[], p_append_role text[], p_append_body text[],
        p_set_open boolean, p_open text, p_set_applied boolean, p_applied text,
        p_set_queued boolean, p_queued text, p_expires timestamptz
    ) RETURNS bigint LANGUAGE plpgsql AS $$
    DECLARE
        v_version bigint := 0;
        v_claim bigint := 0;
        v_count integer := 0;
        v_kept integer;
        v_found boolean;
    BEGIN
        SELECT version, claim, message_count INTO v_version, v_claim, v_count
            FROM agui_threads WHERE thread_id = p_thread FOR UPDATE;
        v_found := FOUND;
        IF NOT v_found THEN
            v_version := 0; v_claim := 0; v_count := 0;
        END IF;
        IF p_fence IS NOT NULL AND v_claim <> p_fence THEN
            RAISE EXCEPTION 'stale claim' USING ERRCODE = 'AG001';
        END IF;
        IF v_version <> p_expected THEN
            RAISE EXCEPTION 'conflict' USING ERRCODE = 'AG002';
        END IF;
        v_kept := coalesce(p_keep, v_count);
        IF v_kept < 0 OR v_kept > v_count
           OR EXISTS (SELECT 1 FROM unnest(p_replace_at) AS r(at) WHERE r.at < 0 OR r.at >= v_kept) THEN
            RAISE EXCEPTION 'position' USING ERRCODE = 'AG003';
        END IF;
        IF p_keep IS NOT NULL AND p_keep < v_count THEN
            DELETE FROM agui_messages WHERE thread_id = p_thread AND position >= p_keep;
        END IF;
        IF cardinality(p_replace_at) > 0 THEN
            UPDATE agui_messages m SET message_id = r.id, role = r.role, body = r.body
                FROM unnest(p_replace_at, p_replace_id, p_replace_role, p_replace_body) AS r(at, id, role, body)
                WHERE m.thread_id = p_thread AND m.position = r.at;
        END IF;
        IF cardinality(p_append_id) > 0 THEN
            INSERT INTO agui_messages (thread_id, position, message_id, role, body)
                SELECT p_thread, v_kept + a.n - 1, a.id, a.role, a.body
                FROM unnest(p_append_id, p_append_role, p_append_body) WITH ORDINALITY AS a(id, role, body, n);
        END IF;
        v_count := v_kept + cardinality(p_append_id);
        IF v_found THEN
            UPDATE agui_threads SET
                version = v_version + 1,
                claim = v_claim + p_claim::integer,
                message_count = v_count,
                open_turn = CASE WHEN p_set_open THEN p_open ELSE open_turn END,
                applied = CASE WHEN p_set_applied THEN p_applied ELSE applied END,
                queued = CASE WHEN p_set_queued THEN p_queued ELSE queued END,
                expires_at = CASE WHEN p_set_open THEN p_expires ELSE expires_at END,
                saved_at = now()
            WHERE thread_id = p_thread;
        ELSE
            -- A racing creator that committed first makes this a unique violation: a conflict.
            INSERT INTO agui_threads
                (thread_id, version, claim, message_count, open_turn, applied, queued, expires_at)
            VALUES (p_thread, 1, p_claim::integer, v_count,
                    CASE WHEN p_set_open THEN p_open ELSE 'null' END,
                    CASE WHEN p_set_applied THEN p_applied ELSE 'null' END,
                    CASE WHEN p_set_queued THEN p_queued ELSE 'null' END,
                    p_expires);
        END IF;
        RETURN v_version + 1;
    END $$;
    """,
    # Version 2: who owns each thread, set once by the save that creates it (threads from before stay unowned).
    2: """
    ALTER TABLE agui_threads ADD COLUMN owner text;
    """,
    # Version 3: a message's position by its id (`find_message`), from the index alone.
    3: """
    CREATE INDEX agui_messages_id ON agui_messages (thread_id, message_id, position);
    """,
}

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
        **options: Passed to `psycopg_pool.AsyncConnectionPool` (e.g. `timeout`).

    Raises:
        ImportError: psycopg or psycopg_pool is missing (the `postgres` extra).
    """

    def __init__(self, dsn: str, *, min_size: int = 1, max_size: int = 10, **options: Any) -> None:
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

        records = change.records()
        replaced = sorted(change.replace.items())
        params = (
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
            state = error.sqlstate
            if state == _STALE_CLAIM:
                raise StaleClaim(thread_id, expected_version, fence or 0) from None
            if state in (_CONFLICT, _UNIQUE_VIOLATION):
                raise StoreConflict(thread_id, expected_version) from None
            if state == _BAD_POSITION:
                raise ValueError(f"{change.keep=} or a replaced position is outside the thread's messages") from None
            raise
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
            await _migrate(connection)


async def _migrate(connection: Any) -> None:
    """Bring the schema to `_SCHEMA_VERSION`, once, however many replicas start together."""
    async with connection.transaction():
        # Transaction-level: released at commit, even if this process dies mid-way.
        await connection.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        await connection.execute("CREATE TABLE IF NOT EXISTS agui_schema_version (version integer NOT NULL)")
        cursor = await connection.execute("SELECT max(version) FROM agui_schema_version")
        row = await cursor.fetchone()
        current = row[0] if row and row[0] is not None else 0
        if current > _SCHEMA_VERSION:
            raise RuntimeError(f"the database's agui schema is version {current}, newer than this adapter's")
        for version in range(current + 1, _SCHEMA_VERSION + 1):
            await connection.execute(_MIGRATIONS[version])
            await connection.execute("INSERT INTO agui_schema_version (version) VALUES (%s)", (version,))


def _record(records: dict[str, JSONValue], name: str) -> tuple[bool, str | None]:
    if name not in records:
        return False, None
    # ASCII-escaped, like SQLite's copy: a lone surrogate from client JSON survives the round trip.
    return True, json.dumps(records[name])
