"""`PostgresStore`: a turn store in PostgreSQL; `_postgres_schema` holds its schema and migrations."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Final, TypeVar

from adapter.stores._deadline import DEFAULT_TIMEOUT, Deadline, checked_timeout
from adapter.stores._listing import check_limit, next_cursor, parse_cursor
from adapter.stores._postgres_notify import Notifier, Watch
from adapter.stores._postgres_schema import migrate
from adapter.stores._protocol import (
    ANY_INCARNATION,
    CREATE_ATTEMPTS,
    KEEP,
    JournalAppend,
    JournalEvent,
    JSONValue,
    RunJournal,
    StaleClaim,
    StoreConflict,
    StoredMessage,
    StoredThread,
    StoreUnavailable,
    ThreadChange,
    ThreadGone,
    ThreadHead,
    ThreadSummary,
    check_append,
    pack_events,
    unpack_rows,
)
from adapter.stores._retention import cutoffs, turn_expiry

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool

DEFAULT_MIGRATION_TIMEOUT: Final = 300.0
"""Seconds the schema migration of a store's first call may take by default."""
_INSTALL_HINT: Final = "PostgresStore needs psycopg 3 and psycopg_pool: pip install 'agui-adapter[postgres]'"
# SQLSTATEs our save function raises (class "AG", user-defined), mapped back to the protocol's exceptions.
_STALE_CLAIM: Final = "AG001"
_CONFLICT: Final = "AG002"
_BAD_POSITION: Final = "AG003"
_JOURNAL_ENDED: Final = "AG004"
_JOURNAL_SEQ: Final = "AG005"  # its message is the journal's last seq
_GONE: Final = "AG006"
_UNIQUE_VIOLATION: Final = "23505"
_LAST: Final = 2**31 - 1  # past any position (an integer column)
_READ_ONLY: Final = "25006"  # read_only_sql_transaction: a standby, or default_transaction_read_only
_DISK_FULL: Final = "53100"
_T = TypeVar("_T")

_LOAD: Final = """
    SELECT t.version, t.claim, t.message_count, t.open_turn, t.applied, t.owner, t.title, t.saved_at,
           t.incarnation, t.stamp, t.grants, m.message_id, m.role, m.body
    FROM agui_threads t
    LEFT JOIN agui_messages m
        ON m.thread_id = t.thread_id AND m.position >= %(since)s AND m.position < %(until)s
    WHERE t.thread_id = %(thread)s
    ORDER BY m.position
"""
_FIND: Final = "SELECT min(position) FROM agui_messages WHERE thread_id = %s AND message_id = %s"
_SAVE: Final = """
    SELECT agui_save(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
"""
# A save and an append in one statement (schema 9): `agui_save`'s arguments, what `save` sets beside it, the append's.
_SAVE_APPEND: Final = f"SELECT * FROM agui_save_append({', '.join(['%s'] * 34)})"
_SET_CREATED: Final = "UPDATE agui_threads SET owner = %s, incarnation = %s WHERE thread_id = %s"
_SET_TITLE: Final = "UPDATE agui_threads SET title = %s WHERE thread_id = %s"
_SET_GRANTS: Final = "UPDATE agui_threads SET grants = %s WHERE thread_id = %s"
# One statement: the threads go, their messages with them, and the rows of their journals and of every journal
# idle past the cutoff; it returns how many threads went and which journals, whose events go next (`_PURGE_EVENTS`).
_PURGE: Final = """
    WITH doomed AS (
        DELETE FROM agui_threads
        WHERE (open_turn = 'null' AND saved_at < %(idle)s)
           OR (expires_at IS NOT NULL AND expires_at < %(expired)s)
        RETURNING thread_id
    ), gone AS (
        DELETE FROM agui_messages m USING doomed d WHERE m.thread_id = d.thread_id
    ), journals AS (
        DELETE FROM agui_journals
        WHERE appended_at < %(idle)s OR thread_id IN (SELECT thread_id FROM doomed)
        RETURNING thread_id, run_id
    )
    SELECT (SELECT count(*) FROM doomed), array_agg(thread_id), array_agg(run_id) FROM journals
"""
# A statement of its own, after `_PURGE` in its transaction: it sees the events of an append that committed while
# `_PURGE` waited for its journal's row.
_PURGE_EVENTS: Final = """
    DELETE FROM agui_journal_events e USING unnest(%s::text[], %s::text[]) AS k(thread_id, run_id)
    WHERE e.thread_id = k.thread_id AND e.run_id = k.run_id
"""
_APPEND: Final = "SELECT agui_append(%s, %s, %s, %s, %s, %s)"
# The status, joined with the rows that hold the seqs `after + 1 .. through` (`through` is `after + limit`): from the
# one holding `after + 1` to the one holding `through` (or the last), two bounds of one range of the key; no row when
# `limit` is 0. The rows are disjoint and consecutive, so the key's order (their last seq) is their first seq's.
_READ_EVENTS: Final = """
    SELECT j.last_seq, j.ended, j.stop_requested, e.first_seq, e.body
    FROM agui_journals j
    LEFT JOIN LATERAL (
        SELECT first_seq, last_seq, body FROM agui_journal_events
        WHERE thread_id = j.thread_id AND run_id = j.run_id AND %(limit)s > 0 AND last_seq > %(after)s
          AND last_seq <= coalesce(
              (SELECT last_seq FROM agui_journal_events
               WHERE thread_id = j.thread_id AND run_id = j.run_id AND last_seq >= %(through)s
               ORDER BY last_seq LIMIT 1),
              %(through)s)
    ) e ON true
    WHERE j.thread_id = %(thread)s AND j.run_id = %(run)s
    ORDER BY e.last_seq
"""
_REQUEST_STOP: Final = """
    UPDATE agui_journals SET stop_requested = true
    WHERE thread_id = %s AND run_id = %s AND NOT ended
    RETURNING 1
"""
_DELETE: Final = "SELECT agui_delete(%s, %s, %s)"
# `owner = ` or `owner IS NULL`, and a cursor's key or none: each a query the index `agui_threads_listing` answers.
_LIST: Final = """
    SELECT thread_id, title, saved_at, owner, open_turn FROM agui_threads
    WHERE {owner} {below}
    ORDER BY saved_at DESC, thread_id COLLATE "C" DESC
    LIMIT %(count)s
"""
_BELOW: Final = """AND (saved_at, thread_id COLLATE "C") < (%(at)s, %(id)s COLLATE "C")"""


