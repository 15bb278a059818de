"""Real replicas on one PostgreSQL database: uvicorn processes on free ports, one store, one resume gate.

Each replica is tests/replica_server.py in its own process; its `pay` tool journals every execution to a
file, so a test counts executions across processes. Waits poll GET /health, never fixed sleeps; the one
sleep is the idle time the keep-alive test is about.

Concurrent requests go through `every`, which lets each of them end before the test does: a failure leaves
none running into teardown, where the closed client and event loop would leak their sockets.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Iterable, Iterator
from http.client import HTTPConnection
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from agui import Client, Reply, resolved, run_input
from pg import fresh_schema_dsn
from replica_process import Replica, free_port, until, wait_until

from adapter.stores._postgres_schema import SCHEMA_VERSION  # private on purpose: the migrations to expect

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
T = TypeVar("T")
_BOUND = 120.0  # seconds a replica may take to start, stop or answer on a loaded machine
_LONG_LEASE = 300.0  # the shared replicas never take a live resume over


async def every(requests: Iterable[Awaitable[T]]) -> list[T]:
    """Await all `requests` at once; when any fails, raise every failure, after all of them have ended."""
    results = await asyncio.gather(*requests, return_exceptions=True)
    failures = [result for result in results if isinstance(result, BaseException)]
    if failures:
        raise BaseExceptionGroup(f"{len(failures)} of {len(results)} requests failed", failures)
    return [result for result in results if not isinstance(result, BaseException)]


@contextlib.contextmanager
def replicas(count: int, dsn: str, journal: Path, *, lease: float = _LONG_LEASE) -> Iterator[list[Replica]]:
    """`count` replicas started at once on `dsn`, each up and healthy (its store reachable)."""
    started = [Replica("tests/replica_server.py", dsn, journal, lease) for _ in range(count)]
    try:
        for replica in started:
            wait_until(replica.healthy, f"the replica on port {replica.port} to be healthy", _BOUND)
        yield started
    finally:
        for replica in started:
            replica.kill()


@pytest.fixture(scope="module")
def journal(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("replicas") / "journal"


@pytest.fixture(scope="module")
def pair(journal: Path) -> Iterator[list[Replica]]:
    """Replicas A and B on one fresh database (a new schema for this module)."""
    with replicas(2, fresh_schema_dsn(), journal) as started:
        yield started


@pytest.fixture
async def http() -> Any:
    """A client that sends each request on a connection of its own, never on one idle in its pool.

    httpcore's pool (1.0.9) decides to close an idle connection whose keep-alive expired in one step and
    closes it in a later one; a request handed that connection in between is answered by the replica, then
    reads a socket closed under it (ReadError: ClosedResourceError). Hundreds of concurrent requests on a
    loaded machine met that (encode/httpcore#1110 is the same race, for a surplus idle connection).
    """
    limits = httpx.Limits(max_connections=400, max_keepalive_connections=0)
    async with httpx.AsyncClient(timeout=_BOUND, limits=limits) as client:
        yield client


def executions(journal: Path, thread_id: str) -> list[dict[str, Any]]:
    lines = journal.read_text().splitlines() if journal.exists() else []
    return [entry for entry in map(json.loads, lines) if entry["thread"] == thread_id]


def ok(reply: Reply) -> bool:
    """A resume that applied (or replayed what was applied): the run finished, without an error."""
    return reply.status == 200 and "RUN_FINISHED" in reply.types and "RUN_ERROR" not in reply.types


def test_a_replica_keeps_an_idle_connection_open_longer_than_the_client_pools_it(pair: list[Replica]) -> None:
    a, _ = pair
    idle = httpx.Limits().keepalive_expiry or 0.0  # how long an httpx client reuses an idle connection: 5 s
    with contextlib.closing(HTTPConnection("127.0.0.1", a.port, timeout=_BOUND)) as connection:
        connection.request("GET", "/health")
        first = connection.getresponse()
        first.read()
        on = connection.sock.getsockname()
        time.sleep(idle + 1)
        connection.request("GET", "/health")
        second = connection.getresponse()
        second.read()
        still_on = connection.sock.getsockname()

    assert first.status == second.status == 200
    assert still_on == on  # the second request went over the first one's connection, idle past httpx's pool


async def test_a_turn_suspended_on_a_resumes_on_b_once_and_a_replay_on_a_executes_nothing(
    pair: list[Replica], journal: Path, http: httpx.AsyncClient
) -> None:
    a, b = pair
    thread = Client(http, a.url).thread()
    (interrupt,) = (await thread.say("pay 10")).interrupts
    approval = resolved(interrupt["id"], {"approved": True})

    on_b = await Client(http, b.url).thread(thread_id=thread.id).resume(approval)
    replay_on_a = await Client(http, a.url).thread(thread_id=thread.id).resume(approval)

    assert on_b.outcome == {"type": "success"}
    assert "paid 10" in on_b.results()[interrupt["toolCallId"]]["content"]
    assert ok(replay_on_a)
    assert len(executions(journal, thread.id)) == 1


async def test_hundreds_of_identical_resumes_at_both_replicas_run_the_tool_once(
    pair: list[Replica], journal: Path, http: httpx.AsyncClient
) -> None:
    a, b = pair
    thread = Client(http, a.url).thread()
    (interrupt,) = (await thread.say("pay 20")).interrupts
    body = json.dumps(
        run_input(thread.id, thread.messages, resume=[resolved(interrupt["id"], {"approved": True})])
    ).encode()
    clients = [Client(http, a.url), Client(http, b.url)]

    replies = await every(clients[i % 2].post(body, clean=False) for i in range(200))

    statuses = Counter(reply.status for reply in replies)
    assert not [status for status in statuses if status >= 500], statuses
    assert any(ok(reply) for reply in replies)
    assert len(executions(journal, thread.id)) == 1


async def test_approve_against_reject_races_execute_exactly_the_approve_winners(
    pair: list[Replica], journal: Path, http: httpx.AsyncClient
) -> None:
    a, b = pair
    threads = [Client(http, a.url).thread() for _ in range(12)]
    interrupts = [(await thread.say("pay 5")).interrupts[0] for thread in threads]

    async def race(thread: Any, interrupt: dict[str, Any]) -> tuple[Reply, Reply]:
        approve = run_input(thread.id, thread.messages, resume=[resolved(interrupt["id"], {"approved": True})])
        reject = run_input(thread.id, thread.messages, resume=[resolved(interrupt["id"], {"approved": False})])
        approved, rejected = await every(
            [Client(http, a.url).post(approve, clean=False), Client(http, b.url).post(reject, clean=False)]
        )
        return approved, rejected

    pairs = zip(threads, interrupts, strict=True)
    results = await every(race(thread, interrupt) for thread, interrupt in pairs)

    for thread, (approved, rejected) in zip(threads, results, strict=True):
        assert approved.status < 500
        assert rejected.status < 500
        assert ok(approved) != ok(rejected), (approved.types, rejected.types)  # exactly one answer applies
        assert len(executions(journal, thread.id)) == (1 if ok(approved) else 0)


def test_several_replicas_starting_at_once_on_an_empty_database_all_come_up_healthy(tmp_path: Path) -> None:
    import psycopg

    dsn = fresh_schema_dsn()
    with replicas(3, dsn, tmp_path / "journal"):
        with psycopg.connect(dsn) as connection:
            versions = connection.execute("SELECT version FROM agui_schema_version ORDER BY version").fetchall()
    # each migration applied once, however many replicas raced
    assert versions == [(version,) for version in range(1, SCHEMA_VERSION + 1)]


async def test_a_replica_killed_mid_tool_is_finished_by_another_after_the_lease_with_the_same_key(
    tmp_path: Path, http: httpx.AsyncClient
) -> None:
    journal = tmp_path / "journal"
    hold = journal.with_name("journal.hold")
    with replicas(2, fresh_schema_dsn(), journal, lease=1.0) as (first, second):
        thread = Client(http, first.url).thread()
        (interrupt,) = (await thread.say("pay 30")).interrupts
        approval = resolved(interrupt["id"], {"approved": True})
        hold.touch()
        applying = asyncio.ensure_future(thread.resume(approval, clean=False))

        async def tool_started() -> bool | None:
            return len(executions(journal, thread.id)) == 1 or None

        await until(tool_started, "the tool to start on the first replica", _BOUND)
        first.kill()
        with contextlib.suppress(httpx.TransportError):
            await applying
        hold.unlink()
        again = Client(http, second.url).thread(thread_id=thread.id)

        async def finished() -> Reply | None:
            reply = await again.resume(approval, clean=False)
            return None if reply.of("RUN_ERROR") and reply.error["code"] == "RESUME_CONFLICT" else reply

        # The lease is 1 s: thirty leave a loaded machine room, and keep the expected failure short until then.
        reply = await until(finished, "the lease to lapse and the second replica to finish the turn", 30.0)
        replayed = await again.resume(approval, clean=False)

    assert reply.outcome == {"type": "success"}, reply.types
    runs = executions(journal, thread.id)
    assert [run["pid"] for run in runs] == [first.process.pid, second.process.pid]
    assert runs[0]["key"] == runs[1]["key"]  # at-least-once, under one idempotency key
    assert ok(replayed)
    assert len(executions(journal, thread.id)) == 2


def test_health_is_503_while_the_database_is_unreachable(tmp_path: Path) -> None:
    dsn = f"postgresql://postgres@127.0.0.1:{free_port()}/postgres?connect_timeout=1"
    replica = Replica("tests/replica_server.py", dsn, tmp_path / "journal", _LONG_LEASE)
    try:

        def answered() -> bool:
            assert replica.process.poll() is None
            try:
                return httpx.get(replica.url + "/health", timeout=15).status_code == 503
            except httpx.TransportError:
                return False

        wait_until(answered, "GET /health to answer 503", _BOUND)
    finally:
        replica.kill()


async def test_the_demo_runs_on_postgres(http: httpx.AsyncClient) -> None:
    import psycopg

    dsn, port = fresh_schema_dsn(), free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    demo = subprocess.Popen(
        [sys.executable, "-m", "examples.demo", "--port", str(port), "--db", dsn], cwd=ROOT, env=env
    )
    url = f"http://127.0.0.1:{port}/agui"
    try:

        def healthy() -> bool:
            assert demo.poll() is None, "the demo exited"
            try:
                return httpx.get(url + "/health", timeout=5).status_code == 200
            except httpx.TransportError:
                return False

        wait_until(healthy, "the demo to be healthy", _BOUND)
        reply = await Client(http, url).thread().say("hello")
    finally:
        demo.kill()
        demo.wait(_BOUND)

    assert ok(reply)
    with psycopg.connect(dsn) as connection:
        (threads,) = connection.execute("SELECT count(*) FROM agui_threads").fetchone() or (0,)
    assert threads == 1
