"""What SQLiteStore adds to the contract: a file shared by instances, WAL, close, and the migration of old files."""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from ag_ui.core import RunFinishedEvent

from adapter import Adapter, FormDefinition
from adapter.backends import Call, Rule, ScriptedBackend
from adapter.stores import (
    JournalEvent,
    SQLiteStore,
    StoreConflict,
    StoredMessage,
    StoreUnavailable,
    ThreadChange,
)

LEGACY = Path(__file__).with_name("legacy_v1.db")
"""Written by the one-document-per-thread layout (before issue 10): five threads in telling states."""


def msg(message_id: str) -> StoredMessage:
    return StoredMessage(message_id, "user", f'{{"id": "{message_id}", "role": "user", "content": "hi"}}')


@pytest.fixture
async def sqlite_pair(tmp_path: Path) -> AsyncIterator[tuple[SQLiteStore, SQLiteStore]]:
    """Two independent store instances on one file, as two replicas would have."""
    first, second = SQLiteStore(tmp_path / "shared.db"), SQLiteStore(tmp_path / "shared.db")
    yield first, second
    await first.close()
    await second.close()


async def test_data_survives_a_new_instance(tmp_path: Path) -> None:
    before = SQLiteStore(tmp_path / "turns.db")
    await before.save("t1", ThreadChange(append=[msg("m0")], open_turn={"open": ["i1"]}), expected_version=0)
    await before.close()

    after = SQLiteStore(tmp_path / "turns.db")
    try:
        loaded = await after.load("t1")
        assert loaded is not None
        assert (loaded.head.open_turn, loaded.head.version, list(loaded.messages)) == ({"open": ["i1"]}, 1, [msg("m0")])
        assert await after.save("t1", ThreadChange(open_turn=None), expected_version=1) == 2
    finally:
        await after.close()


async def test_instances_on_one_file_see_each_others_writes(sqlite_pair: tuple[SQLiteStore, SQLiteStore]) -> None:
    first, second = sqlite_pair
    await first.save("t1", ThreadChange(append=[msg("by-first")]), expected_version=0)

    loaded = await second.load("t1")

    assert loaded is not None
    assert [m.id for m in loaded.messages] == ["by-first"]
    with pytest.raises(StoreConflict):
        await second.save("t1", ThreadChange(append=[msg("by-second")]), expected_version=0)


async def test_cas_across_instances_has_exactly_one_winner(sqlite_pair: tuple[SQLiteStore, SQLiteStore]) -> None:
    first, second = sqlite_pair
    for version in range(5):
        results = await asyncio.gather(
            *(
                instance.save("t1", ThreadChange(append=[msg(f"r{version}w{i}")]), expected_version=version)
                for i, instance in enumerate([first, second] * 5)
            ),
            return_exceptions=True,
        )

        assert sum(result == version + 1 for result in results) == 1
        assert sum(isinstance(result, StoreConflict) for result in results) == 9
    loaded = await first.load("t1")
    assert loaded is not None
    assert [m.id[:2] for m in loaded.messages] == ["r0", "r1", "r2", "r3", "r4"]


async def test_uses_the_wal_journal(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "turns.db")
    await store.save("t1", ThreadChange(), expected_version=0)
    await store.close()

    # Header bytes 18-19 are the file format versions; 2 means WAL, and it persists after close.
    assert (tmp_path / "turns.db").read_bytes()[18:20] == b"\x02\x02"


async def test_refuses_use_after_close(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "turns.db")
    await store.close()
    await store.close()

    with pytest.raises(RuntimeError, match="closed"):
        await store.load("t1")


def legacy_documents(path: Path) -> dict[str, tuple[int, dict[str, Any]]]:
    with sqlite3.connect(path) as connection:
        rows = connection.execute("SELECT thread_id, version, document FROM agui_turns").fetchall()
    return {thread_id: (version, json.loads(text)) for thread_id, version, text in rows}


