"""The contract every TurnStore keeps, run against each implementation.

To add a store, add one line to STORES: a factory that opens a fresh, empty store in `tmp_path`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pg import every_store

from adapter.stores import (
    ANY_INCARNATION,
    KEEP,
    JournalAppend,
    JournalEvent,
    MemoryStore,
    RunJournal,
    StaleClaim,
    StoreConflict,
    StoredMessage,
    ThreadChange,
    ThreadGone,
    TurnStore,
)
from adapter.stores._listing import next_cursor, parse_cursor, to_micros  # private on purpose: the cursor rule
from adapter.stores._protocol import (
    JournalBatch,  # private on purpose: the batches a live run's writer hands over
    load_or_create,  # private on purpose: the fallback for a store of one's own
    save_and_append,  # private on purpose: the fallback for a store of one's own
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
    assert (head.open_turn, head.applied, head.grants) == ({"turn": 1}, None, None)
    assert (loaded.start, list(loaded.messages)) == (0, [msg("m0"), msg("m1")])


async def test_the_save_that_creates_a_thread_sets_its_owner_once(store: TurnStore) -> None:
    await store.save("t1", ThreadChange(append=[msg("m0")], owner="alice"), expected_version=0)
    await store.save("t1", ThreadChange(append=[msg("m1")], owner="bob"), expected_version=1)
    await store.save("t2", ThreadChange(append=[msg("m0")]), expected_version=0)

    owned, unowned = await store.load("t1", since=None), await store.load("t2", since=None)

    assert owned is not None
    assert owned.head.owner == "alice"
    assert unowned is not None
    assert unowned.head.owner is None


async def test_the_save_that_creates_a_thread_names_its_incarnation_and_a_recreation_has_its_own(
    store: TurnStore,
) -> None:
    await store.save("t1", ThreadChange(append=[msg("m0")], incarnation="first"), expected_version=0)
    await store.save("t1", ThreadChange(append=[msg("m1")], incarnation="later"), expected_version=1)
    kept = await store.load("t1", since=None)
    await store.delete_thread("t1")
    await store.save("t1", ThreadChange(append=[msg("m0")], incarnation="again"), expected_version=0)
    await store.save("t2", ThreadChange(append=[msg("m0")]), expected_version=0)

    again, unnamed = await store.load("t1"), await store.load("t2")

    assert kept is not None
    assert (kept.head.incarnation, kept.head.version) == ("first", 2)
    assert again is not None
    assert (again.head.incarnation, again.head.version) == ("again", 1)
    assert unnamed is not None
    assert unnamed.head.incarnation is None


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

    assert tail is not None
    assert head_only is not None
    assert past is not None
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

    assert middle is not None
    assert tail is not None
    assert empty is not None
    assert past is not None
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
    assert emptied is not None
    assert list(emptied.messages) == []
    assert emptied.head.message_count == 0


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
    await seeded(store, open_turn={"pending": ["i1"]}, applied={"run": "r0"}, grants=[{"tool": "t"}])

    await store.save("t1", ThreadChange(open_turn=None, applied=KEEP, grants=None), expected_version=1)

    loaded = await store.load("t1")
    assert loaded is not None
    assert (loaded.head.open_turn, loaded.head.applied, loaded.head.grants) == (None, {"run": "r0"}, None)


GRANT = [{"tool": "send_email", "grantedBy": "bob", "grantedAt": "2026-12-06T20:00:00+00:00"}]


async def test_grants_are_a_head_record_set_kept_or_cleared_by_compare_and_set(store: TurnStore) -> None:
    await seeded(store, msg("m0"))

    await store.save("t1", ThreadChange(grants=GRANT, open_turn={"n": 1}), expected_version=1)
    with pytest.raises(StoreConflict):  # a second writer on the version it read changes nothing
        await store.save("t1", ThreadChange(grants=None), expected_version=1)
    kept = await store.save("t1", ThreadChange(append=[msg("m1")], open_turn=None), expected_version=2)
    read = await store.load("t1", since=None)
    await store.save("t1", ThreadChange(grants=None), expected_version=kept)
    cleared = await store.load("t1", since=None)

    assert read is not None
    assert (read.head.grants, read.head.open_turn) == (GRANT, None)
    assert cleared is not None
    assert cleared.head.grants is None


async def test_a_thread_made_again_after_a_delete_has_no_grants(store: TurnStore) -> None:
    await seeded(store, msg("m0"), grants=GRANT)
    created = await store.load("t1", since=None)

    await store.delete_thread("t1")
    await store.save("t1", ThreadChange(append=[msg("m0")]), expected_version=0)

    again = await store.load("t1", since=None)
    assert created is not None
    assert created.head.grants == GRANT
    assert again is not None
    assert again.head.grants is None


async def test_head_records_keep_any_json_text(store: TurnStore) -> None:
    value = {"text": "héllo 👍🏽", "lone": "\ud800", "list": [1, 2.5, True, None]}
    await seeded(store, applied=value)

    loaded = await store.load("t1")

    assert loaded is not None
    assert loaded.head.applied == value


async def test_what_was_saved_or_loaded_never_aliases_the_stored_copy(store: TurnStore) -> None:
    pending: list[dict[str, str]] = [{"id": "c1"}]
    await seeded(store, open_turn={"pending": pending})
    pending.append({"id": "mutated-after-save"})

    loaded = await store.load("t1")
    assert loaded is not None
    loaded.head.open_turn["pending"].clear()

    again = await store.load("t1")
    assert again is not None
    assert again.head.open_turn == {"pending": [{"id": "c1"}]}


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

    assert first is not None
    assert second is not None
    assert (ids(first.messages), first.head.applied, ids(second.messages), second.head.applied) == (["a"], 1, ["b"], 2)


async def test_a_claim_advances_the_claim_number_and_never_goes_back(store: TurnStore) -> None:
    await seeded(store, open_turn={"n": 1})

    await store.save("t1", ThreadChange(claim=True), expected_version=1)
    await store.save("t1", ThreadChange(open_turn=None), expected_version=2, fence=1)
    await store.save("t1", ThreadChange(open_turn={"n": 2}), expected_version=3)
    await store.save("t1", ThreadChange(claim=True), expected_version=4)

    loaded = await store.load("t1", since=None)
    assert loaded is not None
    assert (loaded.head.claim, loaded.head.version) == (2, 5)


async def test_a_save_fenced_by_a_superseded_claim_is_refused_even_at_the_current_version(store: TurnStore) -> None:
    await seeded(store, open_turn={"n": 1})
    await store.save("t1", ThreadChange(claim=True), expected_version=1)  # the first claimant holds 1
    await store.save("t1", ThreadChange(claim=True), expected_version=2)  # its lease ran out: taken over, 2

    with pytest.raises(StaleClaim) as caught:
        await store.save("t1", ThreadChange(open_turn=None, append=[msg("late")]), expected_version=3, fence=1)

    assert isinstance(caught.value, StoreConflict)
    assert caught.value.fence == 1
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
    assert loaded is not None
    assert ids(loaded.messages) == [f"w{winners[0]}"]


async def test_concurrent_claims_give_exactly_one_claimant(store: TurnStore) -> None:
    await seeded(store, open_turn={"n": 1})

    results = await asyncio.gather(
        *(store.save("t1", ThreadChange(claim=True), expected_version=1, fence=0) for _ in range(10)),
        return_exceptions=True,
    )

    assert results.count(2) == 1
    assert all(isinstance(result, StoreConflict) for result in results if result != 2)
    loaded = await store.load("t1", since=None)
    assert loaded is not None
    assert loaded.head.claim == 1


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

    class WithoutJournals:
        load, save, find_message, purge, ping, close = (
            store.load,
            store.save,
            store.find_message,
            store.purge,
            store.ping,
            store.close,
        )
        list_threads, delete_thread = store.list_threads, store.delete_thread

    assert isinstance(store, TurnStore)
    assert not isinstance(WithoutPurge(), TurnStore)
    assert not isinstance(WithoutFind(), TurnStore)
    assert not isinstance(WithoutJournals(), TurnStore)


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

    fresh = await store.purge(timedelta(days=30), now=now)
    aged = await store.purge(timedelta(days=30), now=now + timedelta(days=31))

    assert (fresh, aged) == (0, 1)
    assert await store.load("done") is None
    assert await store.load("waiting") is not None
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


def events(first: int, count: int, tag: str = "e") -> list[JournalEvent]:
    return [JournalEvent(seq, f'{{"type": "CUSTOM", "name": "{tag}{seq}"}}') for seq in range(first, first + count)]


async def journal(store: TurnStore, thread_id: str = "t1", run_id: str = "r1") -> RunJournal:
    read = await store.read_events(thread_id, run_id)
    assert read is not None
    return read


async def test_a_journal_reads_back_its_events_in_order_from_any_seq(store: TurnStore) -> None:
    assert await store.append_events("t1", "r1", events(1, 2)) is False
    assert await store.append_events("t1", "r1", events(3, 3)) is False
    await store.append_events("t1", "r2", events(1, 1, "other"))

    whole, middle, status, past = (
        await store.read_events("t1", "r1"),
        await store.read_events("t1", "r1", after=2, limit=2),
        await store.read_events("t1", "r1", after=1, limit=0),
        await store.read_events("t1", "r1", after=9),
    )

    assert whole == RunJournal(events(1, 5), ended=False, stop_requested=False, last_seq=5)
    assert middle == RunJournal(events(3, 2), ended=False, stop_requested=False, last_seq=5)
    assert status == RunJournal([], ended=False, stop_requested=False, last_seq=5)
    assert past == RunJournal([], ended=False, stop_requested=False, last_seq=5)
    assert await store.read_events("t1", "r1", after=-3) == whole
    assert await store.read_events("t1", "nope") is None
    assert await store.read_events("t2", "r1") is None
    assert list((await journal(store, "t1", "r2")).events) == events(1, 1, "other")
    with pytest.raises(ValueError):
        await store.read_events("t1", "r1", limit=-1)


async def test_events_come_back_exactly_as_appended(store: TurnStore) -> None:
    odd = JournalEvent(1, '{"type":"TEXT_MESSAGE_CONTENT","delta":"h\\u00e9llo \\ud800 👍🏽 👨‍👩‍👧",  "x" : 1}')
    await store.append_events("t1", "r1", [odd])

    assert list((await journal(store)).events) == [odd]


@pytest.mark.parametrize(
    ("first", "then"),
    [
        pytest.param(2, events(4, 1), id="gap"),
        pytest.param(2, events(2, 1), id="repeat"),
        pytest.param(2, events(1, 3), id="overlap"),
        pytest.param(2, [*events(3, 1), *events(5, 1)], id="gap-inside"),
        pytest.param(2, [*events(3, 1), *events(3, 1)], id="repeat-inside"),
        pytest.param(2, [*events(4, 1), *events(3, 1)], id="out-of-order"),
        pytest.param(0, events(2, 1), id="first-not-1"),
        pytest.param(0, events(0, 2), id="from-0"),
        pytest.param(0, events(-1, 3), id="negative"),
    ],
)
async def test_an_append_that_does_not_continue_the_journal_is_refused_and_writes_nothing(
    store: TurnStore, first: int, then: list[JournalEvent]
) -> None:
    if first:
        await store.append_events("t1", "r1", events(1, first))
    before = await store.read_events("t1", "r1")

    with pytest.raises(ValueError, match="seq|from 1"):
        await store.append_events("t1", "r1", then, ended=True)

    assert await store.read_events("t1", "r1") == before
    assert await store.append_events("t1", "r1", events(first + 1, 1)) is False  # it still takes the right seq


async def test_an_ended_journal_takes_no_more_appends(store: TurnStore) -> None:
    await store.append_events("t1", "r1", events(1, 2))
    await store.append_events("t1", "r1", events(3, 1), ended=True)
    ended = await journal(store)

    for late in (events(4, 1), [], events(5, 1)):
        with pytest.raises(ValueError, match="ended"):
            await store.append_events("t1", "r1", late)

    assert ended == RunJournal(events(1, 3), ended=True, stop_requested=False, last_seq=3)
    assert await journal(store) == ended


async def test_an_empty_append_creates_the_journal_ends_it_or_only_reports_a_stop(store: TurnStore) -> None:
    assert await store.append_events("t1", "r1", []) is False
    created = await journal(store)
    await store.request_stop("t1", "r1")
    asked = await store.append_events("t1", "r1", [])
    await store.append_events("t1", "r1", events(1, 1))
    await store.append_events("t1", "r1", [], ended=True)

    assert created == RunJournal([], ended=False, stop_requested=False, last_seq=0)
    assert asked is True
    assert await journal(store) == RunJournal(events(1, 1), ended=True, stop_requested=True, last_seq=1)


async def test_a_journal_may_come_before_its_thread_and_outlives_none_of_its_saves(store: TurnStore) -> None:
    await store.append_events("t1", "r1", events(1, 2))

    assert await store.load("t1") is None
    assert await store.save("t1", ThreadChange(append=[msg("m0")]), expected_version=0) == 1
    assert (await journal(store)).last_seq == 2


async def test_a_stop_request_is_kept_and_reported_until_the_journal_goes(store: TurnStore) -> None:
    assert await store.request_stop("t1", "r1") is False  # no journal yet
    assert await store.read_events("t1", "r1") is None
    await store.append_events("t1", "r1", events(1, 1))

    first, again = await store.request_stop("t1", "r1"), await store.request_stop("t1", "r1")
    reported = await store.append_events("t1", "r1", events(2, 1))
    on_the_end = await store.append_events("t1", "r1", events(3, 1), ended=True)

    assert (first, again, reported, on_the_end) == (True, True, True, True)
    assert await store.request_stop("t1", "r1") is False  # it ended
    assert await journal(store) == RunJournal(events(1, 3), ended=True, stop_requested=True, last_seq=3)
    assert (await store.request_stop("t1", "r2"), await store.read_events("t1", "r2")) == (False, None)


def batch(first: int, count: int, tag: str = "e") -> JournalBatch:
    """`events(first, count, tag)` held as a live run's writer holds them: their texts."""
    return JournalBatch([event.json for event in events(first, count, tag)], first)


