"""What only PostgreSQL does: the migration, and saves that race in separate transactions."""

from __future__ import annotations

import asyncio
import sys
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pytest

from adapter.stores import PostgresStore, StoreConflict, ThreadChange

if TYPE_CHECKING:
    from psycopg import AsyncConnection

_BOUND = 10.0  # seconds a racing save may take to reach the lock it waits on
# The save a racing replica made and has not committed yet: `agui_save` as the store calls it, with no messages.
_HOLD = """
    SELECT agui_save(%(thread)s, %(expected)s, NULL, %(claim)s, NULL, '{}', '{}', '{}', '{}', '{}', '{}', '{}',
                     true, %(open)s, false, NULL, false, NULL, NULL)
"""


def test_without_the_extra_constructing_it_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg_pool", None)  # as if `pip install 'agui-adapter[postgres]'` never ran

    with pytest.raises(ImportError, match=r"pip install 'agui-adapter\[postgres\]'"):
        PostgresStore("postgresql://nowhere/db")


async def test_after_aclose_every_call_is_refused() -> None:
    store = PostgresStore("postgresql://127.0.0.1:1/never-opened")

    await store.aclose()
    await store.aclose()

    with pytest.raises(RuntimeError, match="closed"):
        await store.load("t1")


@pytest.mark.postgres
async def test_a_version_1_database_gains_the_owner_column_and_its_threads_stay_unowned() -> None:
    import psycopg
    from pg import fresh_schema_dsn

    from adapter.stores import ThreadChange

    # private on purpose: replays the schema's history step by step
    from adapter.stores._postgres_schema import MIGRATIONS

    dsn = fresh_schema_dsn()
    with psycopg.connect(dsn, autocommit=True) as connection:  # the schema as version 1 left it
        connection.execute("CREATE TABLE agui_schema_version (version integer NOT NULL)")
        connection.execute(MIGRATIONS[1])
        connection.execute("INSERT INTO agui_schema_version (version) VALUES (1)")
        connection.execute(
            "INSERT INTO agui_threads (thread_id, version, claim, message_count) VALUES ('old', 3, 0, 0)"
        )
    store = PostgresStore(dsn)
    try:
        old = await store.load("old")
        await store.save("new", ThreadChange(owner="alice"), expected_version=0)
        new = await store.load("new")
    finally:
        await store.close()

    assert old is not None
    assert (old.head.version, old.head.owner) == (3, None)
    assert new is not None
    assert new.head.owner == "alice"


async def blocked_behind(holder: AsyncConnection[Any], racer: asyncio.Future[Any], dsn: str) -> None:
    """Wait until a backend waits on a lock that `holder`'s open transaction holds."""
    import psycopg

    pid = holder.info.backend_pid
    deadline = time.monotonic() + _BOUND
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as watcher:
        while time.monotonic() < deadline:
            assert not racer.done(), f"the racing save did not wait for the open transaction: {racer.result()!r}"
            cursor = await watcher.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))", (pid,)
            )
            row = await cursor.fetchone()
            if row is not None and row[0] > 0:
                return
            await asyncio.sleep(0.01)
    pytest.fail("the racing save never reached the lock")


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("version", "change"),
    [
        pytest.param(1, ThreadChange(claim=True), id="two-claims"),
        pytest.param(0, ThreadChange(open_turn={"n": 2}), id="two-creators"),
        pytest.param(0, ThreadChange(open_turn={"n": 2}, owner="bob"), id="two-creators-owned"),
    ],
)
async def test_a_save_that_waited_for_a_racing_commit_at_its_version_conflicts(
    version: int, change: ThreadChange
) -> None:
    """The loser of a real race between two transactions gets StoreConflict: never a second winner, never a raw error.

    The first save is held open on its own connection, the second is started at the same version and
    reaches the lock the first holds, and only then does the first commit.
    """
    import psycopg
    from pg import fresh_schema_dsn

    dsn = fresh_schema_dsn()
    store = PostgresStore(dsn)
    try:
        if version:
            await store.save("t1", ThreadChange(open_turn={"n": 1}), expected_version=0)
        await store.ping()  # the schema exists before the raw connection uses it
        async with await psycopg.AsyncConnection.connect(dsn) as holder:
            await holder.execute(
                _HOLD, {"thread": "t1", "expected": version, "claim": bool(version), "open": '"first"'}
            )
            racer = asyncio.ensure_future(store.save("t1", change, expected_version=version))
            await blocked_behind(holder, racer, dsn)
            await holder.commit()
            with pytest.raises(StoreConflict):
                await racer
        loaded = await store.load("t1", since=None)
    finally:
        await store.close()

    assert loaded is not None
    assert (loaded.head.version, loaded.head.open_turn, loaded.head.owner) == (version + 1, "first", None)
    assert loaded.head.claim == int(change.claim)  # the first claimant's claim, counted once


