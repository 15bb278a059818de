"""What only PostgreSQL does: the migration, and saves that race in separate transactions."""

from __future__ import annotations

import asyncio
import sys
import time
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

    assert old is not None and (old.head.version, old.head.owner) == (3, None)
    assert new is not None and new.head.owner == "alice"


async def blocked_behind(holder: AsyncConnection[Any], racer: asyncio.Future[int], dsn: str) -> None:
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
