"""Store operations from the command line.

    python -m adapter.stores purge --db URL --older-than 30d [--grace 7d]

`--db` is a `postgresql://` URL or an existing SQLite file (a path, or `sqlite:///path`). `purge` deletes
the threads that finished (no open turn) and were last written longer ago than
`--older-than`, and the threads whose open turn expired longer ago than `--grace` (default 0), with
their runs' journals; and every run's journal last appended to longer ago than `--older-than`.
Durations are a number and a unit: s (seconds), m (minutes), h (hours), d (days) or w (weeks).

A mistake (a database that does not exist, a bad duration, a missing extra, a database that does not
answer) gets one line on stderr and exit status 2 (usage) or 1 (the database), never a traceback. The
purge may take `PURGE_TIMEOUT` seconds (a store call's own deadline is seconds: a purge deletes much more).
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import sys
from datetime import timedelta
from pathlib import Path
from typing import Final, NoReturn

from adapter.stores._postgres import PostgresStore
from adapter.stores._protocol import StoreUnavailable, TurnStore
from adapter.stores._retention import parse_duration
from adapter.stores._sqlite import SQLiteStore

UNITS = "s (seconds), m (minutes), h (hours), d (days) or w (weeks)"
PURGE_TIMEOUT: Final = 3600.0


class StoreCommandError(Exception):
    """A mistake the command reports in one line: the message says what is wrong and how to fix it."""


def open_store(url: str) -> TurnStore:
    """A PostgresStore for a `postgresql://` URL, else a SQLiteStore on the file (`sqlite:///` optional).

    Raises:
        StoreCommandError: The SQLite file or its folder does not exist, or the `postgres` extra is missing.
    """
    if url.startswith(("postgresql://", "postgres://")):
        try:
            return PostgresStore(url, min_size=1, max_size=1, timeout=PURGE_TIMEOUT)
        except ImportError as missing:
            raise StoreCommandError(str(missing)) from None
    path = Path(url.removeprefix("sqlite://"))
    if not path.parent.is_dir():
        raise StoreCommandError(f"no folder {str(path.parent)!r} for the SQLite database {str(path)!r}")
    if not path.is_file():  # opening it would create an empty database, and purge would report 0
        raise StoreCommandError(f"no SQLite database at {str(path)!r}: check --db")
    return SQLiteStore(path, timeout=PURGE_TIMEOUT)


async def _purge(url: str, older_than: timedelta, grace: timedelta) -> int:
    store = open_store(url)
    try:
        if isinstance(store, PostgresStore):
            await _connect_once(url)
        return await store.purge(older_than, grace=grace)
    finally:
        await store.close()


async def _connect_once(url: str) -> None:
    """Fail at once with the server's reason; the pool would retry quietly for 30 s, then only say it timed out."""
    import psycopg

    connection = await psycopg.AsyncConnection.connect(url, connect_timeout=10)
    await connection.close()


def _duration(text: str) -> timedelta:
    try:
        return parse_duration(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration: a number and {UNITS}, e.g. 30d") from None


class _Parser(argparse.ArgumentParser):
    """Reports a usage mistake in one line, with where to read more, instead of the whole usage text."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m adapter.stores", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    purge = commands.add_parser(
        "purge",
        help="delete finished threads and expired turns",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    purge.add_argument("--db", required=True, help="a postgresql:// URL or an existing SQLite file")
    purge.add_argument("--older-than", required=True, type=_duration, help=f"idle age: a number and {UNITS}")
    purge.add_argument("--grace", default=timedelta(0), type=_duration, help="time after a turn's expiry, e.g. 7d")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one operation; return the exit status."""
    args = _parser().parse_args(argv)
    try:
        deleted = asyncio.run(_purge(args.db, args.older_than, args.grace))
    except StoreCommandError as mistake:
        print(f"python -m adapter.stores purge: error: {mistake}", file=sys.stderr)
        return 2
    except _DATABASE_ERRORS as failed:
        print(f"python -m adapter.stores purge: the database failed: {_one_line(failed)}", file=sys.stderr)
        return 1
    print(f"purged {deleted} thread{'s' if deleted != 1 else ''}")
    return 0


def _database_errors() -> tuple[type[Exception], ...]:
    try:
        import psycopg
    except ImportError:
        return (OSError, sqlite3.Error, StoreUnavailable)
    return (OSError, sqlite3.Error, StoreUnavailable, psycopg.Error)


_DATABASE_ERRORS: Final = _database_errors()


def _one_line(error: Exception) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    return f"{type(error).__name__}: {text}"


if __name__ == "__main__":
    sys.exit(main())