async def test_a_batch_held_as_texts_is_appended_and_refused_as_its_events(store: TurnStore) -> None:
    """What a live run's writer hands over (`JournalBatch`, a sequence of `JournalEvent`s made as read) is stored,
    and refused, as the same events in a list."""
    assert await store.append_events("t1", "r1", batch(1, 2)) is False
    with pytest.raises(ValueError, match="seq"):
        await store.append_events("t1", "r1", batch(4, 1))
    with pytest.raises(ValueError, match="newline"):
        await store.append_events("t1", "r1", JournalBatch(['{"a":\n1}'], 3))
    await merged(store)("t1", ThreadChange(append=[msg("m0")]), JournalAppend("r1", batch(3, 2)), expected_version=0)
    await store.append_events("t1", "r1", batch(5, 1), ended=True)

    assert await journal(store) == RunJournal(events(1, 5), ended=True, stop_requested=False, last_seq=5)


async def test_concurrent_appends_of_one_seq_have_exactly_one_winner(store: TurnStore) -> None:
    await store.append_events("t1", "r1", events(1, 1))

    results = await asyncio.gather(
        *(store.append_events("t1", "r1", events(2, 2, f"w{i}-")) for i in range(10)), return_exceptions=True
    )

    winners = [i for i, result in enumerate(results) if result is False]
    assert len(winners) == 1, results
    assert all(isinstance(result, ValueError) for i, result in enumerate(results) if i not in winners)
    assert list((await journal(store)).events) == [*events(1, 1), *events(2, 2, f"w{winners[0]}-")]


