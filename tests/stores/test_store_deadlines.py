"""Every store call ends: within the store's deadline, or with StoreUnavailable; and the store works again after.

A frozen store is PostgreSQL behind a TCP proxy that stops forwarding (a partition: nothing is dropped,
nothing is delivered), or a SQLite file whose write lock a frozen writer holds. Each case waits for a
condition, never for a time: a call must end while the store is still frozen.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import sqlite3
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

import pytest
from gate import BOUND
from hypothesis import given
from hypothesis import strategies as st
from pg import base_dsn, fresh_schema_dsn
from replica_process import until
from tcp_proxy import Proxy

from adapter import Adapter
from adapter.backends import ScriptedBackend
from adapter.stores import (
    JournalEvent,
    PostgresStore,
    SQLiteStore,
    StoreConflict,
    StoredMessage,
    StoreUnavailable,
    ThreadChange,
    TurnStore,
)

# Private on purpose: the deadline rule itself, its worker thread's, and what /health asks of a store.
from adapter.stores._deadline import Deadline, checked_timeout
from adapter.stores._health import health
from adapter.stores._worker import Worker

if TYPE_CHECKING:
    from conftest import Serve, Served

TIMEOUT = 0.5  # seconds: each store's deadline here, so that a frozen store answers soon

_T = TypeVar("_T")


def msg(message_id: str) -> StoredMessage:
    return StoredMessage(message_id, "user", f'{{"id": "{message_id}", "role": "user", "content": "hi"}}')


@dataclass
class Frozen:
    """A store, and how to freeze and thaw what it talks to."""

    store: TurnStore
    freeze: Callable[[], None]
    thaw: Callable[[], None]
    frozen: Callable[[], bool]
    reads_blocked: bool
    """A frozen writer blocks only writes (SQLite's WAL readers never wait for it); a partition blocks everything."""
    proxy: Proxy | None = None


def through(proxy: Proxy, dsn: str) -> str:
    """`dsn`, reached through `proxy`."""
    target = urlsplit(dsn)
    netloc = target.netloc.replace(f"{target.hostname}:{target.port}", f"127.0.0.1:{proxy.port}")
    return target._replace(netloc=netloc).geturl()


async def started_proxy() -> Proxy:
    target = urlsplit(base_dsn())
    running = Proxy(target.hostname or "127.0.0.1", target.port or 5432)
    await running.start()
    return running


@pytest.fixture
async def proxy() -> AsyncIterator[Proxy]:
    running = await started_proxy()
    yield running
    await running.close()


async def partitioned(tmp_path: Path) -> Frozen:
    proxy = await started_proxy()
    store = PostgresStore(through(proxy, fresh_schema_dsn()), max_size=4, timeout=TIMEOUT)
    return Frozen(store, proxy.freeze, proxy.thaw, lambda: not proxy.flowing.is_set(), reads_blocked=True, proxy=proxy)


async def locked(tmp_path: Path) -> Frozen:
    path = tmp_path / "turns.db"
    writer: list[sqlite3.Connection] = []

    def freeze() -> None:
        connection = sqlite3.connect(path, isolation_level=None)
        connection.execute("BEGIN IMMEDIATE")  # a writer that froze inside its transaction
        writer.append(connection)

    def thaw() -> None:
        connection = writer.pop()
        connection.execute("ROLLBACK")
        connection.close()

    return Frozen(SQLiteStore(path, timeout=TIMEOUT), freeze, thaw, lambda: bool(writer), reads_blocked=False)


@pytest.fixture(
    params=[
        pytest.param(partitioned, id="postgres-partitioned", marks=pytest.mark.postgres),
        pytest.param(locked, id="sqlite-locked"),
    ]
)
async def frozen(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Frozen]:
    """A frozen store's thaw, closed at teardown (by the adapter that serves it, if any: it lives on that loop)."""
    made: Frozen = await request.param(tmp_path)
    yield made
    if made.frozen():
        made.thaw()
    await made.store.close()
    if made.proxy is not None:
        await made.proxy.close()


CALLS: dict[str, Callable[[TurnStore], Awaitable[Any]]] = {
    "load": lambda store: store.load("t1"),
    "load a head": lambda store: store.load("t1", since=None),
    "find_message": lambda store: store.find_message("t1", "m0"),
    "save": lambda store: store.save("t1", ThreadChange(append=[msg("m1")]), expected_version=1),
    "purge": lambda store: store.purge(timedelta(days=1)),
    "ping": lambda store: store.ping(),
    "ping to write": lambda store: store.ping(write=True),
    "append_events": lambda store: store.append_events("t1", "r1", [JournalEvent(1, "{}")]),
    "read_events": lambda store: store.read_events("t1", "r1"),
    "request_stop": lambda store: store.request_stop("t1", "r1"),
    "list_threads": lambda store: store.list_threads(None),
    "delete_thread": lambda store: store.delete_thread("t2"),  # not t1: a delete that lands after the thaw
}
WRITES = {"save", "purge", "ping to write", "append_events", "request_stop", "delete_thread"}


async def answered(call: Callable[[], Awaitable[_T]], what: str) -> _T:
    """`call`'s result once the store answers it, tried again while it raises StoreUnavailable (for BOUND s at most).

    The rule is that a frozen store's call ends by its deadline, not that a healthy one answers by then: on a loaded
    machine a fresh schema's migration, a pool's first connection, or one made again after a thaw can take longer.
    So the set-up and the checks after a thaw wait for the store to answer. Only for calls that may be repeated.
    """

    async def answer() -> tuple[_T] | None:
        try:
            return (await call(),)
        except StoreUnavailable:
            return None

    (result,) = await until(answer, what)
    return result


async def with_m0(store: TurnStore) -> None:
    """Thread t1 holding m0; may be repeated: an earlier save cut off by the deadline may have landed."""
    with contextlib.suppress(StoreConflict):
        await store.save("t1", ThreadChange(append=[msg("m0")]), expected_version=0)


async def ended(call: Awaitable[Any]) -> Any:
    """The call's result, or the exception it raised; a call still running after BOUND seconds fails the test."""
    try:
        return await asyncio.wait_for(call, BOUND)
    except TimeoutError:
        pytest.fail(f"a store call did not end within {BOUND} s")
    except Exception as error:
        return error


@pytest.mark.parametrize("name", list(CALLS))
async def test_a_call_to_a_frozen_store_ends_with_store_unavailable(frozen: Frozen, name: str) -> None:
    await answered(lambda: with_m0(frozen.store), "the store to open, migrate and save m0")
    frozen.freeze()

    outcome = await ended(CALLS[name](frozen.store))

    assert frozen.frozen()  # it ended while the store was still frozen
    if name in WRITES or frozen.reads_blocked:
        assert isinstance(outcome, StoreUnavailable), outcome
    else:
        assert not isinstance(outcome, Exception), outcome  # reading needs no lock
    frozen.thaw()
    await answered(lambda: frozen.store.ping(write=True), "the same store to work again")
    # A write cut off by a partition may still land once the network heals (TCP delivers what it held): the
    # store said it may have been applied. So may a save here that outlasts its deadline on a loaded machine. Each
    # lands once, so a save at the version read next wins once those have landed, and no other write lands.
    may_land = 1 if name in WRITES else 0
    async with asyncio.timeout(BOUND):
        while True:
            head = await answered(lambda: frozen.store.load("t1", since=None), "a load after the thaw")
            assert head is not None
            version = head.head.version
            try:
                saved = await frozen.store.save("t1", ThreadChange(append=[msg("after")]), expected_version=version)
            except StoreConflict:
                assert may_land > 0, "only the cut-off write itself may land after the thaw"
                may_land -= 1
                continue
            except StoreUnavailable:
                may_land += 1
                continue
            assert saved == version + 1
            break


async def test_health_says_a_frozen_store_is_not_ok(frozen: Frozen) -> None:
    await answered(lambda: with_m0(frozen.store), "the store to open, migrate and save m0")
    frozen.freeze()

    said = await ended(health(frozen.store, BOUND))

    assert frozen.frozen()
    assert said == ("unreachable" if frozen.reads_blocked else "read-only")  # answers reads, cannot write
    frozen.thaw()

    async def ok() -> bool | None:
        return await health(frozen.store, BOUND) == "ok" or None

    await until(ok, "health to say ok after the thaw")


@pytest.mark.postgres
async def test_a_store_partitioned_before_its_first_call_answers_within_its_deadline(proxy: Proxy) -> None:
    """The schema migration of the first call hangs with the network; each call still ends, and it resumes after."""
    store = PostgresStore(through(proxy, fresh_schema_dsn()), timeout=TIMEOUT)
    proxy.freeze()
    try:
        first, second = await ended(store.load("t1")), await ended(store.load("t1"))

        assert isinstance(first, StoreUnavailable)
        assert isinstance(second, StoreUnavailable)

        async def talked() -> bool | None:
            return proxy.held > 0 or None

        await until(talked, "the store to talk to the frozen network")
        proxy.thaw()

        assert await answered(lambda: store.load("t1"), "the store to answer after the thaw") is None
    finally:
        proxy.thaw()
        await store.close()


async def refusal_code(reply: Any) -> str:
    """The code a run was refused or ended with: a 503 before the stream, or its RUN_ERROR."""
    if reply.status == 503:
        return str(reply.refusal(503)["code"])
    return str(reply.error["code"])


async def test_a_served_run_and_a_thread_read_end_while_the_store_is_frozen(
    frozen: Frozen, serve: Serve, backend: ScriptedBackend
) -> None:
    """The issue's case: no answer after 45 s for a run, after 30 s for GET /threads, over a partitioned PostgreSQL."""
    server = await serve(Adapter(backend, store=frozen.store))
    await server.call(answered(lambda: frozen.store.ping(write=True), "the store to open and migrate"))
    thread = server.client.thread()
    assert (await thread.say("hello")).outcome == {"type": "success"}
    frozen.freeze()

    cut_off = await ended(thread.say("hello", clean=False))
    read = await ended(server.client.get(f"/threads/{thread.id}"))
    checked = await ended(server.client.get("/health"))

    assert frozen.frozen()
    assert await refusal_code(cut_off) == "STORE_UNAVAILABLE"
    if frozen.reads_blocked:
        assert (read.status_code, read.json()["error"]["code"]) == (503, "STORE_UNAVAILABLE")
    else:
        # Refused before any event: a run's first write (its journal's first event) could not be made.
        assert cut_off.status == 503
        assert cut_off.events == []
        assert read.status_code == 200
    assert checked.status_code == 503
    frozen.thaw()
    await server.call(answered(lambda: frozen.store.ping(write=True), "the same store to work again"))
    assert (await thread.say("hello")).outcome == {"type": "success"}
    await until(lambda: healthy(server), "/health to say ok again")  # its last answer is kept a second


@given(st.one_of(st.floats(allow_nan=True), st.integers(), st.booleans()))
def test_a_deadline_is_a_finite_number_of_seconds_above_zero(seconds: Any) -> None:
    usable = not isinstance(seconds, bool) and 0 < seconds < math.inf
    for make in (checked_timeout, lambda s: SQLiteStore(":memory:", timeout=s), lambda s: PostgresStore("", timeout=s)):
        if usable:
            make(seconds)
        else:
            with pytest.raises(ValueError, match="timeout"):
                make(seconds)


@given(steps=st.integers(min_value=0, max_value=50), cleanup=st.integers(min_value=0, max_value=50))
async def test_work_past_its_deadline_is_cancelled_and_waited_for_at_close(steps: int, cleanup: int) -> None:
    """A call ends at its deadline; the work it stops waiting for is cancelled, and its clean-up ends by `settle`."""
    deadline = Deadline(0.01, "the test store")
    finished = asyncio.Event()
    cleaned: list[int] = []

    async def quick() -> int:
        for _ in range(steps):
            await asyncio.sleep(0)
        return steps

    async def frozen() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            for step in range(cleanup):
                try:
                    await asyncio.sleep(0)
                except asyncio.CancelledError:
                    break  # cancelled again: the clean-up stops here
                cleaned.append(step)
            finished.set()

    assert await Deadline(BOUND, "the test store").run(quick(), "a quick call") == steps
    with pytest.raises(StoreUnavailable, match="the test store did not answer a frozen call within 0.01 s"):
        await deadline.run(frozen(), "a frozen call")
    await deadline.settle()

    assert finished.is_set()
    assert len(cleaned) <= cleanup


async def test_a_cancelled_caller_cancels_its_work() -> None:
    started, stopped = asyncio.Event(), asyncio.Event()

    async def frozen() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            stopped.set()

    caller = asyncio.ensure_future(Deadline(BOUND, "the test store").run(frozen(), "a frozen call"))
    await started.wait()
    caller.cancel()

    with pytest.raises(asyncio.CancelledError):
        await caller
    await asyncio.wait_for(stopped.wait(), BOUND)


async def test_a_worker_call_past_its_deadline_is_left_and_the_caller_told_at_the_deadline() -> None:
    """A store's call on its own thread: given up at the deadline, not cancelled from outside; the thread goes on."""
    release, ran = threading.Event(), list[str]()
    worker = Worker(0.01, "the test store", "test-worker")
    assert await worker.call("a quick call", lambda: 7) == 7
    frozen = asyncio.ensure_future(worker.call("a frozen call", release.wait))
    behind = asyncio.ensure_future(worker.call("a call behind it", ran.append, "behind"))
    try:
        await asyncio.wait({frozen, behind}, timeout=BOUND)
        for caller, what in ((frozen, "a frozen call"), (behind, "a call behind it")):
            assert caller.done(), "the caller was never told"
            with pytest.raises(StoreUnavailable, match=f"the test store did not answer {what} within 0.01 s"):
                caller.result()
    finally:
        release.set()
    await worker.stop(lambda: ran.append("last"))
    assert ran == ["last"], "a call given up before it began ran"


async def test_a_cancelled_caller_cancels_its_workers_call_before_it_begins() -> None:
    release, ran = threading.Event(), list[str]()
    worker = Worker(BOUND, "the test store", "test-worker")
    frozen = asyncio.ensure_future(worker.call("a frozen call", release.wait))
    caller = asyncio.ensure_future(worker.call("a call", ran.append, "cancelled"))
    await asyncio.sleep(0)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    release.set()
    assert await frozen is True
    await worker.stop(lambda: ran.append("last"))
    assert ran == ["last"]


async def test_a_workers_call_raises_to_its_caller_and_the_thread_goes_on() -> None:
    worker = Worker(BOUND, "the test store", "test-worker")

    def interrupted() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        await worker.call("a call", interrupted)
    with pytest.raises(ZeroDivisionError):
        await worker.call("a call", lambda: 1 / 0)
    assert await worker.call("a call", lambda: 9) == 9
    await worker.stop(lambda: None)


def test_a_worker_serves_one_event_loop_after_another() -> None:
    """A call's loop ended with its calls: the next loop's calls get answers and deadlines of their own."""
    began, release = threading.Event(), threading.Event()
    worker = Worker(0.01, "the test store", "test-worker")

    def frozen_work() -> None:
        began.set()
        release.wait()

    async def frozen() -> None:
        asyncio.ensure_future(worker.call("a frozen call", frozen_work))  # its loop closes before it ends
        assert await asyncio.to_thread(began.wait, BOUND)

    async def after() -> None:
        with pytest.raises(StoreUnavailable, match="did not answer a call behind it"):
            await worker.call("a call behind it", lambda: None)
        release.set()
        assert await worker.call("a call", lambda: 10) == 10
        await worker.stop(lambda: None)

    asyncio.run(frozen())
    asyncio.run(after())


async def healthy(server: Served) -> bool | None:
    return (await server.client.get("/health")).status_code == 200 or None
