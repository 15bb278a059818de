from __future__ import annotations

import asyncio
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from pg import fresh_schema_dsn

from adapter.stores import PostgresStore, SQLiteStore, ThreadChange
from adapter.stores.__main__ import main
from adapter.stores._retention import parse_duration

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("text", "expected"),
    [("30d", timedelta(days=30)), ("12h", timedelta(hours=12)), ("90m", timedelta(minutes=90)), ("2w", timedelta(14))],
)
def test_durations(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["30", "d", "-1d", "3y", ""])
def test_a_bad_duration_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


def finished_thread(store: SQLiteStore | PostgresStore) -> None:
    async def save() -> None:
        await store.save("t1", ThreadChange(open_turn=None), expected_version=0)
        await store.close()

    asyncio.run(save())


def loads(store: SQLiteStore | PostgresStore) -> bool:
    async def load() -> bool:
        try:
            return await store.load("t1") is not None
        finally:
            await store.close()

    return asyncio.run(load())


# Sync tests: the command runs its own event loop, as it does from a shell.
def test_purge_on_a_sqlite_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "turns.db"
    finished_thread(SQLiteStore(db))

    kept = subprocess.run(
        [sys.executable, "-m", "adapter.stores", "purge", "--db", str(db), "--older-than", "30d"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    main(["purge", "--db", f"sqlite://{db}", "--older-than", "0s"])

    assert kept.stdout == "purged 0 threads\n"
    assert capsys.readouterr().out == "purged 1 thread\n"
    assert not loads(SQLiteStore(db))


@pytest.mark.postgres
def test_purge_on_postgres(capsys: pytest.CaptureFixture[str]) -> None:
    dsn = fresh_schema_dsn()
    finished_thread(PostgresStore(dsn))

    main(["purge", "--db", dsn, "--older-than", "0s"])

    assert capsys.readouterr().out == "purged 1 thread\n"
    assert not loads(PostgresStore(dsn))