async def test_concurrent_first_appends_create_one_journal(store: TurnStore) -> None:
    results = await asyncio.gather(
        *(store.append_events("t1", "r1", events(1, 1, f"w{i}-")) for i in range(10)), return_exceptions=True
    )

    assert sum(result is False for result in results) == 1, results
    assert (await journal(store)).last_seq == 1


def merged(store: TurnStore) -> Any:
    """The store's `save_and_append`: every store that ships has it (one transaction for both)."""
    method = getattr(store, "save_and_append", None)
    assert callable(method), f"{type(store).__name__} lacks save_and_append"
    return method


async def test_a_save_and_an_append_in_one_call_write_both(store: TurnStore) -> None:
    creating = ThreadChange(append=[msg("m0")], owner="al", incarnation="life", title="Hi", grants=GRANT)

    version, stop = await merged(store)("t1", creating, JournalAppend("r1", events(1, 1)), expected_version=0)
    await store.request_stop("t1", "r1")
    finishing = ThreadChange(append=[msg("m1")], open_turn={"n": 1})
    last = JournalAppend("r1", events(2, 2), ended=True)
    after, asked = await merged(store)("t1", finishing, last, expected_version=1, incarnation="life")

    loaded = await store.load("t1")
    assert (version, stop, after, asked) == (1, False, 2, True)
    assert loaded is not None
    assert ids(loaded.messages) == ["m0", "m1"]
    head = loaded.head
    assert (head.owner, head.incarnation, head.title, head.grants, head.open_turn) == (
        "al",
        "life",
        "Hi",
        GRANT,
        {"n": 1},
    )
    assert head.stamp == finishing.stamp
    assert await journal(store) == RunJournal(events(1, 3), ended=True, stop_requested=True, last_seq=3)