class PostgresStore:
    """A turn store in PostgreSQL, shared by every replica on every host that connects to it.

    Behaviour:

    - Connections come from a `psycopg_pool.AsyncConnectionPool`, opened on first use. Its tables
      (`agui_threads`, `agui_messages`, the journals' `agui_journals` and `agui_journal_events`,
      `agui_schema_version`) and its functions (`agui_save`, `agui_append`, `agui_save_append`,
      `agui_delete`) are created then, under a transaction-level advisory lock, so replicas starting
      together on an empty database migrate it once and the others wait for it.
    - `load` is one statement (the head joined with the messages from `since` on), so one round trip
      and one consistent snapshot.
    - `save` is one statement too: `agui_save` locks the thread's head row (`SELECT ... FOR UPDATE`),
      checks the fencing token and the version, and writes the change, all in the statement's
      transaction. The loser of a race gets `StoreConflict` (or `StaleClaim`) with nothing written.
    - Head records and messages are stored as the JSON text they were given, so they come back as is.
    - A journal append is one statement too, `agui_append`: it locks the journal's row, checks the seqs
      continue it (`ValueError` otherwise, nothing written), and writes the status in `agui_journals` and
      the events as one row of `agui_journal_events`, whatever their number (their seqs from `first_seq`
      to `last_seq`, their JSON one line each). A journal read is one statement: the status and the rows
      that hold the events asked for. A delete is `agui_delete`, one statement that locks the thread's
      head row before its messages go, as a save does, so no save lands half-deleted.
    - Every call ends within `timeout` (waiting for a connection included) or raises `StoreUnavailable`,
      even when the network delivers nothing and drops nothing (a partition): the caller stops waiting
      then, and the query is cancelled behind it. Each connection's `statement_timeout` is the same, so
      the server abandons what nobody waits for (a save blocked on a row lock, say). A database that
      cannot be reached, is read-only, or is out of disk raises `StoreUnavailable` naming which, and the
      connection that failed is closed, so that the store works again as soon as the database does.
    - After `aclose`, every call raises `RuntimeError`; `aclose` may be called again.

    Args:
        dsn: A libpq connection string or URL, e.g. `postgresql://user@host:5432/db`.
        min_size: Connections the pool keeps open.
        max_size: Connections the pool may open.
        timeout: Seconds one call may take in all before it fails as `StoreUnavailable`
            (`STORE_UNAVAILABLE`): while PostgreSQL is down or cut off, a request waits this long. The
            pool's own default wait for a connection, 30, would hold a client's request for half a minute.
        migration_timeout: Seconds the first call's schema migration may take (creating an index on a
            large table takes long); meanwhile every call still ends within `timeout`.
        notify: Whether a replica that follows a run another replica drives is woken by the run's appends
            (`watch_journal`: one more connection, for `LISTEN`, while it follows any); False to poll instead
            (behind a transaction-mode pooler, which notifications cannot pass: a probe finds that out too).
        **options: Passed to `psycopg_pool.AsyncConnectionPool` (e.g. `max_idle`; a `configure` runs after
            the store's own).

    Raises:
        ImportError: psycopg or psycopg_pool is missing (the `postgres` extra).
    """

    def __init__(
        self,
        dsn: str,
        *,
        min_size: int = 1,
        max_size: int = 10,
        timeout: float = DEFAULT_TIMEOUT,
        migration_timeout: float = DEFAULT_MIGRATION_TIMEOUT,
        notify: bool = True,
        **options: Any,
    ) -> None:
        try:
            from psycopg_pool import AsyncConnectionPool
        except ImportError as error:  # pragma: no cover - depends on what is installed
            raise ImportError(_INSTALL_HINT) from error
        self._deadline = Deadline(timeout, "PostgreSQL")
        self._migration_timeout = checked_timeout(migration_timeout)
        self._configure_also: Callable[[Any], Awaitable[None]] | None = options.pop("configure", None)
        self._pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            dsn,
            min_size=min_size,
            max_size=max_size,
            kwargs={"autocommit": True},
            open=False,
            name="agui-postgres",
            timeout=timeout,
            configure=self._configure,
            **options,
        )
        self._ready: asyncio.Task[None] | None = None
        self._closed = False
        self._dsn = dsn
        self._notifier = Notifier(self._listen_connection, self._probe, timeout) if notify else None

    async def load(self, thread_id: str, *, since: int | None = 0, until: int | None = None) -> StoredThread | None:
        """Return the thread's head and its messages from position `since` on (before `until`), or None."""
        keys = _load_keys(thread_id, since, until)
        return _stored(await self._rows("a load", _LOAD, keys), keys["since"])

    async def load_or_create(
        self, thread_id: str, change: ThreadChange, journal: JournalAppend | None = None, *, since: int | None = 0
    ) -> StoredThread | None:
        """The thread as `load` reads it; or, when it is absent, created by `change` with `journal` (None then).

        One pooled connection: the load's statement, and only for an absent thread the save's (`agui_save_append`
        with a journal); a thread another request created in between is read then.

        Raises:
            StoreConflict: The thread was created and deleted again meanwhile, each time it was looked at.
            ValueError: `journal` does not open its journal; nothing was written.
        """
        import psycopg

        keys = _load_keys(thread_id, since, None)
        if journal is not None:
            check_append(thread_id, journal.run_id, journal.events, last_seq=None, ended=False)
            statements = [(_SAVE_APPEND, _save_append_params(thread_id, change, journal, 0))]
        else:
            statements = [
                (_SAVE, _save_params(thread_id, change, 0, None, ANY_INCARNATION)),
                *_also(thread_id, change, 0),
            ]

        async def found_or_created(connection: Any) -> list[Any] | None:
            for _ in range(CREATE_ATTEMPTS):
                rows = list(await (await connection.execute(_LOAD, keys)).fetchall())
                if rows:
                    return rows
                try:
                    await _in_one_transaction(connection, statements)
                except psycopg.Error as error:
                    if error.sqlstate not in (_CONFLICT, _UNIQUE_VIOLATION):
                        raise
                    continue  # another request created it since the load: read it
                return None
            raise StoreConflict(thread_id, 0)

        try:
            rows = await self._call("a load", found_or_created)
        except psycopg.Error as error:
            refused = None if journal is None else _journal_refusal(error, thread_id, journal.run_id, journal.events)
            if refused is None:
                raise
            raise refused from None
        return None if rows is None else _stored(rows, keys["since"])

    async def find_message(self, thread_id: str, message_id: str) -> int | None:
        """The position of the thread's first message with this id, or None: one lookup in an index."""
        rows = await self._rows("a lookup", _FIND, (thread_id, message_id))
        return None if not rows or rows[0][0] is None else int(rows[0][0])

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
            ValueError: `keep` or a replaced position is past the thread's messages.
        """
        import psycopg

        params = _save_params(thread_id, change, expected_version, fence, incarnation)

        also = _also(thread_id, change, expected_version)

        async def saved(connection: Any) -> Any:
            return await _in_one_transaction(connection, [(_SAVE, params), *also])

        try:
            row = await self._call("a save", saved)
        except psycopg.Error as error:
            refused = _refusal(error.sqlstate, thread_id, change, (expected_version, fence, incarnation))
            if refused is None:
                raise
            raise refused from None
        assert row is not None
        return int(row[0])

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
        """`save` and `append_events` in one statement, `agui_save_append`: both written, or neither.

        Returns:
            The new version, and whether a stop was requested.

        Raises:
            ThreadGone, StaleClaim, StoreConflict, ValueError: As `save` and `append_events`; nothing was written.
        """
        import psycopg

        events = journal.events
        check_append(thread_id, journal.run_id, events, last_seq=None, ended=False)
        params = _save_append_params(thread_id, change, journal, expected_version, fence, incarnation)
        try:
            rows = await self._rows("a save", _SAVE_APPEND, params)
        except psycopg.Error as error:
            refused = _refusal(error.sqlstate, thread_id, change, (expected_version, fence, incarnation))
            refused = refused or _journal_refusal(error, thread_id, journal.run_id, events)
            if refused is None:
                raise
            raise refused from None
        return int(rows[0][0]), bool(rows[0][1])

    async def purge(
        self, older_than: timedelta, *, grace: timedelta = timedelta(0), now: datetime | None = None
    ) -> int:
        """Delete finished threads idle longer than `older_than`, and threads whose open turn expired `grace` ago.

        A finished thread has no open turn. One statement; returns how many
        threads were deleted. A save racing with it either lands first (and the thread is kept if it is
        no longer finished) or finds the thread gone (`StoreConflict`).
        """
        idle, expired = cutoffs(older_than, grace, now)

        async def purged(connection: Any) -> int:
            async with connection.transaction():
                deleted = await connection.execute(_PURGE, {"idle": idle, "expired": expired})
                count, threads, runs = await deleted.fetchone()
                if threads:
                    await connection.execute(_PURGE_EVENTS, (threads, runs))
            return int(count)

        return await self._call("a purge", purged)

    async def append_events(
        self, thread_id: str, run_id: str, events: Sequence[JournalEvent], *, ended: bool = False
    ) -> bool:
        """Append to the run's journal (created by the first append); return whether a stop was requested.

        One statement, `agui_append`, that writes one row: the seqs' order (and each event's JSON, one line) is
        checked here, their start against the journal's last seq in the database, under the journal row's lock.
        """
        import psycopg

        check_append(thread_id, run_id, events, last_seq=None, ended=False)
        first = events[0].seq if events else None
        params = (thread_id, run_id, first, len(events), pack_events(events), ended)
        try:
            rows = await self._rows("an append", _APPEND, params)
        except psycopg.Error as error:
            refused = _journal_refusal(error, thread_id, run_id, events)
            if refused is None:
                raise
            raise refused from None
        return bool(rows[0][0])

    async def read_events(self, thread_id: str, run_id: str, *, after: int = 0, limit: int = 1000) -> RunJournal | None:
        """The run's events with seq > `after`, at most `limit`, or None for no journal.

        One statement: the status and the rows that hold those events, and no other (a range of their key).
        """
        if limit < 0:
            raise ValueError(f"limit must not be negative, not {limit}")
        after, limit = min(max(after, 0), _LAST), min(limit, _LAST)
        params = {"thread": thread_id, "run": run_id, "after": after, "through": min(after + limit, _LAST)}
        rows = await self._rows("a journal read", _READ_EVENTS, {**params, "limit": limit})
        if not rows:
            return None
        last, ended, stop = rows[0][:3]
        events = unpack_rows([(row[3], row[4]) for row in rows if row[3] is not None], after=after, limit=limit)
        return RunJournal(events, ended, stop, last)

    def watch_journal(self, thread_id: str, run_id: str, wake: Callable[[], None]) -> Watch | None:
        """Call `wake` after each append to the journal, through one `LISTEN` connection; None with `notify=False`.

        The watch is `live` while notifications come; meanwhile (before the connection is made and probed, and
        while it is lost and made again) the watcher polls.
        """
        if self._notifier is None or self._closed:
            return None
        return self._notifier.watch(thread_id, run_id, wake)

    async def request_stop(self, thread_id: str, run_id: str) -> bool:
        """Ask the run to stop; False when there is no such journal or it already ended. One statement."""
        return bool(await self._rows("a stop request", _REQUEST_STOP, (thread_id, run_id)))

    async def list_threads(
        self, owner: str | None, *, before: str | None = None, limit: int = 100
    ) -> tuple[list[ThreadSummary], str | None]:
        """The threads of `owner`, newest first (then greatest id first), and the next page's cursor or None.

        One query on the index `(owner, saved_at DESC, thread_id DESC)`: a page reads its own rows only.
        """
        check_limit(limit)
        below = None if before is None else parse_cursor(before)
        where = "owner IS NULL" if owner is None else "owner = %(owner)s"
        query = _LIST.format(owner=where, below="" if below is None else _BELOW)
        params: dict[str, Any] = {"owner": owner, "count": min(limit, _LAST) + 1}
        if below is not None:
            params.update(at=below[0], id=below[1])
        rows = await self._rows("a listing", query, params)
        summaries = [
            ThreadSummary(thread_id, title, saved_at.astimezone(UTC), row_owner, json.loads(open_turn))
            for thread_id, title, saved_at, row_owner, open_turn in rows[:limit]
        ]
        last = summaries[-1] if len(rows) > limit else None
        return summaries, None if last is None else next_cursor(last.updated_at, last.thread_id)

    async def delete_thread(self, thread_id: str, *, incarnation: object = ANY_INCARNATION) -> bool:
        """Delete the thread, its messages, its head records and every journal of its runs: one statement.

        With `incarnation`, only that life of the thread: another is left whole (False).
        """
        check = incarnation is not ANY_INCARNATION
        life = incarnation if isinstance(incarnation, str) else None
        rows = await self._rows("a delete", _DELETE, (thread_id, check, life))
        return bool(rows[0][0])

    async def ping(self, *, write: bool = False) -> None:
        """Raise unless the database answers a trivial query; with `write`, unless it can be written too.

        The write check updates no row: a read-only database (a standby, `default_transaction_read_only`)
        refuses it all the same.
        """

        async def pinged(connection: Any) -> None:
            await connection.execute("SELECT 1")
            if write:
                await connection.execute("UPDATE agui_schema_version SET version = version WHERE false")

        await self._call("a ping", pinged)

    async def close(self) -> None:
        """Close the pool's connections."""
        await self.aclose()

    async def aclose(self) -> None:
        """Close the pool's connections; later calls raise `RuntimeError`."""
        if self._closed:
            return
        self._closed = True
        if self._notifier is not None:
            await self._notifier.aclose()
        if self._ready is not None and not self._ready.done():
            self._ready.cancel()
        await self._deadline.settle()
        await self._pool.close()

    async def _rows(self, what: str, query: str, params: Any) -> list[Any]:
        async def fetched(connection: Any) -> list[Any]:
            cursor = await connection.execute(query, params)
            return list(await cursor.fetchall())

        return await self._call(what, fetched)

    async def _call(self, what: str, operation: Callable[[Any], Awaitable[_T]]) -> _T:
        """`operation` on a pooled connection, within the store's deadline (`what` names it in the message).

        Raises:
            StoreUnavailable: Past the deadline, or PostgreSQL could not be used (`_unusable`).
        """
        return await self._deadline.run(self._on_connection(operation), what)

    async def _on_connection(self, operation: Callable[[Any], Awaitable[_T]]) -> _T:
        import psycopg

        try:
            await self._open()
            return await self._with_connection(operation)
        except psycopg.Error as error:
            reason = _unusable(error)
            if reason is None:
                raise  # the statement's own refusal (a conflict, a bad position), or a bug
            raise StoreUnavailable(f"PostgreSQL {reason} ({type(error).__name__})") from error

    async def _with_connection(self, operation: Callable[[Any], Awaitable[_T]]) -> _T:
        """`operation` on a pooled connection; one that failed for an outage is closed, and the pool drops it."""
        import psycopg

        async with self._pool.connection() as connection:
            try:
                return await operation(connection)
            except psycopg.Error as error:
                if _unusable(error) is not None and not connection.closed:
                    await connection.close()  # never used again: a session opened read-only stays so
                raise

    async def _configure(self, connection: Any) -> None:
        """Each new connection: the server abandons a statement once the caller's deadline has passed."""
        timeout = f"{round(self._deadline.seconds * 1000)}ms"
        await connection.execute("SELECT set_config('statement_timeout', %s, false)", (timeout,))
        if self._configure_also is not None:
            await self._configure_also(connection)

    async def _listen_connection(self) -> Any:
        """A connection of its own for `LISTEN` (not the pool's: it is held while anything is watched)."""
        import psycopg

        await self._open()  # the schema that notifies first
        async with asyncio.timeout(self._deadline.seconds):
            return await psycopg.AsyncConnection.connect(self._dsn, autocommit=True, application_name="agui-listen")

    async def _probe(self, name: str) -> None:
        """Notify `name` through the pool, the path appends take."""
        await self._rows("a notification probe", "SELECT pg_notify(%s, '')", (name,))

    async def _open(self) -> AsyncConnectionPool[Any]:
        if self._closed:
            raise RuntimeError("PostgresStore is closed")
        if self._ready is None or (self._ready.done() and self._ready.exception() is not None):
            self._ready = asyncio.ensure_future(self._start())
        try:
            await asyncio.shield(self._ready)
        except TimeoutError as error:
            message = f"PostgreSQL's schema migration did not end within {self._migration_timeout:g} s"
            raise StoreUnavailable(message) from error
        return self._pool

    async def _start(self) -> None:
        await self._pool.open(wait=False)
        async with asyncio.timeout(self._migration_timeout):
            await self._with_connection(lambda connection: migrate(connection, self._migration_timeout))