async def test_a_file_of_the_old_layout_migrates_on_first_use(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    shutil.copy(LEGACY, path)
    documents = legacy_documents(path)
    assert set(documents) == {"finished", "open-frontend", "resumed", "open-form", "queued"}

    store = SQLiteStore(path)
    try:
        for thread_id, (version, document) in documents.items():
            loaded = await store.load(thread_id)
            assert loaded is not None
            head = loaded.head
            assert (head.version, head.claim, head.message_count) == (version, 0, len(document["messages"]))
            assert (head.open_turn, head.applied) == (document.get("open_turn"), document.get("applied"))
            assert [json.loads(m.json) for m in loaded.messages] == document["messages"]
            assert [(m.id, m.role) for m in loaded.messages] == [(m["id"], m["role"]) for m in document["messages"]]
        await store.save("resumed", ThreadChange(append=[msg("after")]), expected_version=documents["resumed"][0])
    finally:
        await store.close()

    with sqlite3.connect(path) as connection:
        tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "agui_turns" not in tables


async def test_instances_racing_to_migrate_one_file_move_each_thread_once(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    shutil.copy(LEGACY, path)
    stores = [SQLiteStore(path) for _ in range(4)]
    try:
        loaded = await asyncio.gather(*(store.load("resumed") for store in stores))
        assert {(t.head.version, t.head.message_count) for t in loaded if t is not None} == {(4, 4)}
    finally:
        for store in stores:
            await store.close()


async def test_an_adapter_resumes_the_turns_of_a_migrated_file(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    shutil.copy(LEGACY, path)
    # The rules the file was written with: the open turns continue where they stopped.
    backend = ScriptedBackend(
        [
            Rule(r"go to (\w+)", steps=[[Call("navigate", {"path": "/{1}"})]], reply="Opened it."),
            Rule(r"contact", steps=[[Call("request_user_input", {"formKey": "contact"})]], reply="Thanks."),
        ]
    )
    contact = FormDefinition(
        "contact", "Contact details.", {"type": "object", "properties": {"email": {"type": "string"}}}
    )
    adapter = Adapter(backend, forms=[contact], store=SQLiteStore(path))
    try:
        opened = await adapter.thread("open-frontend")
        assert opened is not None
        (interrupt,) = opened["interrupts"]
        entry = {"interruptId": interrupt["id"], "status": "resolved", "payload": {"navigated": True}}
        resumed = [event async for event in adapter.resume("open-frontend", [entry])]
        # The answers an old file queued for a worker are no longer applied by themselves: given again, they answer.
        answers = legacy_documents(LEGACY)["queued"][1]["queued"]
        queued = [event async for event in adapter.resume("queued", answers)]

        for events in (resumed, queued):
            last = events[-1]
            assert isinstance(last, RunFinishedEvent)
            assert last.outcome is not None
            assert last.outcome.type == "success"
        after = await adapter.thread("queued")
        assert after is not None
        assert after["interrupts"] == []
        cards = [m for m in after["messages"] if m["role"] == "activity"]
        assert [card["content"]["status"] for card in cards] == ["SUBMITTED"]
        finished = await adapter.thread("resumed")
        assert finished is not None
        assert [m["role"] for m in finished["messages"]][-1] == "assistant"
    finally:
        await adapter.aclose()


async def test_a_file_from_before_retention_gains_its_columns_and_its_threads_count_as_saved_now(
    tmp_path: Path,
) -> None:
    path = tmp_path / "turns.db"
    with sqlite3.connect(path) as connection:  # the append-only layout as it was before retention
        connection.execute(
            "CREATE TABLE agui_threads (thread_id TEXT PRIMARY KEY, version INTEGER NOT NULL, claim INTEGER NOT NULL,"
            " message_count INTEGER NOT NULL, open_turn TEXT NOT NULL DEFAULT 'null',"
            " applied TEXT NOT NULL DEFAULT 'null', queued TEXT NOT NULL DEFAULT 'null')"
        )
        connection.execute("INSERT INTO agui_threads VALUES ('old', 3, 0, 0, 'null', 'null', 'null')")
    connection.close()
    store = SQLiteStore(path)

    kept = await store.purge(timedelta(days=30))
    purged = await store.purge(timedelta(days=30), now=datetime.now(UTC) + timedelta(days=31))
    await store.close()

    assert (kept, purged) == (0, 1)


def _run_sql(path: Path, statement: str) -> None:
    """One statement on the file, outside any store: how an older layout is made."""
    with sqlite3.connect(path) as connection:
        connection.execute(statement)
    connection.close()


def _index_names(path: Path) -> set[str]:
    with sqlite3.connect(path) as connection:
        names = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    connection.close()
    return names


async def test_a_file_from_before_issue_43_loses_the_index_nothing_read_and_keeps_its_threads(tmp_path: Path) -> None:
    """`agui_threads_saved` cost every save a page and served no query: dropped once, by instances racing to open."""
    path = tmp_path / "turns.db"
    store = SQLiteStore(path)
    await store.save("old", ThreadChange(append=[StoredMessage("m1", "user", "{}")]), expected_version=0)
    await store.close()
    _run_sql(path, "CREATE INDEX agui_threads_saved ON agui_threads (saved_at)")  # as the retention upgrade made it
    stores = [SQLiteStore(path) for _ in range(3)]
    try:
        loaded = await asyncio.gather(*(store.load("old") for store in stores))
        purged = await stores[0].purge(timedelta(days=30), now=datetime.now(UTC) + timedelta(days=31))
    finally:
        for store in stores:
            await store.close()
    indexes = _index_names(path)

    assert [thread.head.message_count for thread in loaded if thread is not None] == [1, 1, 1]
    assert purged == 1
    assert "agui_threads_saved" not in indexes
    assert {"agui_threads_listing", "agui_messages_id"} <= indexes


async def test_a_file_with_the_journals_appended_index_loses_it_and_purges_its_idle_journals_by_a_scan(
    tmp_path: Path,
) -> None:
    """`agui_journals_appended` cost every append a page and served only `purge`: dropped once, by racing opens."""
    path = tmp_path / "turns.db"
    store = SQLiteStore(path)
    await store.save("old", ThreadChange(append=[msg("m1")], open_turn={"open": ["i1"]}), expected_version=0)
    for thread in ("old", "gone"):
        await store.append_events(thread, "r1", [JournalEvent(1, '{"type": "RUN_STARTED"}')])
    await store.close()
    _run_sql(path, "CREATE INDEX agui_journals_appended ON agui_journals (appended_at)")  # as e376502 made it
    stores = [SQLiteStore(path) for _ in range(3)]
    try:
        read = await asyncio.gather(*(store.read_events("old", "r1") for store in stores))
        purged = await stores[0].purge(timedelta(days=30), now=datetime.now(UTC) + timedelta(days=31))
        left = [await stores[1].read_events(thread, "r1") for thread in ("old", "gone")]
        kept = await stores[2].load("old")
    finally:
        for store in stores:
            await store.close()
    indexes = _index_names(path)

    assert [journal.last_seq for journal in read if journal is not None] == [1, 1, 1]
    assert (purged, left) == (0, [None, None])  # its turn waits, so the thread stays; both idle journals go
    assert kept is not None and kept.head.open_turn == {"open": ["i1"]}
    assert "agui_journals_appended" not in indexes
    assert {"agui_threads_listing", "agui_messages_id"} <= indexes


async def test_a_file_from_before_ownership_gains_an_owner_column_and_its_threads_stay_unowned(tmp_path: Path) -> None:
    path = tmp_path / "turns.db"
    with sqlite3.connect(path) as connection:  # the layout as it was before thread ownership
        connection.execute(
            "CREATE TABLE agui_threads (thread_id TEXT PRIMARY KEY, version INTEGER NOT NULL, claim INTEGER NOT NULL,"
            " message_count INTEGER NOT NULL, open_turn TEXT NOT NULL DEFAULT 'null',"
            " applied TEXT NOT NULL DEFAULT 'null', queued TEXT NOT NULL DEFAULT 'null',"
            " saved_at REAL, expires_at REAL)"
        )
        connection.execute("INSERT INTO agui_threads VALUES ('old', 3, 0, 0, 'null', 'null', 'null', 0, NULL)")
    connection.close()
    store = SQLiteStore(path)

    old = await store.load("old")
    await store.save("new", ThreadChange(owner="alice"), expected_version=0)
    new = await store.load("new")
    await store.close()

    assert old is not None
    assert (old.head.version, old.head.owner) == (3, None)
    assert new is not None
    assert new.head.owner == "alice"


async def test_a_file_that_cannot_be_opened_is_unavailable_not_a_bug(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path)  # a directory: SQLITE_CANTOPEN

    with pytest.raises(StoreUnavailable):
        await store.load("t1")
    await store.close()


TIED = ["B", "a", "é", "Z", "b", "a|b", "😀"]
"""Ids whose order by code point (as Python compares them) is not a locale's order: threads saved at one moment."""


async def test_threads_saved_at_one_moment_are_listed_by_id_greatest_first_on_every_page(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "turns.db")
    for thread_id in TIED:
        await store.save(thread_id, ThreadChange(owner="alice"), expected_version=0)
    with sqlite3.connect(tmp_path / "turns.db") as connection:
        connection.execute("UPDATE agui_threads SET updated_at = 1700000000123456")
    connection.close()
    try:
        pages = []
        before: str | None = None
        while True:
            page, before = await store.list_threads("alice", before=before, limit=2)
            pages.append([summary.thread_id for summary in page])
            if before is None:
                break
        whole, _ = await store.list_threads("alice")
    finally:
        await store.close()

    assert [thread for page in pages for thread in page] == sorted(TIED, reverse=True)
    assert {summary.updated_at for summary in whole} == {datetime(2023, 11, 14, 22, 13, 20, 123456, tzinfo=UTC)}


async def test_a_file_from_before_the_listing_gains_titles_journals_and_its_threads_keep_their_save_time(
    tmp_path: Path,
) -> None:
    path = tmp_path / "turns.db"
    with sqlite3.connect(path) as connection:  # the layout as it was before issue 31: no title, no journals
        connection.execute(
            "CREATE TABLE agui_threads (thread_id TEXT PRIMARY KEY, version INTEGER NOT NULL, claim INTEGER NOT NULL,"
            " message_count INTEGER NOT NULL, open_turn TEXT NOT NULL DEFAULT 'null',"
            " applied TEXT NOT NULL DEFAULT 'null', queued TEXT NOT NULL DEFAULT 'null',"
            " saved_at REAL, expires_at REAL, owner TEXT)"
        )
        connection.execute("INSERT INTO agui_threads VALUES ('old', 3, 0, 0, 'null', 'null', 'null', 1.5, NULL, 'al')")
        connection.execute(
            "INSERT INTO agui_threads VALUES ('older', 2, 0, 0, 'null', 'null', 'null', 1.25, NULL, 'al')"
        )
    connection.close()
    stores = [SQLiteStore(path) for _ in range(3)]  # racing to upgrade it: each column is added once
    try:
        listings = await asyncio.gather(*(store.list_threads("al") for store in stores))
        await stores[0].save("new", ThreadChange(owner="al", title="New"), expected_version=0)
        await stores[0].append_events("old", "r1", [JournalEvent(1, "{}")])
        listed, _ = await stores[1].list_threads("al")
        old = await stores[1].load("old", since=None)
    finally:
        for store in stores:
            await store.close()

    assert {tuple(s.thread_id for s in page) for page, _ in listings} == {("old", "older")}
    assert [(s.thread_id, s.title) for s in listed] == [("new", "New"), ("old", None), ("older", None)]
    assert listed[1].updated_at == datetime(1970, 1, 1, 0, 0, 1, 500000, tzinfo=UTC)
    assert old is not None
    assert (old.head.version, old.head.title, old.head.grants) == (3, None, None)


async def test_a_file_of_the_old_layout_migrates_to_a_listed_one(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    shutil.copy(LEGACY, path)
    threads = sorted(legacy_documents(path))
    store = SQLiteStore(path)
    try:
        listed, after = await store.list_threads(None)
        heads = [await store.load(thread_id, since=None) for thread_id in threads]
    finally:
        await store.close()

    assert sorted(s.thread_id for s in listed) == threads
    assert after is None
    assert [loaded.head.incarnation for loaded in heads if loaded is not None] == [None] * len(threads)
    assert [loaded.head.grants for loaded in heads if loaded is not None] == [None] * len(threads)
