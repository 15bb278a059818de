from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from pg import fresh_schema_dsn

from adapter.stores import PostgresStore, SQLiteStore, ThreadChange
from adapter.stores.__main__ import main  # the command, run in this process as well as from a shell

# Private on purpose: the duration parser's cases, one by one, below the command that reports its errors.
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


def purge(*args: str, tmp_path: Path, prelude: str = "") -> subprocess.CompletedProcess[str]:
    """`python -m adapter.stores purge ARGS` from a shell (after `prelude`, Python run first)."""
    code = (
        f"{prelude}\nimport sys, runpy; sys.argv = ['x', 'purge', *sys.argv[1:]]\n"
        "runpy.run_module('adapter.stores', run_name='__main__', alter_sys=True)"
    )
    return subprocess.run(
        [sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )


def one_line_error(done: subprocess.CompletedProcess[str], status: int) -> str:
    assert (done.returncode, done.stdout) == (status, ""), done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    return done.stderr


def test_a_sqlite_file_that_does_not_exist_is_refused_and_not_created(tmp_path: Path) -> None:
    typo = tmp_path / "turn.db"

    error = one_line_error(purge("--db", str(typo), "--older-than", "30d", tmp_path=tmp_path), 2)

    assert f"no SQLite database at '{typo}'" in error
    assert not typo.exists()


def test_a_sqlite_file_in_a_missing_folder_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "nowhere" / "turns.db"

    error = one_line_error(purge("--db", f"sqlite://{path}", "--older-than", "30d", tmp_path=tmp_path), 2)

    assert f"no folder '{path.parent}'" in error


@pytest.mark.parametrize("option", ["--older-than", "--grace"])
def test_a_bad_duration_names_the_units(option: str, tmp_path: Path) -> None:
    db = tmp_path / "turns.db"
    finished_thread(SQLiteStore(db))
    args = ["--db", str(db), "--older-than", "30d", option, "30days"]

    error = one_line_error(purge(*args, tmp_path=tmp_path), 2)

    assert "'30days' is not a duration" in error
    assert all(unit in error for unit in ("s (seconds)", "m (minutes)", "h (hours)", "d (days)", "w (weeks)"))


def test_help_names_the_units(tmp_path: Path) -> None:
    done = purge("--help", tmp_path=tmp_path)

    assert done.returncode == 0
    assert "s (seconds), m (minutes), h (hours), d (days) or w (weeks)" in " ".join(done.stdout.split())


def test_a_postgres_url_without_the_extra_gives_the_install_command(tmp_path: Path) -> None:
    without_extra = "import sys; sys.modules['psycopg_pool'] = None  # as if the postgres extra were not installed"
    args = ["--db", "postgresql://agui@db/agui", "--older-than", "30d"]

    error = one_line_error(purge(*args, tmp_path=tmp_path, prelude=without_extra), 2)

    assert "pip install 'agui-adapter[postgres]'" in error


def test_a_file_that_is_not_a_database_fails_in_one_line(tmp_path: Path) -> None:
    db = tmp_path / "notes.txt"
    db.write_text("not a database " * 100)

    error = one_line_error(purge("--db", str(db), "--older-than", "30d", tmp_path=tmp_path), 1)

    assert "the database failed" in error


def test_a_postgres_server_that_refuses_fails_at_once_in_one_line(tmp_path: Path) -> None:
    with socket.socket() as closed:  # a port with nobody listening
        closed.bind(("127.0.0.1", 0))
        url = f"postgresql://agui@127.0.0.1:{closed.getsockname()[1]}/agui"

    error = one_line_error(purge("--db", url, "--older-than", "30d", tmp_path=tmp_path), 1)

    assert "the database failed: OperationalError: connection failed" in error