@pytest.mark.parametrize(
    ("version", "fence", "life", "refused"),
    [
        pytest.param(2, None, ANY_INCARNATION, StoreConflict, id="stale-version"),
        pytest.param(0, None, ANY_INCARNATION, StoreConflict, id="creating-an-existing-thread"),
        pytest.param(1, 0, ANY_INCARNATION, StaleClaim, id="stale-claim"),
        pytest.param(1, None, "another", ThreadGone, id="another-life"),
    ],
)
async def test_a_refused_save_appends_nothing(
    store: TurnStore, version: int, fence: int | None, life: object, refused: type[Exception]
) -> None:
    await store.save("t1", ThreadChange(append=[msg("m0")], incarnation="life", claim=True), expected_version=0)
    await store.append_events("t1", "r1", events(1, 1))
    before = await store.load("t1"), await store.read_events("t1", "r1")

    with pytest.raises(refused):
        change = ThreadChange(append=[msg("m1")])
        await merged(store)(
            "t1", change, JournalAppend("r1", events(2, 1)), expected_version=version, fence=fence, incarnation=life
        )

    assert (await store.load("t1"), await store.read_events("t1", "r1")) == before


async def test_a_claim_and_its_journals_opening_in_one_call_write_both(store: TurnStore) -> None:
    """A resume's claim carries its journal's first events (RUN_STARTED): the claim and the new journal, together."""
    await store.save("t1", ThreadChange(append=[msg("m0")], open_turn={"n": 1}, incarnation="life"), expected_version=0)

    claiming = ThreadChange(open_turn={"n": 1, "claimed": True}, claim=True)
    version, stop = await merged(store)(
        "t1", claiming, JournalAppend("r2", events(1, 2)), expected_version=1, fence=0, incarnation="life"
    )

    loaded = await store.load("t1", since=None)
    assert (version, stop) == (2, False)
    assert loaded is not None
    assert (loaded.head.claim, loaded.head.open_turn) == (1, {"n": 1, "claimed": True})
    assert await journal(store, run_id="r2") == RunJournal(events(1, 2), ended=False, stop_requested=False, last_seq=2)


@pytest.mark.parametrize(
    ("version", "fence", "life", "refused"),
    [
        pytest.param(1, 1, "life", StoreConflict, id="lost-the-race"),
        pytest.param(2, 0, "life", StaleClaim, id="lapsed-claim-taken-over"),
        pytest.param(2, 1, "life", ThreadGone, id="deleted-thread"),
    ],
)
async def test_a_refused_claim_opens_no_journal(
    store: TurnStore, version: int, fence: int, life: str, refused: type[Exception]
) -> None:
    """Whatever refuses the claim (another resume claimed first, a newer claim took over, the thread was deleted)."""
    await store.save("t1", ThreadChange(append=[msg("m0")], open_turn={"n": 1}, incarnation="life"), expected_version=0)
    await store.save("t1", ThreadChange(claim=True), expected_version=1, fence=0, incarnation="life")
    if refused is ThreadGone:
        await store.delete_thread("t1")
    before = await store.load("t1")

    with pytest.raises(refused):
        claiming = ThreadChange(open_turn={"n": 1, "claimed": True}, claim=True)
        await merged(store)(
            "t1", claiming, JournalAppend("r2", events(1, 1)), expected_version=version, fence=fence, incarnation=life
        )

    assert await store.load("t1") == before
    assert await store.read_events("t1", "r2") is None


