"""The run's journal: a run goes on when its client leaves (or, opted out, ends with it as before), and a journal
is bounded in events and characters, the run stopped past either bound."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from ag_ui.core import RunAgentInput
from agui import new_id
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sessions_kit import Held, answer, body_of, frames_of, journal_of, read_some, reattach

from adapter import Adapter, ConfigurationError, Limits
from adapter._alarms import Alarms  # private on purpose: one loop timer serves every run's alarm
from adapter.backends import BackendItem, ModelRequest, Rule, ScriptedBackend, TextDelta
from adapter.stores import JournalEvent, MemoryStore, RunJournal, SQLiteStore

if TYPE_CHECKING:
    from conftest import Serve, Served

WORDS, HOLD = 12, 6


async def stored_messages(served: Served, thread_id: str) -> list[dict[str, Any]]:
    body = (await served.http.get(f"{served.url}/threads/{thread_id}")).json()
    messages: list[dict[str, Any]] = body["messages"]
    return messages


async def stored_roles(served: Served, thread_id: str) -> list[str]:
    return [message["role"] for message in await stored_messages(served, thread_id)]


@pytest.mark.parametrize("on_disconnect", ["continue", "stop"])
async def test_a_run_goes_on_when_its_client_leaves_unless_told_to_stop_with_it(
    serve: Serve, tmp_path: Path, on_disconnect: Any
) -> None:
    held = Held()
    served = await serve(Adapter(held, store=SQLiteStore(tmp_path / "t.db"), on_disconnect=on_disconnect))
    thread_id, run_id = new_id("thread"), new_id("run")
    seen = await read_some(served.http, served.url + "/", body_of(thread_id, run_id, f"hold {WORDS} {HOLD}"), 3)

    status, rest = await reattach(
        served.http, served.url, thread_id, run_id, last_event_id=seen[-1].id, when_open=lambda: held.release(thread_id)
    )

    ended = rest[-1].event
    said = "".join(s.event["delta"] for s in seen + rest if s.event["type"] == "TEXT_MESSAGE_CONTENT")
    if on_disconnect == "continue":
        assert ended["type"] == "RUN_FINISHED"
        assert said == answer(WORDS)
    else:  # stopped at its next safe point: what it said is stored, and the journal says why it ended
        assert (ended["type"], ended["code"]) == ("RUN_ERROR", "RUN_INTERRUPTED")
        assert answer(HOLD).startswith(said)
    assert await stored_roles(served, thread_id) == ["user", "assistant"]
    assert (await stored_messages(served, thread_id))[-1]["content"] == said
    assert status == 200
    assert [s.id for s in seen + rest] == list(range(1, len(seen + rest) + 1))


@pytest.mark.parametrize("on_disconnect", ["continue", "stop"])
async def test_a_python_caller_that_leaves_early_leaves_the_run_going_unless_told_to_stop(on_disconnect: Any) -> None:
    adapter = Adapter(ScriptedBackend([Rule("hi", reply="one two three four")]), on_disconnect=on_disconnect)
    run_input = RunAgentInput.model_validate(body_of("t1", "r1", "hi"))

    async with contextlib.aclosing(await adapter.start(run_input)) as events:
        first = await anext(events)
    journal = await adapter.run_events("t1", "r1")
    assert journal is not None
    types = [json.loads(event.json)["type"] async for event in journal]

    assert first.type == "RUN_STARTED"
    assert types[-1] == ("RUN_FINISHED" if on_disconnect == "continue" else "RUN_ERROR")
    await adapter.aclose()


async def test_with_stop_a_run_goes_on_while_someone_reads_it_and_stops_once_its_last_reader_left() -> None:
    held = Held()
    adapter = Adapter(held, on_disconnect="stop")
    started = await adapter.start(RunAgentInput.model_validate(body_of("t1", "r1", f"hold {WORDS} {HOLD}")))
    await anext(started)
    follower = await adapter.run_events("t1", "r1")
    assert follower is not None
    await anext(follower)

    await started.aclose()  # the client that started it leaves: the follower still reads
    held.release("t1")
    kept = [json.loads(event.json)["type"] async for event in follower]

    assert kept[-1] == "RUN_FINISHED"
    again = await adapter.start(RunAgentInput.model_validate(body_of("t2", "r2", f"hold {WORDS} {HOLD}")))
    await anext(again)
    follower = await adapter.run_events("t2", "r2")
    assert follower is not None
    await anext(follower)
    await again.aclose()
    await follower.aclose()  # type: ignore[attr-defined]  # the last reader leaves: the run is stopped
    held.release("t2")
    journal = await adapter.run_events("t2", "r2")
    assert journal is not None
    ended = [json.loads(event.json) async for event in journal][-1]
    assert (ended["type"], ended["code"]) == ("RUN_ERROR", "RUN_INTERRUPTED")
    await adapter.aclose()


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(max_events=st.integers(min_value=2, max_value=30), max_chars=st.integers(min_value=200, max_value=4000))
async def test_a_journal_never_holds_more_than_its_limits_and_a_run_past_them_is_stopped(
    tmp_path: Path, max_events: int, max_chars: int
) -> None:
    words = 25
    adapter = Adapter(
        ScriptedBackend([Rule("talk", reply=" ".join(f"word{i}" for i in range(words)))]),
        store=SQLiteStore(tmp_path / f"{new_id('t')}.db"),
        limits=Limits(max_journal_events=max_events, max_journal_chars=max_chars),
    )
    thread_id = new_id("thread")
    run_input = RunAgentInput.model_validate(body_of(thread_id, "r1", "talk"))
    sent = [event async for event in adapter.run(run_input)]
    stored = await written(adapter, thread_id, "r1")
    await adapter.aclose()

    kept = [json.loads(event.json) for event in stored.events]
    assert [json.loads(event.model_dump_json(by_alias=True)) for event in sent] == kept
    body, terminal = stored.events[:-1], stored.events[-1]
    assert len(body) <= max_events
    assert sum(len(event.json) for event in body) <= max_chars
    full = len(body) == max_events or sum(len(e.json) for e in body) + 200 > max_chars
    if kept[-1]["type"] == "RUN_ERROR":
        assert kept[-1]["code"] == "JOURNAL_LIMIT"
        assert full
    else:
        assert kept[-1]["type"] == "RUN_FINISHED"
        assert len(terminal.json) > 0


def test_the_journal_limits_are_checked_when_they_are_built() -> None:
    limits: list[dict[str, Any]] = [
        {"max_journal_events": 0},
        {"max_journal_chars": -1},
        {"max_detached_runs": 0},
        {"max_run_time": timedelta(0)},
    ]
    for options in limits:
        with pytest.raises(ConfigurationError):
            Limits(**options)
    with pytest.raises(ConfigurationError):
        Adapter(ScriptedBackend(), on_disconnect="later")  # type: ignore[arg-type]


async def test_every_run_of_the_stream_is_in_the_journal_over_http(serve: Serve, tmp_path: Path) -> None:
    served = await serve(Adapter(ScriptedBackend([Rule("talk", reply="a b c")]), store=SQLiteStore(tmp_path / "t.db")))
    thread_id, run_id = new_id("thread"), new_id("run")

    posted = frames_of((await served.http.post(served.url + "/", json=body_of(thread_id, run_id, "talk"))).content)
    _, journal = await reattach(served.http, served.url, thread_id, run_id)

    assert posted == journal
    assert posted[-1].event["type"] == "RUN_FINISHED"


async def written(adapter: Adapter, thread_id: str, run_id: str) -> RunJournal:
    """The run's journal once the store holds it ended (its writer appends in batches, after the run)."""
    for _ in range(1000):
        name = await journal_of(adapter.store, thread_id, run_id)
        journal = await adapter.store.read_events(thread_id, name, limit=100_000)
        if journal is not None and journal.ended:
            return journal
        await asyncio.sleep(0.01)
    raise AssertionError("the journal was never ended")


