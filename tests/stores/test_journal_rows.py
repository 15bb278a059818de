"""The SQL stores keep a run's journal one row per append, and a read from anywhere inside a row returns exactly
the events asked for, reading only the rows that hold them.

A row's body is its events' JSON joined by newlines (`pack_events`), so an event's JSON is one line: every
store refuses one that is not, before it writes anything.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pg import every_store, fresh_schema_dsn

from adapter.stores import JournalEvent, PostgresStore, RunJournal, SQLiteStore, TurnStore, _postgres, _sqlite

# Private on purpose: the rows' packing and unpacking, and the tables the stores write, are what is checked.
from adapter.stores._protocol import JournalBatch, check_append, journal_events, pack_events, unpack_rows

Rows = list[tuple[int, int]]
"""A journal's rows as `(first_seq, last_seq)`, in seq order."""

SIZES = st.lists(st.integers(min_value=0, max_value=12), min_size=1, max_size=8)
"""The sizes of a journal's appends, in order; an empty append writes no row."""
LINES = st.text(st.characters(exclude_characters="\n"), max_size=8)
"""An event's JSON as the helpers see it: any text of one line (the empty one too)."""


@dataclass
class SqlStore:
    """A SQL store, and a look at its table behind its back."""

    store: TurnStore
    rows: Callable[[str, str], Awaitable[Rows]]
    module: Any
    """The store's module, where `unpack_rows` is looked up at each read."""


def sqlite_store(tmp_path: Path) -> SqlStore:
    path = tmp_path / "turns.db"

    async def rows(thread_id: str, run_id: str) -> Rows:
        with sqlite3.connect(path) as connection:
            query = "SELECT first_seq, last_seq FROM agui_journal_events WHERE thread_id = ? AND run_id = ?"
            return sorted(connection.execute(query, (thread_id, run_id)).fetchall())

    return SqlStore(SQLiteStore(path), rows, _sqlite)


def postgres_store(tmp_path: Path) -> SqlStore:
    import psycopg

    dsn = fresh_schema_dsn()

    async def rows(thread_id: str, run_id: str) -> Rows:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as connection:
            query = "SELECT first_seq, last_seq FROM agui_journal_events WHERE thread_id = %s AND run_id = %s"
            cursor = await connection.execute(query, (thread_id, run_id))
            return sorted(await cursor.fetchall())

    return SqlStore(PostgresStore(dsn), rows, _postgres)


@pytest.fixture(
    params=[
        pytest.param(sqlite_store, id="sqlite"),
        pytest.param(postgres_store, id="postgres", marks=pytest.mark.postgres),
    ]
)
async def sql(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SqlStore]:
    made: SqlStore = request.param(tmp_path)
    yield made
    await made.store.close()


@pytest.fixture(params=every_store())
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[TurnStore]:
    instance: TurnStore = request.param(tmp_path)
    yield instance
    await instance.close()


def events(first: int, count: int, tag: str) -> list[JournalEvent]:
    return [JournalEvent(seq, f'{{"type":"CUSTOM","name":"{tag}{seq}"}}') for seq in range(first, first + count)]


def layout(sizes: list[int]) -> Rows:
    """The rows appends of these sizes make: one per append that has events."""
    rows, last = [], 0
    for size in sizes:
        if size:
            rows.append((last + 1, last + size))
        last += size
    return rows


def needed(rows: Rows, after: int, limit: int) -> Rows:
    """The rows that hold the events with seq > `after`, at most `limit` of them: those a read may fetch."""
    return [(first, last) for first, last in rows if limit > 0 and last > after and first <= after + limit]


@contextmanager
def fetched_rows(module: Any) -> Iterator[Rows]:
    """The rows each read of the store hands to `unpack_rows`: what it fetched from its table."""
    seen: Rows = []

    def counting(rows: Iterable[tuple[int, str]], *, after: int, limit: int) -> list[JournalEvent]:
        rows = list(rows)
        seen.extend((first, first + body.count("\n")) for first, body in rows)
        return unpack_rows(rows, after=after, limit=limit)

    with mock.patch.object(module, "unpack_rows", counting):
        yield seen


# The store is the test's, not the example's: each example appends to a run of its own.
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=SIZES, data=st.data())
async def test_each_append_is_one_row_and_a_read_fetches_only_the_rows_of_its_events(
    sql: SqlStore, sizes: list[int], data: st.DataObject
) -> None:
    run_id = uuid.uuid4().hex
    appended: list[JournalEvent] = []
    for size in sizes:
        batch = events(len(appended) + 1, size, run_id)
        assert await sql.store.append_events("t1", run_id, batch) is False
        appended.extend(batch)
    rows = await sql.rows("t1", run_id)
    total = len(appended)

    assert rows == layout(sizes)
    for _ in range(data.draw(st.integers(min_value=1, max_value=4))):
        after = data.draw(st.integers(min_value=-1, max_value=total + 1), label="after")
        limit = data.draw(st.integers(min_value=0, max_value=total + 2), label="limit")
        with fetched_rows(sql.module) as fetched:
            read = await sql.store.read_events("t1", run_id, after=after, limit=limit)
        start = max(after, 0)
        assert read == RunJournal(appended[start : start + limit], ended=False, stop_requested=False, last_seq=total)
        assert fetched == needed(rows, start, limit)