@pytest.mark.postgres
async def test_a_version_3_database_gains_titles_journals_and_its_threads_keep_their_save_time() -> None:
    import psycopg
    from pg import fresh_schema_dsn

    from adapter.stores import JournalEvent

    # private on purpose: replays the schema's history step by step
    from adapter.stores._postgres_schema import MIGRATIONS

    dsn = fresh_schema_dsn()
    with psycopg.connect(dsn, autocommit=True) as connection:  # the schema as version 3 left it
        connection.execute("CREATE TABLE agui_schema_version (version integer NOT NULL)")
        for version in (1, 2, 3):
            connection.execute(MIGRATIONS[version])
            connection.execute("INSERT INTO agui_schema_version (version) VALUES (%s)", (version,))
        connection.execute(
            "INSERT INTO agui_threads (thread_id, version, claim, message_count, owner, saved_at)"
            " VALUES ('old', 3, 0, 0, 'al', '2024-05-01T10:00:00.123456+00:00')"
        )
    store = PostgresStore(dsn)
    try:
        await store.save("new", ThreadChange(owner="al", title="New"), expected_version=0)
        await store.append_events("old", "r1", [JournalEvent(1, "{}")])
        listed, after = await store.list_threads("al")
        journal = await store.read_events("old", "r1")
    finally:
        await store.close()

    assert [(s.thread_id, s.title) for s in listed] == [("new", "New"), ("old", None)]
    assert after is None
    assert listed[1].updated_at == datetime(2024, 5, 1, 10, 0, 0, 123456, tzinfo=UTC)
    assert journal is not None
    assert journal.last_seq == 1


@pytest.mark.postgres
async def test_a_version_5_database_gains_grants_and_its_threads_have_none() -> None:
    import psycopg
    from pg import fresh_schema_dsn

    # private on purpose: replays the schema's history step by step
    from adapter.stores._postgres_schema import MIGRATIONS

    dsn = fresh_schema_dsn()
    with psycopg.connect(dsn, autocommit=True) as connection:  # the schema as version 5 left it
        connection.execute("CREATE TABLE agui_schema_version (version integer NOT NULL)")
        for version in range(1, 6):
            connection.execute(MIGRATIONS[version])
            connection.execute("INSERT INTO agui_schema_version (version) VALUES (%s)", (version,))
        connection.execute(
            "SELECT agui_save('old', 0, NULL, false, NULL, '{}', '{}', '{}', '{}', '{}', '{}', '{}',"
            " true, '{\"n\": 1}', false, NULL, false, NULL, NULL)"
        )
    grant = [{"tool": "t", "grantedBy": "al", "grantedAt": "2026-12-06T20:00:00+00:00"}]
    store = PostgresStore(dsn)
    try:
        old = await store.load("old", since=None)
        await store.save("old", ThreadChange(grants=grant), expected_version=1)
        granted = await store.load("old", since=None)
    finally:
        await store.close()

    assert old is not None
    assert (old.head.open_turn, old.head.grants) == ({"n": 1}, None)
    assert granted is not None
    assert (granted.head.open_turn, granted.head.grants) == ({"n": 1}, grant)


