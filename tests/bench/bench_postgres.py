"""PostgresStore against SQLiteStore and the bare-Starlette baseline; two replicas on one Postgres against one.

    AGUI_TEST_POSTGRES_DSN=postgresql://... python tests/bench/bench_postgres.py [--round-trips 40] [--check]

Servers run under uvicorn in processes of their own (`_server.py`), the client is httpx over loopback:

- the frontend-tool round trip (interrupt, then resume with the snapshot, success), wall ms, on an
  adapter with PostgresStore, one with SQLiteStore, and the baseline replaying the adapter's events;
  alternating, medians. Target: Postgres within 2x SQLite.
- concurrency: `--concurrent` round trips at once (each on its own thread), all on one Postgres
  replica, then spread over two replicas on the same database; wall seconds for the batch.

The database is a fresh schema in the server of AGUI_TEST_POSTGRES_DSN (`. .ci/postgres.sh &&
postgres_start` starts one). Compare ratios, not absolute numbers: the footer gives the load average.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from urllib.parse import quote

from _server import Server
from bench_adapter import Row, alternate, capture, median, round_trip, table

TARGET = 2.0  # Postgres round trip within 2x SQLite's


def fresh_schema(dsn: str) -> str:
    import psycopg

    schema = f"agui_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute(f"CREATE SCHEMA {schema}")
    return f"{dsn}{'&' if '?' in dsn else '?'}options={quote(f'-csearch_path={schema}')}"


async def batch(servers: list[Server], count: int) -> float:
    """Wall seconds for `count` round trips at once, dealt round-robin over `servers`."""
    started = time.perf_counter()
    await asyncio.gather(*(round_trip(servers[i % len(servers)]) for i in range(count)))
    return time.perf_counter() - started


async def main_async(args: argparse.Namespace) -> int:
    dsn = os.environ.get("AGUI_TEST_POSTGRES_DSN")
    if not dsn:
        print("needs AGUI_TEST_POSTGRES_DSN: . .ci/postgres.sh && postgres_start", file=sys.stderr)
        return 2
    schema_dsn = fresh_schema(dsn)
    with tempfile.TemporaryDirectory(prefix="agui-bench-") as tmp:
        postgres = Server("adapter", "--db", schema_dsn)
        sqlite = Server("adapter", "--db", str(Path(tmp, "turns.db")))
        servers = [postgres, sqlite]
        try:
            for server in servers:
                await server.wait_ready()
            events = Path(tmp, "events.json")
            events.write_text(json.dumps(await capture(sqlite)))
            baseline = Server("baseline", "--events", str(events))
            servers.append(baseline)
            await baseline.wait_ready()
            load, started = os.getloadavg()[0], time.perf_counter()
            # `alternate` keys samples by kind: measure Postgres and SQLite against the baseline in turn.
            postgres.kind, sqlite.kind = "postgres", "sqlite"
            samples = await alternate([postgres, sqlite, baseline], round_trip, warmup=10, reps=args.round_trips)
            pg, lite, base = (median(samples[k], "wall_ms") for k in ("postgres", "sqlite", "baseline"))
            second = Server("adapter", "--db", schema_dsn)
            servers.append(second)
            await second.wait_ready()
            await batch([postgres, second], 20)  # warm both pools
            one = min([await batch([postgres], args.concurrent) for _ in range(3)])
            two = min([await batch([postgres, second], args.concurrent) for _ in range(3)])
            rows = [
                Row("round trip: Postgres/SQLite", "wall ms / round trip", pg, lite, target=("<=", TARGET)),
                Row("round trip: Postgres/baseline", "wall ms / round trip", pg, base),
                Row("round trip: SQLite/baseline", "wall ms / round trip", lite, base),
                Row(f"{args.concurrent} at once: 2 replicas/1", "wall s / batch", two, one),
            ]
            print(table(rows))
            print(
                f"\n(medians of {args.round_trips} round trips per server, alternating; batches: best of 3; "
                f"{time.perf_counter() - started:.1f} s; load average before: {load:.2f} on {os.cpu_count()} CPUs)"
            )
        finally:
            for server in servers:
                await server.aclose()
    missed = [row for row in rows if row.met is False]
    print("all targets met" if not missed else "missed: " + ", ".join(r.workload for r in missed))
    return 1 if args.check and missed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--round-trips", type=int, default=40, help="round trips measured per server")
    parser.add_argument("--concurrent", type=int, default=100, help="round trips at once in the replica batch")
    return asyncio.run(main_async(parser.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
