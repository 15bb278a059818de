"""A run nobody reads is bounded: a deadline of its own, and how many runs one principal may leave going."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, AsyncIterator
from datetime import timedelta
from typing import Any, cast

import httpx
import pytest
from ag_ui.core import RunAgentInput, UserMessage
from sessions_kit import BOUND

from adapter import Adapter, LimitExceeded, Limits, create_app
from adapter.backends import ModelRequest, Rule, ScriptedBackend, TextDelta
from adapter.stores import MemoryStore


class Endless:
    """A backend that streams without end (a flood), a word at a time, until it is stopped."""

    def __init__(self) -> None:
        self.words = 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[Any]:
        while True:
            self.words += 1
            yield TextDelta("word ")
            await asyncio.sleep(0.001)


def opening(thread_id: str) -> RunAgentInput:
    return RunAgentInput(
        thread_id=thread_id, run_id=f"r-{thread_id}", messages=[UserMessage(id="u", content="go")], tools=[], context=[]
    )


async def test_a_run_past_its_deadline_ends_run_deadline_with_what_it_said_stored() -> None:
    adapter = Adapter(Endless(), limits=Limits(max_run_time=timedelta(milliseconds=300)))

    events = [
        json.loads(event.model_dump_json(by_alias=True, exclude_none=True))
        async for event in adapter.run(opening("t1"))
    ]

    assert events[-1]["type"] == "RUN_ERROR", events[-1]
    assert events[-1]["code"] == "RUN_DEADLINE", events[-1]
    thread = await adapter.thread("t1")
    assert thread is not None
    said = [message["content"] for message in thread["messages"] if message["role"] == "assistant"]
    assert said
    assert said[0].startswith("word ")
    journaled = await adapter.run_events("t1", "r-t1")
    assert journaled is not None
    assert [json.loads(event.json) async for event in journaled][-1]["code"] == "RUN_DEADLINE"
    await adapter.aclose()


async def left(adapter: Adapter, thread_id: str, principal: str | None) -> None:
    """Start a run as `principal` and leave it after its first events: it goes on, detached."""
    events = await adapter.start(opening(thread_id), principal=principal)
    async for event in events:
        if event.type == "TEXT_MESSAGE_CONTENT":
            break
    await events.aclose()


async def test_a_principal_may_leave_only_so_many_runs_going_without_a_reader() -> None:
    adapter = Adapter(
        Endless(), store=MemoryStore(), limits=Limits(max_detached_runs=2), authorize=lambda p, o, a: True
    )
    await left(adapter, "a1", "alice")
    await left(adapter, "a2", "alice")

    with pytest.raises(LimitExceeded) as refused:
        await adapter.start(opening("a3"), principal="alice")
    await left(adapter, "b1", "bob")  # another principal's runs are their own
    reattached = await adapter.run_events("a2", "r-a2", principal="alice")
    assert reattached is not None
    await anext(reattached)  # read again: no longer detached while read
    await left(adapter, "a4", "alice")
    await cast(AsyncGenerator[Any, None], reattached).aclose()  # run_events gives an async generator
    with pytest.raises(LimitExceeded):
        await adapter.start(opening("a5"), principal="alice")
    for thread_id in ("a1", "a4"):  # two of alice's three end: room for one more
        assert await adapter.stop_run(thread_id, f"r-{thread_id}", principal="alice") is True
        stopped = await adapter.run_events(thread_id, f"r-{thread_id}", principal="alice")
        assert stopped is not None
        assert [json.loads(event.json)["type"] async for event in stopped][-1] == "RUN_FINISHED"
    await left(adapter, "a3", "alice")  # one of alice's ended: room for another

    assert (refused.value.status_code, refused.value.code) == (429, "TOO_MANY_DETACHED_RUNS")
    await adapter.aclose()


async def test_a_reader_that_never_reads_does_not_keep_a_run_going_with_stop() -> None:
    adapter = Adapter(Endless(), on_disconnect="stop")
    started = await adapter.start(opening("t1"))
    await anext(started)
    unread = await adapter.run_events("t1", "r-t1")  # asked for, never iterated
    assert unread is not None

    await started.aclose()  # the one reader that read leaves: nobody reads the run now
    journal = await adapter.run_events("t1", "r-t1")
    assert journal is not None
    ended = [json.loads(event.json) async for event in journal][-1]

    assert (ended["type"], ended["code"]) == ("RUN_ERROR", "RUN_INTERRUPTED")
    await adapter.aclose()


async def test_a_reader_that_never_reads_does_not_keep_a_left_run_from_counting_as_detached() -> None:
    adapter = Adapter(Endless(), store=MemoryStore(), limits=Limits(max_detached_runs=1))
    await left(adapter, "t1", None)
    unread = await adapter.run_events("t1", "r-t1")  # asked for, never iterated
    assert unread is not None

    with pytest.raises(LimitExceeded) as refused:
        await adapter.start(opening("t2"))

    assert refused.value.code == "TOO_MANY_DETACHED_RUNS"
    await adapter.aclose()


async def test_a_dropped_run_events_with_continue_runs_to_its_end_and_counts_as_detached() -> None:
    """`Adapter.start`'s events, never iterated nor closed: no one reads the run, which goes on by itself."""
    backend = ScriptedBackend([Rule("go", reply="Done.")])
    adapter = Adapter(backend, store=MemoryStore(), limits=Limits(max_detached_runs=1))
    await adapter.start(opening("t1"))  # dropped unread

    with pytest.raises(LimitExceeded) as refused:
        await adapter.start(opening("t2"))
    async with asyncio.timeout(BOUND):  # a bound, not a pace: a drain past its grace would cut the run
        await adapter.drain(timedelta(hours=1))

    assert refused.value.code == "TOO_MANY_DETACHED_RUNS"
    assert [kind for kind, _ in await journaled(adapter, "t1")] == [
        "RUN_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ]
    thread = await adapter.thread("t1")
    assert thread is not None
    assert [m.get("content") for m in thread["messages"]] == ["go", "Done."]
    await adapter.aclose()


async def test_a_dropped_run_events_with_stop_runs_nothing_and_a_drain_ends_it_at_once() -> None:
    """With "stop" a run goes on only while someone reads it: dropped unread, it never starts. It counts as detached
    meanwhile, and a drain drops it without waiting out its grace, its journal ended RUN_INTERRUPTED."""
    backend = ScriptedBackend([Rule("go", reply="Done.")])
    adapter = Adapter(backend, store=MemoryStore(), limits=Limits(max_detached_runs=1), on_disconnect="stop")
    unread = await adapter.start(opening("t1"))  # left unread until after the drain, as a dropped one is

    with pytest.raises(LimitExceeded) as refused:
        await adapter.start(opening("t2"))
    async with asyncio.timeout(BOUND):  # the grace is an hour: the drain waits for nothing that runs
        await adapter.drain(timedelta(hours=1))

    assert refused.value.code == "TOO_MANY_DETACHED_RUNS"
    assert not backend.requests
    assert await journaled(adapter, "t1") == [("RUN_STARTED", None), ("RUN_ERROR", "RUN_INTERRUPTED")]
    assert adapter.journals.running == 0
    assert [event.type async for event in unread] == ["RUN_STARTED", "RUN_ERROR"]  # read too late: it ended
    assert not backend.requests
    await adapter.aclose()


async def test_a_run_dropped_unread_with_stop_starts_when_a_reattached_reader_reads_it() -> None:
    adapter = Adapter(Endless(), on_disconnect="stop")
    await adapter.start(opening("t1"))  # dropped unread
    reader = await adapter.run_events("t1", "r-t1")
    assert reader is not None

    seen = [json.loads((await anext(reader)).json)["type"] for _ in range(3)]
    await cast(AsyncGenerator[Any, None], reader).aclose()  # its one reader leaves: the run is stopped
    ended = await journaled(adapter, "t1")

    assert seen == ["RUN_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT"]
    assert ended[-1] == ("RUN_ERROR", "RUN_INTERRUPTED")
    await adapter.aclose()


async def test_a_run_dropped_unread_with_stop_ends_when_it_is_stopped_without_waiting_for_a_reader() -> None:
    """A stop of a run never read ends it at its first safe point: nothing asked of the model, nothing left running."""
    backend = ScriptedBackend([Rule("go", reply="Done.")])
    adapter = Adapter(backend, store=MemoryStore(), on_disconnect="stop")
    await adapter.start(opening("t1"))  # dropped unread

    assert await adapter.stop_run("t1", "r-t1") is True
    async with asyncio.timeout(BOUND):  # a bound: the run lets go once its journal's end is written
        while adapter.journals.running:
            await asyncio.sleep(0.01)
    ended = await journaled(adapter, "t1")  # read after it let go: this reader starts nothing

    assert ended[0] == ("RUN_STARTED", None)
    assert ended[-1][0] in {"RUN_FINISHED", "RUN_ERROR"}
    assert not backend.requests
    await adapter.aclose()


async def journaled(adapter: Adapter, thread_id: str) -> list[tuple[str, str | None]]:
    """The type and code of each of the run's journaled events, read to its end."""
    journal = await adapter.run_events(thread_id, f"r-{thread_id}")
    assert journal is not None
    return [(event["type"], event.get("code")) async for event in (json.loads(e.json) async for e in journal)]


async def test_the_refusal_is_a_429_with_its_code_over_http() -> None:
    adapter = Adapter(Endless(), limits=Limits(max_detached_runs=1))
    await left(adapter, "a1", None)
    body = opening("a2").model_dump(by_alias=True, mode="json")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(adapter)), base_url="http://t") as http:
        response = await http.post("/", json=body)

    assert response.status_code == 429
    assert response.json()["error"]["code"] == "TOO_MANY_DETACHED_RUNS"
    await adapter.aclose()