@pytest.mark.parametrize(
    "appended",
    [
        pytest.param(JournalAppend("r1", events(3, 1)), id="gap"),
        pytest.param(JournalAppend("r1", events(1, 1)), id="repeat"),
        pytest.param(JournalAppend("ended", events(2, 1)), id="ended"),
    ],
)
async def test_a_refused_append_saves_nothing(store: TurnStore, appended: JournalAppend) -> None:
    await seeded(store, msg("m0"))
    await store.append_events("t1", "r1", events(1, 1))
    await store.append_events("t1", "ended", events(1, 1), ended=True)
    before = await store.load("t1"), await store.read_events("t1", appended.run_id)

    with pytest.raises(ValueError, match="seq|ended"):
        await merged(store)("t1", ThreadChange(append=[msg("m1")], title="T"), appended, expected_version=1)

    assert (await store.load("t1"), await store.read_events("t1", appended.run_id)) == before


async def test_of_concurrent_merged_creations_one_wins_whole(store: TurnStore) -> None:
    results = await asyncio.gather(
        *(
            merged(store)("t1", ThreadChange(owner=f"w{i}"), JournalAppend(f"r{i}", events(1, 1)), expected_version=0)
            for i in range(6)
        ),
        return_exceptions=True,
    )

    won = [i for i, result in enumerate(results) if result == (1, False)]
    assert len(won) == 1, results
    assert all(isinstance(r, StoreConflict) for i, r in enumerate(results) if i not in won), results
    loaded = await store.load("t1", since=None)
    assert loaded is not None
    assert loaded.head.owner == f"w{won[0]}"
    assert [await store.read_events("t1", f"r{i}") is not None for i in range(6)] == [i in won for i in range(6)]


async def test_a_store_without_the_merged_method_gets_the_save_then_the_append(store: TurnStore) -> None:
    class Plain:
        save, append_events = store.save, store.append_events

    saved = await save_and_append(
        cast("TurnStore", Plain()),
        "t1",
        ThreadChange(append=[msg("m0")]),
        JournalAppend("r1", events(1, 1)),
        expected_version=0,
    )

    loaded = await store.load("t1")
    assert saved == (1, False)
    assert loaded is not None
    assert ids(loaded.messages) == ["m0"]
    assert (await journal(store)).last_seq == 1


def loads_or_creates(store: TurnStore) -> Any:
    """The store's `load_or_create`: every store that ships has it (the load and the creation in one call)."""
    method = getattr(store, "load_or_create", None)
    assert callable(method), f"{type(store).__name__} lacks load_or_create"
    return method


CREATING = ThreadChange(owner="al", incarnation="life", title="Hi")


async def test_a_load_that_finds_no_thread_creates_it_with_its_journals_opening(store: TurnStore) -> None:
    found = await loads_or_creates(store)("t1", CREATING, JournalAppend("r1", events(1, 1)))

    loaded = await store.load("t1")
    assert found is None
    assert loaded is not None
    head = loaded.head
    assert (head.version, head.claim, head.message_count) == (1, 0, 0)
    assert (head.owner, head.incarnation, head.title, head.stamp) == ("al", "life", "Hi", CREATING.stamp)
    assert await journal(store) == RunJournal(events(1, 1), ended=False, stop_requested=False, last_seq=1)


async def test_a_load_that_creates_without_a_journal_creates_the_thread_alone(store: TurnStore) -> None:
    assert await loads_or_creates(store)("t1", CREATING) is None

    loaded = await store.load("t1", since=None)
    assert loaded is not None
    assert (loaded.head.version, loaded.head.owner, loaded.head.title) == (1, "al", "Hi")


@pytest.mark.parametrize("since", [0, 1, None])
async def test_a_load_that_finds_the_thread_returns_it_and_writes_nothing(store: TurnStore, since: int | None) -> None:
    await store.save("t1", ThreadChange(append=[msg("m0"), msg("m1")], owner="bob", title="Theirs"), expected_version=0)
    before = await store.load("t1", since=since)

    found = await loads_or_creates(store)("t1", CREATING, JournalAppend("r1", events(1, 1)), since=since)

    assert found == before
    assert await store.load("t1", since=since) == before
    assert await store.read_events("t1", "r1") is None


async def test_a_creation_whose_journal_is_refused_writes_nothing(store: TurnStore) -> None:
    await store.append_events("t1", "r1", events(1, 1))  # a journal may exist before its thread

    with pytest.raises(ValueError, match="seq"):
        await loads_or_creates(store)("t1", CREATING, JournalAppend("r1", events(1, 1)))

    assert await store.load("t1") is None
    assert (await journal(store)).last_seq == 1


async def test_of_concurrent_loads_that_create_one_creates_and_the_others_find_its_thread(store: TurnStore) -> None:
    results = await asyncio.gather(
        *(
            loads_or_creates(store)("t1", ThreadChange(owner=f"w{i}"), JournalAppend(f"r{i}", events(1, 1)))
            for i in range(6)
        )
    )

    won = [i for i, result in enumerate(results) if result is None]
    assert len(won) == 1, results
    assert {result.head.owner for result in results if result is not None} <= {f"w{won[0]}"}
    assert [await store.read_events("t1", f"r{i}") is not None for i in range(6)] == [i in won for i in range(6)]


