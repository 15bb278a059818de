"""The PostgreSQL server the `postgres` tests use: AGUI_TEST_POSTGRES_DSN, one fresh schema per caller,
and `every_store` for the tests that run on each shipped store.

In CI (`CI` set, as `.ci/run` does) a missing server fails those tests with the command that fixes it;
a plain local run skips them with the same command.
"""

from __future__ import annotations

import os
import uuid
from typing import Any
from urllib.parse import quote

import pytest
from externals import in_ci

from adapter.stores import MemoryStore, PostgresStore, SQLiteStore

FIX = ". .ci/postgres.sh && postgres_start  # then run pytest in that shell (it exports AGUI_TEST_POSTGRES_DSN)"


def base_dsn() -> str:
    """The test server's DSN; fails (in CI) or skips (locally) when there is none."""
    dsn = os.environ.get("AGUI_TEST_POSTGRES_DSN")
    if not dsn:
        message = f"the postgres tests need a PostgreSQL server in AGUI_TEST_POSTGRES_DSN: {FIX}"
        if in_ci():
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return dsn


def fresh_schema_dsn() -> str:
    """A DSN whose search_path is a new, empty schema: a store opened on it starts from nothing."""
    import psycopg

    dsn = base_dsn()
    schema = f"agui_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute(f"CREATE SCHEMA {schema}")
    separator = "&" if "?" in dsn else "?"
    return f"{dsn}{separator}options={quote(f'-csearch_path={schema}')}"


def every_store(**postgres_options: Any) -> list[Any]:
    """Parameters that make each shipped store from `tmp_path`: memory, a SQLite file, a fresh Postgres schema."""
    return [
        pytest.param(lambda tmp_path: MemoryStore(), id="memory"),
        pytest.param(lambda tmp_path: SQLiteStore(tmp_path / "turns.db"), id="sqlite"),
        pytest.param(
            lambda tmp_path: PostgresStore(fresh_schema_dsn(), **postgres_options),
            id="postgres",
            marks=pytest.mark.postgres,
        ),
    ]