async def test_a_journal_of_many_appends_reads_back_whole_page_by_page(sql: SqlStore) -> None:
    """A reader that follows a journal, a page at a time, gets every event once, each page a few rows."""
    sizes = [1, 7, 3, 1000, 2, 0, 5]
    appended: list[JournalEvent] = []
    for size in sizes:
        batch = events(len(appended) + 1, size, "e")
        await sql.store.append_events("t1", "r1", batch, ended=size == 5)
        appended.extend(batch)
    pages: list[Rows] = []
    read: list[JournalEvent] = []
    while True:
        with fetched_rows(sql.module) as fetched:
            page = await sql.store.read_events("t1", "r1", after=len(read), limit=100)
        assert page is not None
        assert page.ended
        if not page.events:
            break
        pages.append(list(fetched))
        read.extend(page.events)

    assert read == appended
    assert len(await sql.rows("t1", "r1")) == len([size for size in sizes if size])
    # 1,018 events, 100 a page
    assert len(pages) == 11
    assert all(len(rows) <= 4 for rows in pages)


@pytest.mark.parametrize("bad", ['{"a":\n1}', "\n", '{"a":1}\n'])
async def test_an_event_whose_json_holds_a_newline_is_refused_and_nothing_is_written(
    store: TurnStore, bad: str
) -> None:
    await store.append_events("t1", "r1", events(1, 2, "e"))
    before = await store.read_events("t1", "r1")

    for batch in ([JournalEvent(3, bad)], [*events(3, 1, "e"), JournalEvent(4, bad)]):
        with pytest.raises(ValueError, match="newline"):
            await store.append_events("t1", "r1", batch, ended=True)
        with pytest.raises(ValueError, match="newline"):
            await store.append_events("t2", "r1", [JournalEvent(1, bad)])

    assert await store.read_events("t1", "r1") == before
    assert await store.read_events("t2", "r1") is None  # not even created
    assert await store.append_events("t1", "r1", events(3, 1, "e")) is False


@given(batches=st.lists(st.lists(LINES, max_size=6), max_size=6), data=st.data())
def test_rows_unpack_to_exactly_the_events_asked_for(batches: list[list[str]], data: st.DataObject) -> None:
    journal: list[JournalEvent] = []
    rows: list[tuple[int, str]] = []
    for texts in batches:
        batch = [JournalEvent(len(journal) + 1 + offset, text) for offset, text in enumerate(texts)]
        if batch:
            rows.append((batch[0].seq, pack_events(batch)))
        journal.extend(batch)
    after = data.draw(st.integers(min_value=0, max_value=len(journal) + 1), label="after")
    limit = data.draw(st.integers(min_value=0, max_value=len(journal) + 1), label="limit")
    tail = [(first, body) for first, body in rows if first + body.count("\n") > after]  # last seq past `after`

    assert unpack_rows(tail, after=after, limit=limit) == journal[after : after + limit]


@pytest.mark.parametrize("first", [pytest.param(0, id="outside-the-journal"), pytest.param(5, id="numbered")])
def test_journal_events_are_the_events_the_constructor_makes(first: int) -> None:
    """The writer's and the readers' builder sets the slots directly: the events are equal, hash alike, stay frozen."""
    built = journal_events(['{"a":1}', '{"b":2}'], first)
    made = [JournalEvent(first, '{"a":1}'), JournalEvent(first + 1 if first else 0, '{"b":2}')]
    assert built == made
    assert [hash(event) for event in built] == [hash(event) for event in made]
    assert all(type(event) is JournalEvent for event in built)
    with pytest.raises(AttributeError):
        built[0].seq = 9  # type: ignore[misc]


def test_a_batch_held_as_texts_reads_as_the_list_of_its_events() -> None:
    """`JournalBatch` makes each event as it is read: by index (from either end), slice and iteration, the events
    `journal_events` makes; its row and its checks are the list's."""
    texts = ['{"a":1}', '{"b":2}', '{"c":3}', '{"d":4}']
    held, made = JournalBatch(texts, 7), journal_events(texts, 7)

    assert list(held) == made
    assert len(held) == 4
    assert [held[i] for i in range(-4, 4)] == made + made
    assert all(type(event) is JournalEvent for event in held)
    assert list(held[1:3]) == made[1:3] and list(held[::2]) == made[::2] and list(held[5:]) == []
    with pytest.raises(IndexError):
        held[4]
    assert pack_events(held) == pack_events(made)
    check_append("t", "r", held, last_seq=6, ended=False)
    for last_seq in (5, 7):
        with pytest.raises(ValueError, match="seq 8 next, not 7|seq 6 next, not 7"):
            check_append("t", "r", held, last_seq=last_seq, ended=False)
    with pytest.raises(ValueError, match="event 8 holds a newline"):
        check_append("t", "r", JournalBatch(['{"a":1}', '{"b":\n2}'], 7), last_seq=None, ended=False)
