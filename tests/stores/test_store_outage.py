"""A store that cannot be reached gives a coded STORE_UNAVAILABLE; a read is retried, a write never is.

PostgreSQL is reached through a TCP proxy the test controls: cutting it is a database restart as the
adapter sees it (live connections die, new ones are refused), without touching the shared server.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import pytest
from gate import BOUND, Gate
from pg import base_dsn, fresh_schema_dsn
from tcp_proxy import Proxy

from adapter.backends import ScriptedBackend
from adapter.stores import PostgresStore

if TYPE_CHECKING:
    from conftest import MakeAdapter, Serve, Served

pytestmark = pytest.mark.postgres


@pytest.fixture
async def proxy() -> AsyncIterator[Proxy]:
    target = urlsplit(base_dsn())
    running = Proxy(target.hostname or "127.0.0.1", target.port or 5432)
    await running.start()
    yield running
    await running.close()


@pytest.fixture
async def served(
    proxy: Proxy, serve: Serve, make_adapter: MakeAdapter, backend: ScriptedBackend
) -> AsyncIterator[tuple[Served, Gate]]:
    """A server whose PostgreSQL store is reached through `proxy`; runs saying "slow" wait for the gate."""
    assert proxy.server is not None
    port = proxy.server.sockets[0].getsockname()[1]
    dsn = fresh_schema_dsn()
    target = urlsplit(dsn)
    through_proxy = target._replace(
        netloc=target.netloc.replace(f"{target.hostname}:{target.port}", f"127.0.0.1:{port}")
    )
    gate = Gate(backend)
    store = PostgresStore(through_proxy.geturl(), timeout=1.0)
    server = await serve(make_adapter(backend=gate, store=store))
    # The first call opens a pool and migrates a fresh schema, which may outlast a 1 s deadline on a loaded machine.
    assert (await recovered(server, "/health")).status_code == 200
    yield server, gate
    gate.release.set()
    proxy.open = True
    with contextlib.suppress(Exception):
        await server.stop()


async def test_a_store_cut_mid_run_ends_it_with_store_unavailable(served: tuple[Served, Gate], proxy: Proxy) -> None:
    server, gate = served
    thread = server.client.thread()
    assert (await thread.say("hello")).outcome == {"type": "success"}
    slow = asyncio.ensure_future(thread.say("slow: a long answer"))
    await asyncio.to_thread(gate.entered.wait, BOUND)

    proxy.cut()
    gate.release.set()
    cut_off = await slow
    read = await server.client.get(f"/threads/{thread.id}")

    assert (cut_off.types[-1], cut_off.error["code"]) == ("RUN_ERROR", "STORE_UNAVAILABLE")
    assert (read.status_code, read.json()["error"]["code"]) == (503, "STORE_UNAVAILABLE")
    proxy.open = True
    restored = await recovered(server, f"/threads/{thread.id}")
    assert restored.status_code == 200
    assert len(restored.json()["messages"]) == 2


async def recovered(server: Served, path: str) -> Any:
    """The first answer other than 503 once the store can be reached (again): it recovers by itself, though a
    connection it opens may take a while on a loaded machine (a wait for the condition, bounded)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + BOUND
    while True:
        answer = await server.client.get(path)
        if answer.status_code != 503 or loop.time() > deadline:
            return answer
        await asyncio.sleep(0.1)


async def test_a_store_down_when_a_run_starts_gives_store_unavailable(
    served: tuple[Served, Gate], proxy: Proxy
) -> None:
    server, _ = served
    thread = server.client.thread()
    assert (await thread.say("hello")).outcome == {"type": "success"}

    proxy.cut()
    refused = await thread.say("hello")

    assert refused.refusal(503)["code"] == "STORE_UNAVAILABLE"


async def test_a_read_after_a_restart_while_idle_is_retried(served: tuple[Served, Gate], proxy: Proxy) -> None:
    server, _ = served
    thread = server.client.thread()
    assert (await thread.say("hello")).outcome == {"type": "success"}

    proxy.drop()

    assert (await server.client.get(f"/threads/{thread.id}")).status_code == 200
    proxy.drop()
    assert (await thread.say("hello")).outcome == {"type": "success"}


def test_a_request_waits_five_seconds_for_a_connection_unless_told_otherwise() -> None:
    """psycopg_pool's own 30 s would hold every request that long while PostgreSQL is down (no connection is made)."""
    default, chosen = PostgresStore(base_dsn()), PostgresStore(base_dsn(), timeout=1.5, max_idle=60.0)

    assert default._pool.timeout == 5.0  # private on purpose: the pool is what waits
    assert (chosen._pool.timeout, chosen._pool.max_idle) == (1.5, 60.0)