def _unusable(error: Exception) -> str | None:
    """What `error` says of the database when it is an outage (not reached, read-only, full), or None for any other.

    Said after "PostgreSQL", in `StoreUnavailable`'s message.
    """
    import psycopg

    sqlstate = getattr(error, "sqlstate", None) or ""
    if sqlstate == _READ_ONLY:
        return "cannot be written: the database is read-only"
    if sqlstate == _DISK_FULL:
        return "cannot be written: the disk is full"
    if sqlstate.startswith("53"):  # insufficient resources: memory, connections
        return "is out of resources"
    if isinstance(error, psycopg.OperationalError | psycopg.InterfaceError) or sqlstate.startswith(("08", "57", "58")):
        return "could not be reached or did not answer"
    return None


async def _in_one_transaction(connection: Any, statements: Sequence[tuple[str, Any]]) -> Any:
    """`statements` in one transaction; the first statement's first row, or None.

    A single statement goes alone: autocommit, no BEGIN and COMMIT to send.
    """
    first, *others = statements
    if not others:
        return await (await connection.execute(*first)).fetchone()
    async with connection.transaction():
        row = await (await connection.execute(*first)).fetchone()
        for statement, values in others:
            await connection.execute(statement, values)
    return row


def _load_keys(thread_id: str, since: int | None, until: int | None) -> dict[str, Any]:
    """`_LOAD`'s parameters: the messages from `since` (None: none) to `until` (None: the last), clipped."""
    from_position = _LAST if since is None else min(max(since, 0), _LAST)
    before = _LAST if until is None else min(max(until, 0), _LAST)
    return {"thread": thread_id, "since": from_position, "until": before}


