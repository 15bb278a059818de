"""The invariants of issue 19 as stateful properties over the HTTP edge, on SQLite and on PostgreSQL.

Bounded for CI (about 25 s for both on the loaded 2-core development machine); run them longer with
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

from adapter import PostgresStore, SQLiteStore
from adapter.stores import TurnStore

EXAMPLES = int(os.environ.get("AGUI_INVARIANT_EXAMPLES", "150"))
STEPS = int(os.environ.get("AGUI_INVARIANT_STEPS", "30"))


def bounded(examples: int) -> settings:
    return settings(
        max_examples=examples,
        stateful_step_count=STEPS,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )


class SQLiteMachine(Machine):
    """Both replicas on one SQLite file."""

    def open_database(self) -> Callable[[], TurnStore]:
        folder = Path(tempfile.mkdtemp(prefix="agui-invariants-"))
        self.folders = [folder]
        return lambda: SQLiteStore(folder / "turns.db")

    def teardown(self) -> None:
        super().teardown()
        for folder in getattr(self, "folders", []):
            shutil.rmtree(folder, ignore_errors=True)


class PostgresMachine(Machine):
    """Both replicas on one PostgreSQL schema."""

    def open_database(self) -> Callable[[], TurnStore]:
        dsn = fresh_schema_dsn()
        return lambda: PostgresStore(dsn, min_size=1, max_size=4)


TestSQLite = SQLiteMachine.TestCase
TestSQLite.settings = bounded(EXAMPLES)


@pytest.mark.postgres
class TestPostgres(PostgresMachine.TestCase):  # type: ignore[misc, valid-type]
    settings = bounded(max(3, EXAMPLES // 3))  # a PostgreSQL round trip costs more than a SQLite one
