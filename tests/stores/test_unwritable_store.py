"""A store that can be read but not written: StoreUnavailable naming why, /health says so, and it recovers by itself.

A SQLite file is made read-only as the process sees it (`chmod` for a user, `chattr +i` for root, whom
permissions do not stop); a PostgreSQL database is read-only for the sessions it opens meanwhile
(`default_transaction_read_only`, as on a standby). In both, the store is opened while it is read-only:
the connection it keeps would stay so after the database is fixed, unless the store drops it.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from pg import fresh_schema_dsn
from replica_process import until

from adapter import Adapter
from adapter.backends import ScriptedBackend
from adapter.stores import (
    JournalEvent,
    PostgresStore,
    SQLiteStore,
    StoredMessage,
    StoreUnavailable,
    ThreadChange,
    TurnStore,
)

# Private on purpose: what /health asks of a store.
from adapter.stores._health import health

if TYPE_CHECKING:
    from conftest import Serve, Served

PING_TIMEOUT = 5.0  # seconds /health waits for each answer, as GET /health does


def msg(message_id: str) -> StoredMessage:
    return StoredMessage(message_id, "user", f'{{"id": "{message_id}", "role": "user", "content": "hi"}}')


class ReadOnlyFile:
    """Makes one file read-only for this process, and writable again."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.read_only = False

    def set(self, read_only: bool) -> None:
        if os.geteuid() != 0:
            self.path.chmod(0o444 if read_only else 0o644)
        else:
            flag = "+i" if read_only else "-i"  # immutable: refused even to root
            done = subprocess.run(["chattr", flag, str(self.path)], capture_output=True, text=True, check=False)
            if done.returncode != 0:
                pytest.skip(f"cannot make a file read-only for root here (chattr {flag}): {done.stderr.strip()}")
        self.read_only = read_only


@pytest.fixture
def sqlite_file(tmp_path: Path) -> Iterator[ReadOnlyFile]:
    """A SQLite store's file holding thread t1, made read-only by the test; writable again at teardown."""
    path = tmp_path / "turns.db"
    yield ReadOnlyFile(path)
    if path.exists():
        ReadOnlyFile(path).set(False)


async def written(path: Path) -> None:
    store = SQLiteStore(path)
    await store.save("t1", ThreadChange(append=[msg("m0")]), expected_version=0)
    await store.close()


async def test_a_read_only_sqlite_file_is_read_refuses_writes_by_name_and_recovers(sqlite_file: ReadOnlyFile) -> None:
    await written(sqlite_file.path)
    sqlite_file.set(True)
    store = SQLiteStore(sqlite_file.path)
    try:
        loaded = await store.load("t1")
        with pytest.raises(StoreUnavailable, match="read-only") as refused:
            await store.save("t1", ThreadChange(append=[msg("m1")]), expected_version=1)
        await store.ping()
        with pytest.raises(StoreUnavailable, match="read-only"):
            await store.ping(write=True)
        said = await health(store, PING_TIMEOUT)
        sqlite_file.set(False)

        assert loaded is not None
        assert [m.id for m in loaded.messages] == ["m0"]
        assert "cannot be written" in str(refused.value)
        assert str(sqlite_file.path) not in str(refused.value)
        assert said == "read-only"
        assert await store.save("t1", ThreadChange(append=[msg("m1")]), expected_version=1) == 2  # no restart
        assert await health(store, PING_TIMEOUT) == "ok"
    finally:
        await store.close()


async def test_a_served_run_on_a_read_only_file_ends_with_store_unavailable_and_recovers(
    sqlite_file: ReadOnlyFile, serve: Serve, backend: ScriptedBackend
) -> None:
    """The issue's case: INTERNAL_ERROR for every run, /health ok, and failing until a restart."""
    await written(sqlite_file.path)
    sqlite_file.set(True)
    server = await serve(Adapter(backend, store=SQLiteStore(sqlite_file.path)))
    thread = server.client.thread()

    checked = await server.client.get("/health")
    refused = await thread.say("hello", clean=False)

    assert (checked.status_code, checked.json()) == (503, {"status": "unavailable", "store": "read-only"})
    # Refused before any event, nothing run: the run's first write (the new thread) could not be made.
    assert refused.refusal(503)["code"] == "STORE_UNAVAILABLE"
    sqlite_file.set(False)
    assert (await thread.say("hello")).outcome == {"type": "success"}
    await until(lambda: healthy(server), "/health to say ok again")  # its last answer is kept a second
    stored = (await server.client.get(f"/threads/{thread.id}")).json()
    assert [m["role"] for m in stored["messages"]] == ["user", "user", "assistant"]  # the first reply was not kept