@pytest.mark.postgres
async def test_threads_saved_at_one_moment_are_listed_by_id_greatest_first_whatever_the_collation() -> None:
    """Ids in code point order (Python's, SQLite's), not the database's locale order: `COLLATE "C"`."""
    import psycopg
    from pg import fresh_schema_dsn

    tied = ["B", "a", "é", "Z", "b", "a|b", "😀"]
    dsn = fresh_schema_dsn()
    store = PostgresStore(dsn)
    try:
        for thread_id in tied:
            await store.save(thread_id, ThreadChange(owner="alice"), expected_version=0)
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as connection:
            await connection.execute("UPDATE agui_threads SET saved_at = '2024-05-01T10:00:00.123456+00:00'")
        pages = []
        before: str | None = None
        while True:
            page, before = await store.list_threads("alice", before=before, limit=2)
            pages.append([summary.thread_id for summary in page])
            if before is None:
                break
    finally:
        await store.close()

    assert [thread for page in pages for thread in page] == sorted(tied, reverse=True)


@pytest.mark.postgres
async def test_an_append_racing_a_delete_leaves_no_event_of_the_deleted_journal() -> None:
    """The journal's row goes before its events: an append that waited for the delete finds no journal."""
    import psycopg
    from pg import fresh_schema_dsn

    from adapter.stores import JournalEvent

    dsn = fresh_schema_dsn()
    store = PostgresStore(dsn)
    try:
        await store.append_events("t1", "r1", [JournalEvent(1, "{}")])
        async with await psycopg.AsyncConnection.connect(dsn) as holder:
            # An append in flight: it holds the journal's row, and its event is not committed yet.
            await holder.execute("SELECT agui_append('t1', 'r1', 2, 1, '{}', false)")
            racer = asyncio.ensure_future(store.delete_thread("t1"))
            await blocked_behind(holder, racer, dsn)
            await holder.commit()
            assert await racer is False
        async with await psycopg.AsyncConnection.connect(dsn) as reader:
            cursor = await reader.execute("SELECT count(*) FROM agui_journal_events")
            left = await cursor.fetchone()
        fresh = await store.append_events("t1", "r1", [JournalEvent(1, "{}")])
    finally:
        await store.close()

    assert left == (0,)
    assert fresh is False


@pytest.mark.postgres
async def test_at_version_9_a_replica_not_yet_upgraded_still_saves_and_appends_with_the_functions_it_knows() -> None:
    """Version 9 adds `agui_save_append` beside `agui_save` and `agui_append`, which a version-8 replica still calls."""
    import psycopg
    from pg import fresh_schema_dsn

    from adapter.stores import JournalAppend, JournalEvent

    dsn = fresh_schema_dsn()
    store = PostgresStore(dsn)
    try:
        await store.save_and_append(
            "t1",
            ThreadChange(owner="al", incarnation="life"),
            JournalAppend("r1", [JournalEvent(1, "{}")]),
            expected_version=0,
        )
        with psycopg.connect(dsn, autocommit=True) as old_replica:  # schema 6's save, schema 8's append
            old_replica.execute(
                "SELECT agui_save('t1', 1, NULL, false, NULL, '{}', '{}', '{}', '{}', '{m}', '{user}', '{\"x\"}',"
                " false, NULL, false, NULL, false, NULL, NULL, true, 'life', 'stamp')"
            )
            old_replica.execute("SELECT agui_append('t1', 'r1', 2, 1, '{}', true)")
            (version,) = old_replica.execute("SELECT max(version) FROM agui_schema_version").fetchone() or (None,)
        loaded, journal = await store.load("t1"), await store.read_events("t1", "r1")
    finally:
        await store.close()

    assert version == 9
    assert loaded is not None
    assert (loaded.head.version, loaded.head.owner, loaded.head.stamp) == (2, "al", "stamp")
    assert [m.id for m in loaded.messages] == ["m"]
    assert journal is not None
    assert (journal.last_seq, journal.ended) == (2, True)