class Fed:
    """A backend that streams the words put in `words`, one delta each, and ends at None."""

    def __init__(self) -> None:
        self.words: asyncio.Queue[str | None] = asyncio.Queue()

    async def stream(self, request: ModelRequest) -> AsyncIterator[BackendItem]:
        while (word := await self.words.get()) is not None:
            yield TextDelta(word)


class HeldAppend(MemoryStore):
    """A memory store whose first append waits for `release`; the seqs of every append, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[list[int]] = []
        self.appended = asyncio.Event()
        self.release = asyncio.Event()

    async def append_events(
        self, thread_id: str, run_id: str, events: Sequence[JournalEvent], *, ended: bool = False
    ) -> bool:
        self.batches.append([event.seq for event in events])
        self.appended.set()
        if len(self.batches) == 1:
            await self.release.wait()
        return await super().append_events(thread_id, run_id, events, ended=ended)


async def test_the_events_made_while_an_append_is_under_way_go_together_in_the_next() -> None:
    backend, store = Fed(), HeldAppend()
    adapter = Adapter(backend, store=store)
    events = await adapter.start(RunAgentInput.model_validate(body_of("t1", "r1", "go")))
    backend.words.put_nowait("one ")
    await store.appended.wait()
    store.appended.clear()
    for word in ("two ", "three ", "four "):
        backend.words.put_nowait(word)
    said = ""
    while said != "one two three four ":
        event = await anext(events)
        said += getattr(event, "delta", "") if event.type == "TEXT_MESSAGE_CONTENT" else ""

    store.release.set()
    await store.appended.wait()
    backend.words.put_nowait(None)
    types = [event.type async for event in events]

    first, second = store.batches[:2]
    assert second == list(range(first[-1] + 1, first[-1] + 4))  # the three deltas made meanwhile, in one append
    assert types[-1] == "RUN_FINISHED"
    await adapter.aclose()


async def test_what_comes_with_run_started_in_the_first_run_of_events_is_kept_not_lost() -> None:
    """`Run.start` sends RUN_STARTED alone first; a run that sends more with it loses none of them."""
    from ag_ui.core import RunFinishedEvent, RunStartedEvent, TextMessageContentEvent

    # private on purpose: the journal's contract with the run's event runs
    from adapter._run._stop import StopSignal
    from adapter._sessions._journal import Journals

    async def runs() -> AsyncIterator[list[Any]]:
        yield [
            RunStartedEvent(thread_id="t", run_id="r"),
            TextMessageContentEvent(message_id="m", delta="hi"),
        ]
        yield [RunFinishedEvent(thread_id="t", run_id="r")]

    journals = Journals(MemoryStore())
    events = await journals.begin("t", "r", runs(), StopSignal())

    assert [event.type async for event in events] == ["RUN_STARTED", "TEXT_MESSAGE_CONTENT", "RUN_FINISHED"]


async def test_a_run_whose_events_all_go_with_its_last_save_never_starts_the_journal_writer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The writer is a task only once it has work: here none, the ending sealed with the run's last save."""
    # private on purpose: the writer's timing is the journal's own, held still so the run cannot outlast it
    from adapter._sessions import _journal

    monkeypatch.setattr(_journal, "GATHER", 3600.0)
    monkeypatch.setattr(_journal, "POLL_INTERVAL", 3600.0)
    loop = asyncio.get_running_loop()
    started: list[str] = []

    def recording(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
        started.append(coro.__qualname__)
        return asyncio.Task(coro, loop=loop, **kwargs)

    store = MemoryStore()
    adapter = Adapter(ScriptedBackend([Rule("hi", reply="one two three four")]), store=store)
    loop.set_task_factory(recording)
    try:
        events = await adapter.start(RunAgentInput.model_validate(body_of("t1", "r1", "hi")))
        types = [event.type async for event in events]
    finally:
        loop.set_task_factory(None)

    assert types[-1] == "RUN_FINISHED"
    assert "LiveRun._drive" in started
    assert "LiveRun._write" not in started
    journal = await store.read_events("t1", await journal_of(store, "t1", "r1"))
    assert journal is not None and journal.ended and len(journal.events) == len(types)
    await adapter.aclose()


async def test_listeners_waiting_with_different_timeouts_each_get_their_keep_alive_at_their_own() -> None:
    """One alarm serves a run's waiting listeners: a later, shorter wait is not held to the earlier deadline, and a
    longer one is not ended by the shorter one's."""
    from ag_ui.core import RunFinishedEvent, RunStartedEvent

    # private on purpose: the listeners' waits, below the SSE response that sends their keep-alives
    from adapter._run._stop import StopSignal
    from adapter._sessions._journal import Journals

    finish = asyncio.Event()

    async def runs() -> AsyncIterator[list[Any]]:
        yield [RunStartedEvent(thread_id="t", run_id="r")]
        await finish.wait()
        yield [RunFinishedEvent(thread_id="t", run_id="r")]

    journals = Journals(MemoryStore())
    run = await journals.begin("t", "r", runs(), StopSignal())
    live = run.live
    patient, hasty = live.listen(1), live.listen(1)
    waiting = asyncio.ensure_future(patient.next(3600.0))
    await asyncio.sleep(0)

    assert await hasty.next(0.01) is None  # its deadline is earlier than the alarm the patient one set
    assert not waiting.done()  # the alarm rang for the hasty one, and is set again for the patient one
    finish.set()
    batch = await waiting
    assert batch is not None and batch.last
    await hasty.close(left=False)
    await patient.close(left=False)
    await run.aclose()


async def test_a_replicas_alarms_ring_in_order_skip_the_cancelled_and_survive_a_ring_that_raises() -> None:
    alarms, rang, done = Alarms(0.001), [], asyncio.Event()

    def ring(name: str) -> None:
        rang.append(name)
        if name == "boom":
            alarms.set(lambda: ring("set by a ring"))
            raise RuntimeError("a ring failed")
        if name == "set by a ring":
            done.set()

    first = alarms.set(lambda: ring("first"))
    dropped = alarms.set(lambda: ring("dropped"))
    alarms.set(lambda: ring("boom"))
    alarms.set(lambda: ring("after"))
    dropped.cancel()
    first.cancel()  # cancelled before its time: never rings, whatever its place
    for _ in range(100):  # cancelled ones past the bound are dropped from the queue at once
        alarms.set(lambda: ring("never")).cancel()
    loop = asyncio.get_running_loop()
    handler = loop.get_exception_handler()
    loop.set_exception_handler(lambda _, context: rang.append(f"reported: {context.get('exception')}"))
    try:
        await asyncio.wait_for(done.wait(), 5)
    finally:
        loop.set_exception_handler(handler)

    assert rang == ["boom", "reported: a ring failed", "after", "set by a ring"]