def _stored(rows: Sequence[Any], since: int) -> StoredThread | None:
    """The thread `_LOAD`'s rows hold (its head on each, a message on each but for a thread of none), or None."""
    if not rows:
        return None
    first = rows[0]
    open_turn, applied = (json.loads(text) for text in first[3:5])
    updated_at = first[7].astimezone(UTC)
    head = ThreadHead(
        first[0],
        first[1],
        first[2],
        open_turn,
        applied,
        first[5],
        first[6],
        updated_at,
        first[8],
        first[9],
        grants=json.loads(first[10]),
    )
    start = min(since, head.message_count)
    messages = [StoredMessage(row[11], row[12], row[13]) for row in rows if row[11] is not None]
    return StoredThread(head, start, messages)


def _also(thread_id: str, change: ThreadChange, expected_version: int) -> list[tuple[str, tuple[str | None, ...]]]:
    """What `save` sets beside `agui_save`, in its transaction: a created thread's owner and life, a title, grants."""
    also: list[tuple[str, tuple[str | None, ...]]] = []
    if _creates(change, expected_version):
        also.append((_SET_CREATED, (change.owner, change.incarnation, thread_id)))
    if change.title is not KEEP:
        also.append((_SET_TITLE, (change.title, thread_id)))
    if change.grants is not KEEP:
        also.append((_SET_GRANTS, (_record(change.records(), "grants")[1], thread_id)))
    return also