class Sessions:
    """Whether the sessions PostgreSQL opens now are read-only (`default_transaction_read_only`), as on a standby."""

    def __init__(self) -> None:
        self.read_only = False
        self.opened = 0

    async def configure(self, connection: Any) -> None:
        self.opened += 1
        if self.read_only:
            await connection.execute("SET default_transaction_read_only = on")


@pytest.mark.postgres
async def test_a_read_only_postgres_is_read_refuses_writes_by_name_and_recovers() -> None:
    dsn = fresh_schema_dsn()
    await written_pg(dsn)
    sessions = Sessions()
    sessions.read_only = True
    store = PostgresStore(dsn, min_size=1, max_size=2, configure=sessions.configure)
    try:
        loaded = await store.load("t1")
        with pytest.raises(StoreUnavailable, match="read-only"):
            await store.save("t1", ThreadChange(append=[msg("m1")]), expected_version=1)
        await store.ping()
        said = await health(store, PING_TIMEOUT)
        sessions.read_only = False
        opened, attempts = sessions.opened, 0
        while True:  # each session opened while read-only fails once and is dropped; the next ones are writable
            attempts += 1
            try:
                version = await store.save("t1", ThreadChange(append=[msg("m1")]), expected_version=1)
                break
            except StoreUnavailable:
                assert attempts <= 2 + 1, "a read-only session was used again"

        assert loaded is not None
        assert [m.id for m in loaded.messages] == ["m0"]
        assert said == "read-only"
        assert version == 2
        assert sessions.opened > opened
        assert await health(store, PING_TIMEOUT) == "ok"
    finally:
        await store.close()


async def written_pg(dsn: str) -> None:
    store = PostgresStore(dsn)
    await store.save("t1", ThreadChange(append=[msg("m0")]), expected_version=0)
    await store.close()


JOURNAL_WRITES: dict[str, Callable[[TurnStore], Awaitable[Any]]] = {
    "append_events": lambda store: store.append_events("t1", "r1", [JournalEvent(2, "{}")]),
    "request_stop": lambda store: store.request_stop("t1", "r1"),
    "delete_thread": lambda store: store.delete_thread("t1"),
    "a save's title": lambda store: store.save("t1", ThreadChange(title="T"), expected_version=1),
}


async def read_back(store: TurnStore) -> tuple[Any, ...]:
    """What the store holds of t1 and its journal, read."""
    page, _ = await store.list_threads(None)
    return await store.load("t1"), await store.read_events("t1", "r1"), [s.thread_id for s in page]


@pytest.mark.parametrize("name", list(JOURNAL_WRITES))
async def test_journal_and_thread_writes_to_a_read_only_file_are_refused_by_name(
    sqlite_file: ReadOnlyFile, name: str
) -> None:
    store = SQLiteStore(sqlite_file.path)
    await store.save("t1", ThreadChange(append=[msg("m0")]), expected_version=0)
    await store.append_events("t1", "r1", [JournalEvent(1, "{}")])
    await store.close()
    sqlite_file.set(True)
    store = SQLiteStore(sqlite_file.path)
    try:
        before = await read_back(store)
        with pytest.raises(StoreUnavailable, match="read-only"):
            await JOURNAL_WRITES[name](store)
        after = await read_back(store)
        sqlite_file.set(False)
        await JOURNAL_WRITES[name](store)  # no restart
    finally:
        await store.close()

    assert before == after
    assert after[2] == ["t1"]


@pytest.mark.postgres
@pytest.mark.parametrize("name", list(JOURNAL_WRITES))
async def test_journal_and_thread_writes_to_a_read_only_database_are_refused_by_name(name: str) -> None:
    dsn = fresh_schema_dsn()
    await written_pg(dsn)
    sessions = Sessions()
    store = PostgresStore(dsn, min_size=1, max_size=1, configure=sessions.configure)
    try:
        await store.append_events("t1", "r1", [JournalEvent(1, "{}")])
        sessions.read_only = True
        await store.ping()
        await store.close()  # its session was opened writable: a new store opens a read-only one
        store = PostgresStore(dsn, min_size=1, max_size=1, configure=sessions.configure)
        before = await read_back(store)
        with pytest.raises(StoreUnavailable, match="read-only"):
            await JOURNAL_WRITES[name](store)
        after = await read_back(store)
    finally:
        await store.close()

    assert before == after
    assert after[2] == ["t1"]


async def healthy(server: Served) -> bool | None:
    return (await server.client.get("/health")).status_code == 200 or None
