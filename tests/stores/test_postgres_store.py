from __future__ import annotations

import sys

import pytest

from adapter import PostgresStore


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
    from adapter.stores._postgres import _MIGRATIONS

    dsn = fresh_schema_dsn()
    with psycopg.connect(dsn, autocommit=True) as connection:  # the schema as version 1 left it
        connection.execute("CREATE TABLE agui_schema_version (version integer NOT NULL)")
        connection.execute(_MIGRATIONS[1])
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