def _save_append_params(
    thread_id: str,
    change: ThreadChange,
    journal: JournalAppend,
    expected_version: int,
    fence: int | None = None,
    incarnation: object = ANY_INCARNATION,
) -> tuple[Any, ...]:
    """The arguments of `agui_save_append`: `agui_save`'s, what `save` sets beside it, the append's."""
    events = journal.events
    return (
        *_save_params(thread_id, change, expected_version, fence, incarnation),
        _creates(change, expected_version),
        change.owner,
        change.incarnation,
        change.title is not KEEP,
        None if change.title is KEEP else change.title,
        *_record(change.records(), "grants"),
        journal.run_id,
        events[0].seq if events else None,
        len(events),
        pack_events(events),
        journal.ended,
    )


def _creates(change: ThreadChange, expected_version: int) -> bool:
    """Whether a save sets the owner and incarnation of the thread it creates (`agui_save` leaves them out)."""
    return expected_version == 0 and (change.owner is not None or change.incarnation is not None)


def _record(records: dict[str, JSONValue], name: str) -> tuple[bool, str | None]:
    if name not in records:
        return False, None
    # ASCII-escaped, like SQLite's copy: a lone surrogate from client JSON survives the round trip.
    return True, json.dumps(records[name])


def _save_params(
    thread_id: str, change: ThreadChange, expected_version: int, fence: int | None, incarnation: object
) -> tuple[Any, ...]:
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
        False,  # the retired `queued` record: never set, its column kept for the databases that have it
        None,
        turn_expiry(change.open_turn),
        incarnation is not ANY_INCARNATION,
        incarnation if isinstance(incarnation, str) else None,
        change.stamp,
    )