async def test_a_store_without_the_merged_load_gets_the_load_then_the_creation(store: TurnStore) -> None:
    class Plain:
        load, save, append_events = store.load, store.save, store.append_events

    plain = cast("TurnStore", Plain())
    created = await load_or_create(plain, "t1", CREATING, JournalAppend("r1", events(1, 1)))
    found = await load_or_create(plain, "t1", ThreadChange(owner="bob"), JournalAppend("r2", events(1, 1)))

    assert created is None
    assert found == await store.load("t1")
    assert found is not None
    assert found.head.owner == "al"
    assert (await journal(store)).last_seq == 1
    assert await store.read_events("t1", "r2") is None


async def test_every_save_sets_updated_at_and_the_title_it_names(store: TurnStore) -> None:
    await store.save("t1", ThreadChange(title="Trip to Oslo", owner="alice"), expected_version=0)
    created = await store.load("t1", since=None)
    await store.save("t1", ThreadChange(append=[msg("m0")]), expected_version=1)
    kept = await store.load("t1", since=None)
    await store.save("t1", ThreadChange(title="Trip to Bergen"), expected_version=2)
    renamed = await store.load("t1", since=None)
    await store.save("t1", ThreadChange(title=None), expected_version=3)
    cleared = await store.load("t1", since=None)
    await store.save("t2", ThreadChange(), expected_version=0)
    untitled = await store.load("t2", since=None)

    heads = [thread.head for thread in (created, kept, renamed, cleared, untitled) if thread is not None]
    assert [head.title for head in heads] == ["Trip to Oslo", "Trip to Oslo", "Trip to Bergen", None, None]
    moments = [head.updated_at for head in heads]
    assert all(moment is not None and moment.utcoffset() == timedelta(0) for moment in moments)
    assert moments == sorted(moments)  # type: ignore[type-var]  # none is None, checked above


def test_a_title_is_a_str_none_or_keep() -> None:
    for title in ("", "x", None, KEEP):
        ThreadChange(title=title)
    for wrong in (1, ["x"], {"t": "x"}):
        with pytest.raises(TypeError, match="title"):
            ThreadChange(title=wrong)


async def listed(store: TurnStore, owner: str | None, limit: int) -> list[list[str]]:
    """Every page of `owner`'s threads, following the cursors to the end."""
    pages: list[list[str]] = []
    before: str | None = None
    while True:
        summaries, before = await store.list_threads(owner, before=before, limit=limit)
        pages.append([summary.thread_id for summary in summaries])
        assert len(pages) <= 100, "the cursors never end"
        if before is None:
            return pages


async def test_list_threads_gives_an_owners_threads_newest_first_page_by_page(store: TurnStore) -> None:
    for n in range(7):
        await store.save(f"a{n}", ThreadChange(owner="alice", title=f"A{n}"), expected_version=0)
    await store.save("b0", ThreadChange(owner="bob"), expected_version=0)
    await store.save("u0", ThreadChange(), expected_version=0)
    await store.save("u1", ThreadChange(), expected_version=0)
    await store.save("a2", ThreadChange(append=[msg("m0")]), expected_version=1)  # the newest of alice's now

    whole, _ = await store.list_threads("alice")
    heads = {s.thread_id: (await store.load(s.thread_id, since=None)) for s in whole}

    newest_first = sorted(whole, key=lambda s: (s.updated_at, s.thread_id), reverse=True)
    assert [s.thread_id for s in whole] == [s.thread_id for s in newest_first]
    assert whole[0].thread_id == "a2"
    assert sorted(s.thread_id for s in whole) == [f"a{n}" for n in range(7)]
    for summary in whole:
        head = heads[summary.thread_id]
        assert head is not None
        assert (summary.title, summary.updated_at, summary.owner) == (head.head.title, head.head.updated_at, "alice")
    for limit in (1, 2, 3, 6, 7, 8, 100):
        pages = await listed(store, "alice", limit)
        assert [thread for page in pages for thread in page] == [s.thread_id for s in whole], limit
        assert all(0 < len(page) <= limit for page in pages), limit
    assert await listed(store, "bob", 1) == [["b0"]]
    assert sorted(*(await listed(store, None, 5))) == ["u0", "u1"]
    assert await listed(store, "carol", 3) == [[]]


async def test_list_threads_gives_each_threads_open_turn(store: TurnStore) -> None:
    turn = {"turn_id": "turn1", "pending": [{"interrupt_id": "i1"}]}
    await store.save("t1", ThreadChange(owner="alice", open_turn=turn), expected_version=0)
    await store.save("t2", ThreadChange(owner="alice", open_turn=None), expected_version=0)

    summaries, _ = await store.list_threads("alice")

    assert {s.thread_id: s.open_turn for s in summaries} == {"t1": turn, "t2": None}


