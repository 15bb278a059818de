"""The contract every TurnStore keeps, run against each implementation.

To add a store, add one line to STORES: a factory that opens a fresh, empty store in `tmp_path`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pg import every_store

from adapter.stores import (
    KEEP,
    MemoryStore,
    StaleClaim,
    StoreConflict,
    StoredMessage,
    ThreadChange,
    TurnStore,
)

# Eight connections from the start, so that the concurrent tests' saves can overlap in separate transactions
# (from one, the pool grows too slowly for that); test_postgres_store.py holds the deterministic race.
STORES = every_store(min_size=8)


@pytest.fixture(params=STORES)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[TurnStore]:
    factory: Callable[[Path], TurnStore] = request.param
    instance = factory(tmp_path)
    yield instance
    await instance.close()


def msg(message_id: str, text: str = "hi", role: str = "user") -> StoredMessage:
    return StoredMessage(message_id, role, f'{{"id": "{message_id}", "role": "{role}", "content": "{text}"}}')


def ids(messages: Any) -> list[str]:
    return [m.id for m in messages]


async def seeded(store: TurnStore, *messages: StoredMessage, **records: Any) -> int:
    return await store.save("t1", ThreadChange(append=messages, **records), expected_version=0)


async def test_a_missing_thread_loads_none(store: TurnStore) -> None:
    assert await store.load("nope") is None
    assert await store.load("nope", since=None) is None


async def test_the_first_save_creates_the_thread_at_version_one(store: TurnStore) -> None:
    assert await seeded(store, msg("m0"), msg("m1"), open_turn={"turn": 1}) == 1

    loaded = await store.load("t1")

    assert loaded is not None
    head = loaded.head
    assert (head.version, head.claim, head.message_count) == (1, 0, 2)
    assert (head.open_turn, head.applied, head.queued) == ({"turn": 1}, None, None)
    assert (loaded.start, list(loaded.messages)) == (0, [msg("m0"), msg("m1")])


async def test_the_save_that_creates_a_thread_sets_its_owner_once(store: TurnStore) -> None:
    await store.save("t1", ThreadChange(append=[msg("m0")], owner="alice"), expected_version=0)
    await store.save("t1", ThreadChange(append=[msg("m1")], owner="bob"), expected_version=1)
    await store.save("t2", ThreadChange(append=[msg("m0")]), expected_version=0)

    owned, unowned = await store.load("t1", since=None), await store.load("t2", since=None)

    assert owned is not None and owned.head.owner == "alice"
    assert unowned is not None and unowned.head.owner is None


async def test_creating_a_thread_that_exists_conflicts_and_changes_neither_messages_nor_owner(
    store: TurnStore,
) -> None:
    """Creation is create-only: of two creators racing on one id, one wins whole and the other writes nothing."""
    creators = [ThreadChange(append=[msg(f"{who}-0"), msg(f"{who}-1")], owner=who) for who in ("alice", "mallory")]

    results = await asyncio.gather(
        *(store.save("t1", change, expected_version=0) for change in creators), return_exceptions=True
    )

    assert sorted(type(result).__name__ for result in results) == ["StoreConflict", "int"]
    winner = "alice" if results[0] == 1 else "mallory"
    loaded = await store.load("t1")
    assert loaded is not None
    assert (loaded.head.owner, ids(loaded.messages)) == (winner, [f"{winner}-0", f"{winner}-1"])
    with pytest.raises(StoreConflict):
        await store.save("t1", ThreadChange(append=[msg("late")], owner="mallory", keep=0), expected_version=0)
    assert await store.load("t1") == loaded


async def test_saves_append_in_order_and_advance_the_version(store: TurnStore) -> None:
    await seeded(store, msg("m0"))

    assert await store.save("t1", ThreadChange(append=[msg("m1"), msg("m2")]), expected_version=1) == 2
    assert await store.save("t1", ThreadChange(append=[msg("m3")]), expected_version=2) == 3

    loaded = await store.load("t1")
    assert loaded is not None
    assert (loaded.head.version, loaded.head.message_count) == (3, 4)
    assert ids(loaded.messages) == ["m0", "m1", "m2", "m3"]


async def test_load_since_reads_the_messages_from_that_position(store: TurnStore) -> None:
    await seeded(store, msg("m0"), msg("m1"), msg("m2"))

    tail, head_only, past = (
        await store.load("t1", since=2),
        await store.load("t1", since=None),
        await store.load("t1", since=9),
    )

    assert tail is not None and head_only is not None and past is not None
    assert (tail.start, ids(tail.messages)) == (2, ["m2"])
    assert (head_only.start, list(head_only.messages), head_only.head.message_count) == (3, [], 3)
    assert (past.start, list(past.messages)) == (3, [])


async def test_load_until_reads_a_slice_with_the_head_of_the_same_version(store: TurnStore) -> None:
    await seeded(store, *(msg(f"m{i}") for i in range(5)))
    await store.save("t1", ThreadChange(append=[msg("m5")]), expected_version=1)

    middle, tail, empty, past = (
        await store.load("t1", since=1, until=3),
        await store.load("t1", since=4, until=99),
        await store.load("t1", since=3, until=3),
        await store.load("t1", since=9, until=12),
    )

    assert middle is not None and tail is not None and empty is not None and past is not None
    assert (middle.start, ids(middle.messages), middle.head.message_count) == (1, ["m1", "m2"], 6)
    assert (middle.head.version, tail.head.version) == (2, 2)
    assert (tail.start, ids(tail.messages)) == (4, ["m4", "m5"])
    assert (empty.start, list(empty.messages)) == (3, [])
    assert (past.start, list(past.messages)) == (6, [])
    assert await store.load("nope", since=0, until=1) is None


async def test_every_slice_is_the_python_slice_of_the_whole_thread(store: TurnStore) -> None:
    """The rule, for every pair of bounds around a 4-message thread: `load(since=a, until=b)` is `whole[a:b]`."""
    await seeded(store, *(msg(f"m{i}") for i in range(4)))
    whole = await store.load("t1")
    assert whole is not None
    bounds: list[int | None] = [None, -1, 0, 1, 3, 4, 6]

    for since in bounds:
        for until in bounds:
            part = await store.load("t1", since=since, until=until)
            start = 4 if since is None else min(max(since, 0), 4)
            stop = 4 if until is None else max(until, 0)
            assert part is not None
            assert (part.start, list(part.messages)) == (start, list(whole.messages)[start:stop]), (since, until)


async def test_find_message_gives_the_position_of_the_first_message_with_the_id(store: TurnStore) -> None:
    await seeded(store, msg("m0"), msg("m1"), msg("twice"), msg("m3"), msg("twice"))
    await store.save("t2", ThreadChange(append=[msg("other")]), expected_version=0)

    found = [await store.find_message("t1", name) for name in ("m0", "twice", "m3", "other", "nope")]

    assert found == [0, 2, 3, None, None]
    assert await store.find_message("missing", "m0") is None


async def test_find_message_follows_keep_and_replace(store: TurnStore) -> None:
    await seeded(store, msg("m0"), msg("m1"), msg("m2"))
    await store.save("t1", ThreadChange(keep=1, append=[msg("n1")], replace={0: msg("r0")}), expected_version=1)

    found = [await store.find_message("t1", name) for name in ("m0", "r0", "m1", "m2", "n1")]

    assert found == [None, 0, None, None, 1]


async def test_messages_come_back_exactly_as_appended(store: TurnStore) -> None:
    odd = StoredMessage("m0", "user", '{"id":"m0","role":"user","content":"h\\u00e9llo \\ud800 👍🏽"}')
    await seeded(store, odd)

    loaded = await store.load("t1")

    assert loaded is not None
    assert loaded.messages[0] == odd


async def test_replace_changes_only_the_named_positions(store: TurnStore) -> None:
    await seeded(store, msg("m0"), msg("card", "pending", "activity"), msg("m2"))

    moved = msg("card", "submitted", "activity")
    await store.save("t1", ThreadChange(replace={1: moved}, append=[msg("m3")]), expected_version=1)

    loaded = await store.load("t1")
    assert loaded is not None
    assert list(loaded.messages) == [msg("m0"), moved, msg("m2"), msg("m3")]


async def test_keep_drops_the_messages_after_it_before_appending(store: TurnStore) -> None:
    await seeded(store, msg("m0"), msg("m1"), msg("m2"))

    await store.save("t1", ThreadChange(keep=1, append=[msg("x1")]), expected_version=1)

    loaded = await store.load("t1")
    assert loaded is not None
    assert (ids(loaded.messages), loaded.head.message_count) == (["m0", "x1"], 2)
    await store.save("t1", ThreadChange(keep=0), expected_version=2)
    emptied = await store.load("t1")
    assert emptied is not None and list(emptied.messages) == [] and emptied.head.message_count == 0


@pytest.mark.parametrize(
    "change",
    [
        ThreadChange(keep=3),
        ThreadChange(keep=-1),
        ThreadChange(replace={2: msg("x")}),
        ThreadChange(keep=1, replace={1: msg("x")}),
    ],
    ids=["keep-past-end", "keep-negative", "replace-past-end", "replace-past-keep"],
)
async def test_positions_the_thread_lacks_are_refused_and_nothing_is_written(
    store: TurnStore, change: ThreadChange
) -> None:
    await seeded(store, msg("m0"), msg("m1"))

    with pytest.raises(ValueError):
        await store.save("t1", change, expected_version=1)

    loaded = await store.load("t1")
    assert loaded is not None
    assert (loaded.head.version, ids(loaded.messages)) == (1, ["m0", "m1"])


async def test_head_records_are_set_kept_or_cleared(store: TurnStore) -> None:
    await seeded(store, open_turn={"pending": ["i1"]}, applied={"run": "r0"}, queued=[{"interruptId": "i1"}])

    await store.save("t1", ThreadChange(open_turn=None, applied=KEEP, queued=None), expected_version=1)

    loaded = await store.load("t1")
    assert loaded is not None
    assert (loaded.head.open_turn, loaded.head.applied, loaded.head.queued) == (None, {"run": "r0"}, None)


async def test_head_records_keep_any_json_text(store: TurnStore) -> None:
    value = {"text": "héllo 👍🏽", "lone": "\ud800", "list": [1, 2.5, True, None]}
    await seeded(store, applied=value)

    loaded = await store.load("t1")

    assert loaded is not None and loaded.head.applied == value


async def test_what_was_saved_or_loaded_never_aliases_the_stored_copy(store: TurnStore) -> None:
    pending: list[dict[str, str]] = [{"id": "c1"}]
    await seeded(store, open_turn={"pending": pending})
    pending.append({"id": "mutated-after-save"})

    loaded = await store.load("t1")
    assert loaded is not None
    loaded.head.open_turn["pending"].clear()

    again = await store.load("t1")
    assert again is not None and again.head.open_turn == {"pending": [{"id": "c1"}]}


@pytest.mark.parametrize("stale", [0, 2, 7], ids=["create-over-existing", "ahead", "far-ahead"])
async def test_a_stale_version_conflicts_and_changes_nothing(store: TurnStore, stale: int) -> None:
    await seeded(store, msg("m0"), open_turn={"n": 1})

    with pytest.raises(StoreConflict) as caught:
        await store.save("t1", ThreadChange(append=[msg("x")], open_turn=None), expected_version=stale)

    assert (caught.value.thread_id, caught.value.expected_version) == ("t1", stale)
    loaded = await store.load("t1")
    assert loaded is not None
    assert (loaded.head.version, loaded.head.open_turn, ids(loaded.messages)) == (1, {"n": 1}, ["m0"])


async def test_an_update_of_a_missing_thread_conflicts(store: TurnStore) -> None:
    with pytest.raises(StoreConflict):
        await store.save("t1", ThreadChange(append=[msg("m0")]), expected_version=1)

    assert await store.load("t1") is None


async def test_threads_are_independent(store: TurnStore) -> None:
    await store.save("t1", ThreadChange(append=[msg("a")], applied=1), expected_version=0)
    await store.save("t2", ThreadChange(append=[msg("b")], applied=2), expected_version=0)

    first, second = await store.load("t1"), await store.load("t2")

    assert first is not None and second is not None
    assert (ids(first.messages), first.head.applied, ids(second.messages), second.head.applied) == (["a"], 1, ["b"], 2)


async def test_a_claim_advances_the_claim_number_and_never_goes_back(store: TurnStore) -> None:
    await seeded(store, open_turn={"n": 1})

    await store.save("t1", ThreadChange(claim=True), expected_version=1)
    await store.save("t1", ThreadChange(open_turn=None), expected_version=2, fence=1)
    await store.save("t1", ThreadChange(open_turn={"n": 2}), expected_version=3)
    await store.save("t1", ThreadChange(claim=True), expected_version=4)

    loaded = await store.load("t1", since=None)
    assert loaded is not None and (loaded.head.claim, loaded.head.version) == (2, 5)


async def test_a_save_fenced_by_a_superseded_claim_is_refused_even_at_the_current_version(store: TurnStore) -> None:
    await seeded(store, open_turn={"n": 1})
    await store.save("t1", ThreadChange(claim=True), expected_version=1)  # the first claimant holds 1
    await store.save("t1", ThreadChange(claim=True), expected_version=2)  # its lease ran out: taken over, 2

    with pytest.raises(StaleClaim) as caught:
        await store.save("t1", ThreadChange(open_turn=None, append=[msg("late")]), expected_version=3, fence=1)

    assert isinstance(caught.value, StoreConflict) and caught.value.fence == 1
    loaded = await store.load("t1")
    assert loaded is not None
    assert (loaded.head.version, loaded.head.open_turn, list(loaded.messages)) == (3, {"n": 1}, [])
    assert await store.save("t1", ThreadChange(open_turn=None), expected_version=3, fence=2) == 4


async def test_a_fence_on_a_never_claimed_thread_is_zero(store: TurnStore) -> None:
    with pytest.raises(StaleClaim):
        await store.save("t1", ThreadChange(), expected_version=0, fence=1)

    assert await store.save("t1", ThreadChange(), expected_version=0, fence=0) == 1


async def test_concurrent_saves_at_one_version_have_exactly_one_winner(store: TurnStore) -> None:
    results = await asyncio.gather(
        *(store.save("t1", ThreadChange(append=[msg(f"w{i}")]), expected_version=0) for i in range(20)),
        return_exceptions=True,
    )

    winners = [i for i, result in enumerate(results) if result == 1]
    assert len(winners) == 1
    assert all(isinstance(result, StoreConflict) for i, result in enumerate(results) if i not in winners)
    loaded = await store.load("t1")
    assert loaded is not None and ids(loaded.messages) == [f"w{winners[0]}"]


async def test_concurrent_claims_give_exactly_one_claimant(store: TurnStore) -> None:
    await seeded(store, open_turn={"n": 1})

    results = await asyncio.gather(
        *(store.save("t1", ThreadChange(claim=True), expected_version=1, fence=0) for _ in range(10)),
        return_exceptions=True,
    )

    assert results.count(2) == 1
    assert all(isinstance(result, StoreConflict) for result in results if result != 2)
    loaded = await store.load("t1", since=None)
    assert loaded is not None and loaded.head.claim == 1


async def test_ping_answers_while_the_store_is_open_and_refuses_once_it_is_closed(store: TurnStore) -> None:
    """`GET /health` reports what `ping` says: a store whose connection is gone must not answer it."""
    await store.ping()
    await store.close()

    if isinstance(store, MemoryStore):  # it lives in this process: closing releases nothing, and it still answers
        await store.ping()
    else:
        with pytest.raises(RuntimeError, match="closed"):
            await store.ping()


async def test_each_store_keeps_the_whole_protocol_purge_and_ping_included(store: TurnStore) -> None:
    class WithoutPurge:
        load, save, find_message, ping, close = store.load, store.save, store.find_message, store.ping, store.close

    class WithoutFind:
        load, save, purge, ping, close = store.load, store.save, store.purge, store.ping, store.close

    assert isinstance(store, TurnStore)
    assert not isinstance(WithoutPurge(), TurnStore)
    assert not isinstance(WithoutFind(), TurnStore)


def expiring_turn(*expiries: datetime | None) -> dict[str, Any]:
    """An open turn as the engine stores it, whose pending interrupts expire at these times."""
    return {
        "turn_id": "turn1",
        "pending": [
            {"interrupt_id": f"i{n}", "expires_at": None if moment is None else moment.isoformat()}
            for n, moment in enumerate(expiries)
        ],
    }


async def test_purge_deletes_finished_threads_idle_longer_than_the_age(store: TurnStore) -> None:
    now = datetime.now(UTC)
    await store.save("done", ThreadChange(append=[msg("m0")], open_turn=None), expected_version=0)
    await store.save("waiting", ThreadChange(open_turn={"pending": [{"interrupt_id": "i1"}]}), expected_version=0)
    await store.save("queued", ThreadChange(queued=[{"interruptId": "i1"}]), expected_version=0)

    fresh = await store.purge(timedelta(days=30), now=now)
    aged = await store.purge(timedelta(days=30), now=now + timedelta(days=31))

    assert (fresh, aged) == (0, 1)
    assert await store.load("done") is None
    assert await store.load("waiting") is not None and await store.load("queued") is not None
    assert await store.save("done", ThreadChange(append=[msg("again")]), expected_version=0) == 1


async def test_purge_deletes_open_turns_expired_past_the_grace(store: TurnStore) -> None:
    now = datetime.now(UTC)
    hour = timedelta(hours=1)
    await store.save("expiring", ThreadChange(open_turn=expiring_turn(now, now + hour)), expected_version=0)
    await store.save("forever", ThreadChange(open_turn=expiring_turn(now, None)), expected_version=0)
    purge = store.purge

    within_grace = await purge(timedelta(days=30), grace=timedelta(days=1), now=now + 2 * hour)
    past_grace = await purge(timedelta(days=30), grace=timedelta(days=1), now=now + timedelta(days=1) + 2 * hour)

    assert (within_grace, past_grace) == (0, 1)
    assert await store.load("expiring") is None
    assert await store.load("forever") is not None


async def test_an_answered_turn_is_no_longer_purged_for_its_expiry(store: TurnStore) -> None:
    now = datetime.now(UTC)
    await store.save("t1", ThreadChange(open_turn=expiring_turn(now)), expected_version=0)
    await store.save("t1", ThreadChange(open_turn={"pending": [{"interrupt_id": "i9"}]}), expected_version=1)

    assert await store.purge(timedelta(days=30), now=now + timedelta(days=2)) == 0
    assert await store.load("t1") is not None