def _refusal(
    sqlstate: str | None, thread_id: str, change: ThreadChange, expected: tuple[int, int | None, object]
) -> Exception | None:
    """The protocol's exception for what `agui_save` refused, by the SQLSTATE it raised; None for any other error."""
    expected_version, fence, incarnation = expected
    if sqlstate == _GONE:
        return ThreadGone(thread_id, expected_version, incarnation if isinstance(incarnation, str) else None)
    if sqlstate == _STALE_CLAIM:
        return StaleClaim(thread_id, expected_version, fence or 0)
    if sqlstate in (_CONFLICT, _UNIQUE_VIOLATION):
        return StoreConflict(thread_id, expected_version)
    if sqlstate == _BAD_POSITION:
        return ValueError(f"{change.keep=} or a replaced position is outside the thread's messages")
    return None


def _journal_refusal(
    error: Exception, thread_id: str, run_id: str, events: Sequence[JournalEvent]
) -> ValueError | None:
    """The `ValueError` every store gives for what `agui_append` refused (its SQLSTATE), or None for any other error."""
    sqlstate = getattr(error, "sqlstate", None)
    if sqlstate not in (_JOURNAL_ENDED, _JOURNAL_SEQ):
        return None
    said = getattr(getattr(error, "diag", None), "message_primary", None)  # AG005 says the journal's last seq
    last = int(said or 0) if sqlstate == _JOURNAL_SEQ else None
    try:
        check_append(thread_id, run_id, events, last_seq=last, ended=sqlstate == _JOURNAL_ENDED)
    except ValueError as refusal:
        return refusal
    return ValueError(f"the journal of run {run_id!r} of thread {thread_id!r} changed under the append ({sqlstate})")
