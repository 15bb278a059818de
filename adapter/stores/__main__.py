"""Store operations from the command line.

    python -m adapter.stores purge --db URL --older-than 30d [--grace 7d]

`--db` is a `postgresql://` URL or a SQLite file (a path, or `sqlite:///path`). `purge` deletes the
threads that finished (no open turn, no queued answers) and were last written longer ago than
`--older-than`, and the threads whose open turn expired longer ago than `--grace` (default 0).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from datetime import timedelta

from adapter.stores._postgres import PostgresStore
from adapter.stores._retention import parse_duration
from adapter.stores._sqlite import SQLiteStore


def open_store(url: str) -> PostgresStore | SQLiteStore:
    """A PostgresStore for a `postgresql://` URL, else a SQLiteStore on the file (`sqlite:///` optional)."""
    if url.startswith(("postgresql://", "postgres://")):
        return PostgresStore(url, min_size=1, max_size=1)
    return SQLiteStore(url.removeprefix("sqlite://"))


async def _purge(url: str, older_than: timedelta, grace: timedelta) -> int:
    store = open_store(url)
    try:
        return await store.purge(older_than, grace=grace)
    finally:
        await store.close()


def main(argv: list[str] | None = None) -> int:
    """Run one operation; return the exit status."""
    parser = argparse.ArgumentParser(prog="python -m adapter.stores", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    purge = commands.add_parser("purge", help="delete finished threads and expired turns")
    purge.add_argument("--db", required=True, help="a postgresql:// URL or a SQLite file")
    purge.add_argument("--older-than", required=True, type=parse_duration, help="idle age, e.g. 30d, 12h")
    purge.add_argument("--grace", default=timedelta(0), type=parse_duration, help="after expiry, e.g. 7d")
    args = parser.parse_args(argv)
    deleted = asyncio.run(_purge(args.db, args.older_than, args.grace))
    print(f"purged {deleted} thread{'s' if deleted != 1 else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
