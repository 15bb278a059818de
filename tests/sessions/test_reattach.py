"""A run outlives its connection: reattaching gets the rest, with no event twice and none missing, on any replica."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from agui import new_id
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sessions_kit import PAIRS, Held, Sent, answer, body_of, frames_of, journal_of, read_some, reattach, texts

from adapter import Adapter
from adapter.stores import SQLiteStore, TurnStore

if TYPE_CHECKING:
    from conftest import Serve, Served

WORDS, HOLD = 12, 6
"""The held answer: 12 words, the run waiting after the 6th until the test releases it."""
BEFORE_HOLD = HOLD + 2
"""Events a client can read before the hold: RUN_STARTED, TEXT_MESSAGE_START and six deltas."""


@pytest.fixture
async def one(serve: Serve, tmp_path: Path) -> tuple[Served, Held]:
    held = Held()
    return await serve(Adapter(held, store=SQLiteStore(tmp_path / "turns.db"))), held


def check_whole(got: list[Sent]) -> None:
    """The rule: ids 1, 2, 3, ... with no gap and none twice, up to one terminal event; the whole answer."""
    assert [s.id for s in got] == list(range(1, len(got) + 1))
    assert [s.event["type"] for s in got].count("RUN_FINISHED") == 1
    assert got[-1].event["type"] == "RUN_FINISHED"
    assert texts(got) == answer(WORDS)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(min_value=1, max_value=BEFORE_HOLD), by_header=st.booleans(), live=st.booleans())
async def test_a_reattach_after_a_disconnect_gets_the_rest_with_no_duplicate_and_no_gap(
    one: tuple[Served, Held], cut: int, by_header: bool, live: bool
) -> None:
    """Whichever event the client last saw, and whether the run is still going when it comes back."""
    served, held = one
    thread_id, run_id = new_id("thread"), new_id("run")
    seen = await read_some(served.http, served.url + "/", body_of(thread_id, run_id, f"hold {WORDS} {HOLD}"), cut)
    last = seen[-1].id
    assert last is not None
    if not live:
        held.release(thread_id)

    status, rest = await reattach(
        served.http,
        served.url,
        thread_id,
        run_id,
        after=None if by_header else last,
        last_event_id=last if by_header else None,
        when_open=(lambda: held.release(thread_id)) if live else None,
    )

    assert status == 200
    check_whole(seen + rest)
    _, whole = await reattach(served.http, served.url, thread_id, run_id)
    assert whole == seen + rest


async def test_last_event_id_wins_over_after_and_a_bad_one_is_refused(one: tuple[Served, Held]) -> None:
    served, held = one
    thread_id, run_id = new_id("thread"), new_id("run")
    held.release(thread_id)
    await read_some(served.http, served.url + "/", body_of(thread_id, run_id, f"hold {WORDS} {HOLD}"), 99)

    _, from_header = await reattach(served.http, served.url, thread_id, run_id, after=1, last_event_id=3)
    _, from_query = await reattach(served.http, served.url, thread_id, run_id, after=5)
    refused = [
        await served.http.get(f"{served.url}/threads/{thread_id}/runs/{run_id}/events", params={"after": bad})
        for bad in ("-1", "x", "1.5", "9" * 13)
    ]

    assert from_header[0].id == 4
    assert from_query[0].id == 6
    assert {(r.status_code, r.json()["error"]["code"]) for r in refused} == {(400, "INVALID_PAGE")}


async def test_every_event_of_a_run_is_sent_with_the_id_the_events_route_gives_it(one: tuple[Served, Held]) -> None:
    served, held = one
    thread_id, run_id = new_id("thread"), new_id("run")
    held.release(thread_id)

    posted = await served.http.post(served.url + "/", json=body_of(thread_id, run_id, f"hold {WORDS} {HOLD}"))
    status, replayed = await reattach(served.http, served.url, thread_id, run_id)

    sent = frames_of(posted.content)
    assert status == 200
    assert sent == replayed
    check_whole(sent)


async def test_a_run_that_ended_replays_whole_and_nothing_after_its_end_is_204(one: tuple[Served, Held]) -> None:
    served, held = one
    thread_id, run_id = new_id("thread"), new_id("run")
    held.release(thread_id)
    posted = frames_of((await served.http.post(served.url + "/", json=body_of(thread_id, run_id, "hold 12 6"))).content)
    await served.call(until_written(served, thread_id, run_id))

    _, whole = await reattach(served.http, served.url, thread_id, run_id)
    status, after_the_end = await reattach(served.http, served.url, thread_id, run_id, last_event_id=len(posted))

    assert whole == posted
    assert (status, after_the_end) == (204, [])


async def until_written(served: Served, thread_id: str, run_id: str) -> None:
    """Wait until the run's journal is ended in the store (its writer flushes after the run's end)."""
    assert served.adapter is not None
    store = served.adapter.store
    for _ in range(1000):
        journal = await store.read_events(thread_id, await journal_of(store, thread_id, run_id), limit=0)
        if journal is not None and journal.ended:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the journal was never ended")


# Two replicas of one store: the run on A, the reattach on B, which polls the store's journal.


@pytest.fixture(params=PAIRS)
async def two(request: pytest.FixtureRequest, serve: Serve, tmp_path: Path) -> tuple[Served, Served, Held]:
    pair: Callable[[Path], tuple[TurnStore, TurnStore]] = request.param
    first, second = pair(tmp_path)
    held = Held()
    return await serve(Adapter(held, store=first)), await serve(Adapter(held, store=second)), held


@pytest.mark.parametrize("cut", [1, BEFORE_HOLD // 2, BEFORE_HOLD])
async def test_a_reattach_on_another_replica_gets_the_rest_from_the_store(
    two: tuple[Served, Served, Held], cut: int
) -> None:
    a, b, held = two
    thread_id, run_id = new_id("thread"), new_id("run")
    seen = await read_some(a.http, a.url + "/", body_of(thread_id, run_id, f"hold {WORDS} {HOLD}"), cut)

    status, rest = await reattach(
        b.http, b.url, thread_id, run_id, last_event_id=seen[-1].id, when_open=lambda: held.release(thread_id)
    )

    assert status == 200
    check_whole(seen + rest)
    _, on_a = await reattach(a.http, a.url, thread_id, run_id)
    _, on_b = await reattach(b.http, b.url, thread_id, run_id)
    assert on_a == on_b == seen + rest


async def test_a_run_that_ended_on_one_replica_replays_whole_on_the_other(two: tuple[Served, Served, Held]) -> None:
    a, b, held = two
    thread_id, run_id = new_id("thread"), new_id("run")
    held.release(thread_id)
    posted = frames_of((await a.http.post(a.url + "/", json=body_of(thread_id, run_id, "hold 12 6"))).content)

    _, replayed = await reattach(b.http, b.url, thread_id, run_id)

    assert replayed == posted