@pytest.mark.parametrize(
    "cursor",
    [
        "",
        "nope",
        "|t1",
        "2024-01-01T00:00:00|t1",
        "yesterday|t1",
        "2024-13-01T00:00:00+00:00|t1",
        "0001-01-01T00:00:00+14:00|t1",
        "9999-12-31T23:59:59-14:00|t1",
        "2024-01-01T00:00:00+00:00|t\x00",
        "2024-01-01T00:00:00+00:00|\ud800",
    ],
    ids=[
        "empty",
        "no-bar",
        "no-time",
        "naive-time",
        "not-a-time",
        "bad-month",
        "before-utc",
        "after-utc",
        "nul",
        "lone",
    ],
)
async def test_a_cursor_list_threads_did_not_make_is_refused(store: TurnStore, cursor: str) -> None:
    with pytest.raises(ValueError, match="cursor"):
        await store.list_threads("alice", before=cursor)


@pytest.mark.parametrize("limit", [0, -1])
async def test_a_page_holds_at_least_one_thread(store: TurnStore, limit: int) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        await store.list_threads("alice", limit=limit)


async def test_a_cursor_past_every_thread_gives_an_empty_last_page(store: TurnStore) -> None:
    await store.save("t1", ThreadChange(owner="alice"), expected_version=0)

    page, after = await store.list_threads("alice", before="1970-01-01T00:00:00+00:00|")

    assert (page, after) == ([], None)


async def test_delete_thread_takes_everything_of_the_thread_and_nothing_else(store: TurnStore) -> None:
    turn = {"turn_id": "turn1", "pending": [{"interrupt_id": "i1"}]}
    await store.save("t1", ThreadChange(append=[msg("m0"), msg("m1")], owner="alice", title="T"), expected_version=0)
    await store.save("t1", ThreadChange(open_turn=turn, claim=True), expected_version=1)
    for run in ("r1", "r2"):
        await store.append_events("t1", run, events(1, 2))
    await store.save("t2", ThreadChange(append=[msg("m0")], owner="alice"), expected_version=0)
    await store.append_events("t2", "r1", events(1, 1))
    other = await store.load("t2")

    assert await store.delete_thread("t1") is True

    assert await store.load("t1") is None
    assert await store.load("t1", since=None) is None
    assert (await store.read_events("t1", "r1"), await store.read_events("t1", "r2")) == (None, None)
    assert await store.find_message("t1", "m0") is None
    assert [s.thread_id for s in (await store.list_threads("alice"))[0]] == ["t2"]
    assert await store.request_stop("t1", "r1") is False
    with pytest.raises(StaleClaim):  # the claimant of the deleted turn can never store its answers
        await store.save("t1", ThreadChange(open_turn=None), expected_version=2, fence=1)
    assert await store.delete_thread("t1") is False
    assert await store.load("t2") == other
    assert (await journal(store, "t2", "r1")).last_seq == 1
    assert await store.save("t1", ThreadChange(append=[msg("new")]), expected_version=0) == 1
    again = await store.load("t1")
    assert again is not None
    assert (ids(again.messages), again.head.open_turn, again.head.title) == (["new"], None, None)
    assert await store.append_events("t1", "r1", events(1, 1)) is False  # a journal starts afresh


async def test_deleting_a_thread_that_does_not_exist_takes_its_journals(store: TurnStore) -> None:
    await store.append_events("t1", "r1", events(1, 1))

    assert await store.delete_thread("t1") is False
    assert await store.read_events("t1", "r1") is None


async def test_saves_racing_a_delete_leave_the_thread_whole_or_gone(store: TurnStore) -> None:
    """Whatever lands first, no message of the deleted thread is left behind for a thread made after it."""
    await store.save("t1", ThreadChange(append=[msg("m0")]), expected_version=0)

    await asyncio.gather(
        store.delete_thread("t1"),
        *(store.save("t1", ThreadChange(append=[msg(f"w{i}")]), expected_version=1) for i in range(5)),
        return_exceptions=True,
    )

    assert await store.load("t1") is None
    await store.save("t1", ThreadChange(append=[msg("fresh")]), expected_version=0)
    made = await store.load("t1")
    assert made is not None
    assert (ids(made.messages), made.head.message_count) == (["fresh"], 1)


async def test_purge_takes_the_journals_of_the_threads_it_deletes_and_every_idle_journal(store: TurnStore) -> None:
    now = datetime.now(UTC)
    turn = {"turn_id": "turn1", "pending": [{"interrupt_id": "i1"}]}
    await store.save("done", ThreadChange(append=[msg("m0")]), expected_version=0)
    await store.save("waiting", ThreadChange(open_turn=turn), expected_version=0)
    for thread in ("done", "waiting", "no-thread"):
        await store.append_events(thread, "r1", events(1, 2), ended=thread != "no-thread")

    fresh = await store.purge(timedelta(days=30), now=now)
    kept = {thread: await store.read_events(thread, "r1") for thread in ("done", "waiting", "no-thread")}
    aged = await store.purge(timedelta(days=30), now=now + timedelta(days=31))

    assert (fresh, aged) == (0, 1)
    assert all(read is not None and read.last_seq == 2 for read in kept.values())
    assert [await store.read_events(thread, "r1") for thread in ("done", "waiting", "no-thread")] == [None] * 3
    assert await store.load("waiting") is not None  # its turn waits: the thread stays, its idle journal goes
    assert await store.append_events("no-thread", "r1", events(1, 1)) is False  # nothing of it is left


