"""The invariants of issues 19 and 27 as stateful properties over the HTTP edge, on SQLite and on PostgreSQL.

`Machine` (issue 19): principals, two replicas, crashes. `RecordMachine` (issue 27): a hostile upstream and
clients that rewrite, branch and repeat ids; one record of what happened. Bounded for CI (about 20 s and 15 s
on SQLite on the loaded 2-core development machine); run them longer with
`AGUI_INVARIANT_EXAMPLES=2000 AGUI_INVARIANT_STEPS=60`, and add `--hypothesis-show-statistics` to see
how often each outcome and each crash happened.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from invariant_machine import Machine
from pg import fresh_schema_dsn
from record_machine import RecordMachine

from adapter import PostgresStore, SQLiteStore
from adapter.stores import TurnStore

EXAMPLES = int(os.environ.get("AGUI_INVARIANT_EXAMPLES", "150"))
RECORD_EXAMPLES = max(3, EXAMPLES * 4 // 5)
"""The record machine's upstream makes each step dearer: fewer examples in the same time."""
STEPS = int(os.environ.get("AGUI_INVARIANT_STEPS", "30"))


def bounded(examples: int) -> settings:
    return settings(
        max_examples=examples,
        stateful_step_count=STEPS,
        suppress_health_check=[*settings().suppress_health_check, HealthCheck.filter_too_much],
    )


class OnSQLite:
    """One SQLite file, removed at teardown."""

    folders: list[Path]

    def open_database(self) -> Callable[[], TurnStore]:
        folder = Path(tempfile.mkdtemp(prefix="agui-invariants-"))
        self.folders = [folder]
        return lambda: SQLiteStore(folder / "turns.db")

    def teardown(self) -> None:
        super().teardown()  # type: ignore[misc]
        for folder in getattr(self, "folders", []):
            shutil.rmtree(folder, ignore_errors=True)


class OnPostgres:
    """One fresh PostgreSQL schema."""

    def open_database(self) -> Callable[[], TurnStore]:
        dsn = fresh_schema_dsn()
        return lambda: PostgresStore(dsn, min_size=1, max_size=4)


class SQLiteMachine(OnSQLite, Machine):
    """Both replicas on one SQLite file."""


class PostgresMachine(OnPostgres, Machine):
    """Both replicas on one PostgreSQL schema."""


class SQLiteRecordMachine(OnSQLite, RecordMachine):
    """The hostile upstream and the rewriting clients, on one SQLite file."""


class PostgresRecordMachine(OnPostgres, RecordMachine):
    """The hostile upstream and the rewriting clients, on one PostgreSQL schema."""


TestSQLite = SQLiteMachine.TestCase
TestSQLite.settings = bounded(EXAMPLES)


@pytest.mark.postgres
class TestPostgres(PostgresMachine.TestCase):  # type: ignore[misc, valid-type]
    settings = bounded(max(3, EXAMPLES // 3))  # a PostgreSQL round trip costs more than a SQLite one


TestRecordSQLite = SQLiteRecordMachine.TestCase
TestRecordSQLite.settings = bounded(RECORD_EXAMPLES)


@pytest.mark.postgres
class TestRecordPostgres(PostgresRecordMachine.TestCase):  # type: ignore[misc, valid-type]
    settings = bounded(max(3, RECORD_EXAMPLES // 3))
