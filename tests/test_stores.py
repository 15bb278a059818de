from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from adapter.stores import MemoryStore, SQLiteStore, StoreConflict, TurnStore


@pytest.fixture(params=["memory", "sqlite"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[TurnStore]:
    """Each conformance test runs against every store implementation."""
    instance: TurnStore = MemoryStore() if request.param == "memory" else SQLiteStore(tmp_path / "turns.db")
    yield instance
    await instance.close()


@pytest.fixture
async def sqlite_pair(tmp_path: Path) -> AsyncIterator[tuple[SQLiteStore, SQLiteStore]]:
    """Two independent store instances on one file, as two replicas would have."""
    first, second = SQLiteStore(tmp_path / "shared.db"), SQLiteStore(tmp_path / "shared.db")
    yield first, second
    await first.close()
    await second.close()


async def test_missing_thread_loads_none(store: TurnStore) -> None:
    assert await store.load("nope") is None


async def test_first_save_at_zero_gives_version_one(store: TurnStore) -> None:
    assert await store.save("t1", {"a": 1}, expected_version=0) == 1

    loaded = await store.load("t1")

    assert loaded is not None
    assert (loaded.document, loaded.version) == ({"a": 1}, 1)


async def test_each_save_advances_the_version(store: TurnStore) -> None:
    await store.save("t1", {"n": 1}, expected_version=0)

    assert await store.save("t1", {"n": 2}, expected_version=1) == 2
    loaded = await store.load("t1")
    assert loaded is not None
    assert (loaded.document, loaded.version) == ({"n": 2}, 2)


@pytest.mark.parametrize("stale", [0, 2, 7], ids=["create-over-existing", "ahead", "far-ahead"])
async def test_stale_version_conflicts_and_changes_nothing(store: TurnStore, stale: int) -> None:
    await store.save("t1", {"n": 1}, expected_version=0)

    with pytest.raises(StoreConflict) as caught:
        await store.save("t1", {"n": "overwritten"}, expected_version=stale)

    assert (caught.value.thread_id, caught.value.expected_version) == ("t1", stale)
    loaded = await store.load("t1")
    assert loaded is not None
    assert (loaded.document, loaded.version) == ({"n": 1}, 1)


async def test_update_of_a_missing_thread_conflicts(store: TurnStore) -> None:
    with pytest.raises(StoreConflict):
        await store.save("t1", {}, expected_version=1)

    assert await store.load("t1") is None


async def test_threads_are_independent(store: TurnStore) -> None:
    await store.save("t1", {"who": 1}, expected_version=0)
    await store.save("t2", {"who": 2}, expected_version=0)

    first, second = await store.load("t1"), await store.load("t2")

    assert first is not None and second is not None
    assert (first.document, second.document) == ({"who": 1}, {"who": 2})


async def test_documents_never_alias_the_stored_copy(store: TurnStore) -> None:
    pending: list[dict[str, str]] = [{"id": "c1"}]
    await store.save("t1", {"pending": pending, "text": "héllo 👍🏽", "lone": "\ud800"}, expected_version=0)
    pending.append({"id": "mutated-after-save"})

    loaded = await store.load("t1")
    assert loaded is not None
    loaded.document["pending"].clear()

    again = await store.load("t1")
    assert again is not None
    assert again.document == {"pending": [{"id": "c1"}], "text": "héllo 👍🏽", "lone": "\ud800"}


async def test_concurrent_saves_at_one_version_have_exactly_one_winner(store: TurnStore) -> None:
    results = await asyncio.gather(
        *(store.save("t1", {"writer": i}, expected_version=0) for i in range(20)),
        return_exceptions=True,
    )

    winners = [i for i, result in enumerate(results) if result == 1]
    assert len(winners) == 1
    assert all(isinstance(result, StoreConflict) for i, result in enumerate(results) if i not in winners)
    loaded = await store.load("t1")
    assert loaded is not None
    assert loaded.document == {"writer": winners[0]}


async def test_sqlite_data_survives_a_new_instance(tmp_path: Path) -> None:
    before = SQLiteStore(tmp_path / "turns.db")
    await before.save("t1", {"open": ["i1"]}, expected_version=0)
    await before.close()

    after = SQLiteStore(tmp_path / "turns.db")
    try:
        loaded = await after.load("t1")
        assert loaded is not None
        assert (loaded.document, loaded.version) == ({"open": ["i1"]}, 1)
        assert await after.save("t1", {"open": []}, expected_version=1) == 2
    finally:
        await after.close()


async def test_sqlite_instances_on_one_file_see_each_others_writes(
    sqlite_pair: tuple[SQLiteStore, SQLiteStore],
) -> None:
    first, second = sqlite_pair
    await first.save("t1", {"by": "first"}, expected_version=0)

    loaded = await second.load("t1")

    assert loaded is not None
    assert loaded.document == {"by": "first"}
    with pytest.raises(StoreConflict):
        await second.save("t1", {"by": "second"}, expected_version=0)


async def test_sqlite_cas_across_instances_has_exactly_one_winner(
    sqlite_pair: tuple[SQLiteStore, SQLiteStore],
) -> None:
    first, second = sqlite_pair
    for version in range(5):
        results = await asyncio.gather(
            *(
                instance.save("t1", {"round": version, "writer": i}, expected_version=version)
                for i, instance in enumerate([first, second] * 5)
            ),
            return_exceptions=True,
        )

        assert sum(result == version + 1 for result in results) == 1
        assert sum(isinstance(result, StoreConflict) for result in results) == 9


async def test_sqlite_uses_wal_journal(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "turns.db")
    await store.save("t1", {}, expected_version=0)
    await store.close()

    # Header bytes 18-19 are the file format versions; 2 means WAL, and it persists after close.
    assert (tmp_path / "turns.db").read_bytes()[18:20] == b"\x02\x02"


async def test_sqlite_refuses_use_after_close(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "turns.db")
    await store.close()
    await store.close()

    with pytest.raises(RuntimeError, match="closed"):
        await store.load("t1")