async def test_bounds_past_any_integer_a_database_holds_are_clipped(store: TurnStore) -> None:
    await store.append_events("t1", "r1", events(1, 2))
    await store.save("t1", ThreadChange(owner="alice"), expected_version=0)
    huge = 2**70

    tail, whole = (
        await store.read_events("t1", "r1", after=huge, limit=huge),
        await store.read_events("t1", "r1", limit=huge),
    )
    page, after = await store.list_threads("alice", limit=huge)

    assert tail == RunJournal([], ended=False, stop_requested=False, last_seq=2)
    assert whole is not None
    assert list(whole.events) == events(1, 2)
    assert ([s.thread_id for s in page], after) == (["t1"], None)


async def test_a_save_meant_for_a_deleted_life_is_refused_whatever_its_version_and_claim(store: TurnStore) -> None:
    """The HIGH of issue 40: a late save of a deleted thread's run lands in no later thread under its id."""
    await store.save("t1", ThreadChange(append=[msg("a0")], incarnation="alice", claim=True), expected_version=0)
    await store.delete_thread("t1")
    await store.save("t1", ThreadChange(append=[msg("b0")], incarnation="bob", claim=True), expected_version=0)
    bob = await store.load("t1")
    assert bob is not None

    # Alice's late save names her life, at the very version and claim number Bob's thread is at now.
    late = ThreadChange(append=[msg("a1", "paid 5")], open_turn=None)
    with pytest.raises(ThreadGone):
        await store.save("t1", late, expected_version=1, fence=1, incarnation="alice")

    after = await store.load("t1")
    assert after is not None
    assert after.head == bob.head
    assert ids(after.messages) == ["b0"]


async def test_a_save_meant_for_a_life_is_refused_once_the_thread_is_gone(store: TurnStore) -> None:
    await store.save("t1", ThreadChange(append=[msg("a0")], incarnation="alice"), expected_version=0)
    await store.delete_thread("t1")

    with pytest.raises(ThreadGone):
        await store.save("t1", ThreadChange(append=[msg("a1")]), expected_version=1, incarnation="alice")

    assert await store.load("t1") is None


async def test_a_save_of_the_life_it_names_is_kept_and_a_thread_without_one_is_named_by_none(store: TurnStore) -> None:
    await store.save("t1", ThreadChange(append=[msg("a0")], incarnation="alice"), expected_version=0)
    await store.save("t2", ThreadChange(append=[msg("x0")]), expected_version=0)

    assert await store.save("t1", ThreadChange(append=[msg("a1")]), expected_version=1, incarnation="alice") == 2
    assert await store.save("t2", ThreadChange(append=[msg("x1")]), expected_version=1, incarnation=None) == 2
    with pytest.raises(ThreadGone):
        await store.save("t2", ThreadChange(append=[msg("x2")]), expected_version=2, incarnation="alice")


async def test_every_save_stamps_the_head_afresh(store: TurnStore) -> None:
    """A stamp names one state for good: a thread created again, at the same version and count, has another."""
    first = ThreadChange(append=[msg("m0")], incarnation="i")
    await store.save("t1", first, expected_version=0)
    created = await store.load("t1", since=None)
    second = ThreadChange(title="x")
    await store.save("t1", second, expected_version=1)
    renamed = await store.load("t1", since=None)
    await store.delete_thread("t1")
    again = ThreadChange(append=[msg("m0")], incarnation="i")
    await store.save("t1", again, expected_version=0)
    recreated = await store.load("t1", since=None)

    assert created is not None
    assert renamed is not None
    assert recreated is not None
    assert [created.head.stamp, renamed.head.stamp, recreated.head.stamp] == [first.stamp, second.stamp, again.stamp]
    assert len({first.stamp, second.stamp, again.stamp}) == 3
    assert (created.head.version, created.head.message_count) == (recreated.head.version, 1)


@given(st.text() | st.builds("{}|{}".format, st.datetimes(timezones=st.timezones()).map(str), st.text()))
def test_any_text_is_a_cursor_or_a_value_error(text: str) -> None:
    """The listing's one refusal: not a cursor (a date UTC cannot hold, an id no store keeps) is a ValueError."""
    try:
        updated_at, thread_id = parse_cursor(text)
    except ValueError:
        return
    assert updated_at.tzinfo is not None
    assert "\x00" not in thread_id
    assert to_micros(updated_at) == to_micros(parse_cursor(next_cursor(updated_at, thread_id))[0])


async def test_a_delete_meant_for_one_life_leaves_another_whole(store: TurnStore) -> None:
    await store.save("t1", ThreadChange(append=[msg("a0")], incarnation="alice"), expected_version=0)
    await store.delete_thread("t1", incarnation="alice")
    await store.save("t1", ThreadChange(append=[msg("b0")], incarnation="bob"), expected_version=0)
    await store.append_events("t1", "r1", [JournalEvent(1, "{}")])

    assert await store.delete_thread("t1", incarnation="alice") is False  # decided on Alice's life, too late
    bobs = await store.load("t1")
    assert bobs is not None
    assert ids(bobs.messages) == ["b0"]
    assert await store.read_events("t1", "r1") is not None
    assert await store.delete_thread("t1", incarnation="bob") is True
    assert await store.load("t1") is None
