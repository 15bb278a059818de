"""Stopping a run: it ends cancelled on whichever replica runs it, a started tool finishes (or, cancellable, is
cancelled), every call left open is answered once, and no tool runs after the stop."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections import Counter
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from ag_ui.core import BaseEvent, RunAgentInput, RunFinishedEvent, ToolCallResultEvent
from agui import interrupts_of, new_id
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sessions_kit import BOUND, PAIRS, FrameReader, Held, Sent, answer, body_of, frames_of, reattach

from adapter import Adapter, ToolContext, TurnEvent, TurnEventType, tool
from adapter._run._stop import READ_AHEAD, StopSignal  # private on purpose: the race a stop runs against a stream
from adapter.backends import BackendItem, Call, ModelRequest, Rule, ScriptedBackend, TextDelta
from adapter.stores import SQLiteStore, TurnStore

if TYPE_CHECKING:
    from conftest import Serve, Served

WORDS, HOLD = 12, 6


class Tools:
    """Server tools that say when they start, and whether their run was already asked to stop then."""

    def __init__(self) -> None:
        self.adapter: Adapter | None = None
        self.started: list[str] = []
        self.after_stop: list[str] = []
        self.cancelled: list[str] = []
        self.entered = threading.Event()
        self.release = threading.Event()

    def note(self, name: str, ctx: ToolContext) -> None:
        assert self.adapter is not None
        live = self.adapter.journals.live(ctx.thread_id, ctx.run_id)
        if live is not None and live.stop is not None and live.stop.requested:
            self.after_stop.append(name)
        self.started.append(name)

    def tools(self) -> list[Any]:
        kit = self

        @tool
        async def slow(ctx: ToolContext) -> str:
            """Takes until the test releases it."""
            kit.note("slow", ctx)
            kit.entered.set()
            await asyncio.to_thread(kit.release.wait, BOUND)
            return "slow done"

        @tool(requires_approval=True)
        async def gated(ctx: ToolContext) -> str:
            """Runs once a person approves it."""
            kit.note("gated", ctx)
            return "gated done"

        @tool
        async def other(ctx: ToolContext) -> str:
            """A tool of a later step."""
            kit.note("other", ctx)
            return "other done"

        @tool
        async def tick(ctx: ToolContext) -> str:
            """One of a run's many quick steps."""
            kit.note("tick", ctx)
            await asyncio.sleep(0.005)  # a step takes a little while, so that stops land inside runs
            return "ticked"

        @tool(cancellable=True)
        async def watch(ctx: ToolContext) -> str:
            """Waits for ever, unless cancelled."""
            kit.note("watch", ctx)
            kit.entered.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                kit.cancelled.append("watch")
                raise
            return "never"

        @tool(requires_approval=True, cancellable=True)
        async def guarded(ctx: ToolContext) -> str:
            """Runs once a person approves it, then waits for ever, unless cancelled."""
            kit.note("guarded", ctx)
            kit.entered.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                kit.cancelled.append("guarded")
                raise
            return "never"

        return [slow, gated, other, tick, watch, guarded]


RULES = [
    Rule(r"slow then more", steps=[[Call("slow"), Call("gated")], [Call("other")]], reply="done"),
    Rule(r"tick (?P<n>\d+)", steps=[[Call("tick")]] * 6, reply="done"),
    Rule(r"watch", steps=[[Call("watch")], [Call("other")]], reply="done"),
    Rule(r"gated and guarded", steps=[[Call("gated"), Call("guarded")], [Call("other")]], reply="done"),
    Rule(r"guarded", steps=[[Call("guarded")], [Call("other")]], reply="done"),
]


@pytest.fixture
async def served_tools(serve: Serve, tmp_path: Path) -> AsyncIterator[tuple[Served, Tools]]:
    tools = Tools()
    adapter = Adapter(ScriptedBackend(RULES), tools=tools.tools(), store=SQLiteStore(tmp_path / "turns.db"))
    tools.adapter = adapter
    yield await serve(adapter), tools
    tools.release.set()


async def stop(http: httpx.AsyncClient, base: str, thread_id: str, run_id: str) -> httpx.Response:
    return await http.post(f"{base}/threads/{thread_id}/runs/{run_id}/stop")


def results(sent: list[Sent]) -> dict[str, dict[str, Any]]:
    """The TOOL_CALL_RESULT events by the name of the tool they answer."""
    names = {s.event["toolCallId"]: s.event["toolCallName"] for s in sent if s.event["type"] == "TOOL_CALL_START"}
    return {names[s.event["toolCallId"]]: s.event for s in sent if s.event["type"] == "TOOL_CALL_RESULT"}


def outcome(sent: list[Sent]) -> dict[str, Any]:
    finished = [s.event for s in sent if s.event["type"] == "RUN_FINISHED"]
    assert len(finished) == 1, [s.event["type"] for s in sent]
    assert sent[-1].event is finished[0], [s.event["type"] for s in sent]
    found: dict[str, Any] = finished[0].get("outcome", {"type": "success"})
    return found


async def stored_calls(served: Served, thread_id: str) -> tuple[list[str], Counter[str]]:
    """The stored thread's tool call ids, and how many answers each has."""
    body = (await served.http.get(f"{served.url}/threads/{thread_id}")).json()
    calls = [c["id"] for m in body["messages"] if m["role"] == "assistant" for c in m.get("toolCalls") or []]
    answers = Counter(m["toolCallId"] for m in body["messages"] if m["role"] == "tool")
    return calls, answers


async def test_a_started_tool_finishes_the_calls_that_wait_are_answered_once_and_nothing_runs_after(
    served_tools: tuple[Served, Tools],
) -> None:
    served, tools = served_tools
    thread_id, run_id = new_id("thread"), new_id("run")
    posting = asyncio.ensure_future(
        served.http.post(served.url + "/", json=body_of(thread_id, run_id, "slow then more"))
    )
    await asyncio.to_thread(tools.entered.wait, BOUND)

    asked = await stop(served.http, served.url, thread_id, run_id)
    tools.release.set()
    sent = frames_of((await posting).content)

    assert (asked.status_code, asked.json()) == (202, {"threadId": thread_id, "runId": run_id, "stopping": True})
    assert outcome(sent) == {"type": "cancelled"}
    found = results(sent)
    # it ran, and says so
    assert found["slow"]["content"] == "slow done"
    assert "metadata" not in found["slow"]
    assert found["gated"]["metadata"] == {"error": "cancelled"}
    assert "not executed" in found["gated"]["content"]
    assert (tools.started, tools.after_stop) == (["slow"], [])
    calls, answers = await stored_calls(served, thread_id)
    assert len(calls) == 2
    assert all(answers[call] == 1 for call in calls)
    again = await stop(served.http, served.url, thread_id, run_id)
    assert (again.status_code, again.json()["stopping"]) == (202, False)  # it has ended: nothing to stop


async def test_a_cancellable_tool_is_cancelled_and_its_call_says_so(served_tools: tuple[Served, Tools]) -> None:
    served, tools = served_tools
    thread_id, run_id = new_id("thread"), new_id("run")
    posting = asyncio.ensure_future(served.http.post(served.url + "/", json=body_of(thread_id, run_id, "watch")))
    await asyncio.to_thread(tools.entered.wait, BOUND)

    await stop(served.http, served.url, thread_id, run_id)
    sent = frames_of((await posting).content)

    assert outcome(sent) == {"type": "cancelled"}
    assert tools.cancelled == ["watch"]
    assert tools.started == ["watch"]
    found = results(sent)["watch"]
    assert found["metadata"] == {"error": "cancelled"}
    assert "cancelled before it finished" in found["content"]


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(point=st.integers(min_value=1, max_value=40))
async def test_a_stopped_run_never_runs_a_tool_afterwards(served_tools: tuple[Served, Tools], point: int) -> None:
    """Whatever event the stop follows: no tool starts once it is asked, and every call has exactly one answer."""
    served, tools = served_tools
    tools.started.clear()
    tools.after_stop.clear()
    thread_id, run_id = new_id("thread"), new_id("run")
    reader, sent = FrameReader(), []
    asked = None
    async with served.http.stream("POST", served.url + "/", json=body_of(thread_id, run_id, "tick 6")) as response:
        async for chunk in response.aiter_bytes():
            sent += reader.feed(chunk)
            if asked is None and len(sent) >= point:
                asked = await stop(served.http, served.url, thread_id, run_id)

    assert asked is None or asked.status_code == 202
    assert tools.after_stop == []
    stopping = asked is not None and asked.json()["stopping"]
    assert outcome(sent)["type"] in (("cancelled", "success") if stopping else ("success",))  # one that ended first
    calls, answers = await stored_calls(served, thread_id)
    assert all(answers[call] == 1 for call in calls)
    assert len(calls) == len([s for s in sent if s.event["type"] == "TOOL_CALL_START"])


async def test_stop_on_one_replica_ends_a_run_on_the_other_while_its_model_is_silent(
    serve: Serve, tmp_path: Path, two_stores: Callable[[Path], tuple[TurnStore, TurnStore]]
) -> None:
    """The run waits on its backend (no event flows): replica A learns of the stop from the store, and cuts it."""
    held = Held()
    first, second = two_stores(tmp_path)
    a, b = await serve(Adapter(held, store=first)), await serve(Adapter(held, store=second))
    thread_id, run_id = new_id("thread"), new_id("run")
    reader, sent = FrameReader(), []
    try:
        async with a.http.stream("POST", a.url + "/", json=body_of(thread_id, run_id, f"hold {WORDS} {HOLD}")) as r:
            async for chunk in r.aiter_bytes():
                sent += reader.feed(chunk)
                if len(sent) == HOLD + 2:
                    asked = await stop(b.http, b.url, thread_id, run_id)
                    assert (asked.status_code, asked.json()["stopping"]) == (202, True)
    finally:
        held.release(thread_id)

    assert outcome(sent) == {"type": "cancelled"}
    assert "".join(s.event["delta"] for s in sent if s.event["type"] == "TEXT_MESSAGE_CONTENT") == answer(HOLD)
    assert [s.event["type"] for s in sent][-2:] == ["TEXT_MESSAGE_END", "RUN_FINISHED"]
    stored = (await b.http.get(f"{b.url}/threads/{thread_id}")).json()["messages"]
    assert [m["role"] for m in stored] == ["user", "assistant"]
    assert stored[-1]["content"] == answer(HOLD)
    _, journal = await reattach(b.http, b.url, thread_id, run_id)
    assert journal == sent
    assert held.streams == 1  # the model was asked once, and never again after the stop


@pytest.fixture(params=PAIRS)
def two_stores(request: pytest.FixtureRequest) -> Callable[[Path], tuple[TurnStore, TurnStore]]:
    pair: Callable[[Path], tuple[TurnStore, TurnStore]] = request.param
    return pair


async def test_a_resume_stopped_before_it_applies_its_answers_applies_none() -> None:
    """The Python API, with `on_disconnect="stop"`: the run is read only once the stop is in."""
    tools = Tools()
    adapter = Adapter(ScriptedBackend(RULES), tools=tools.tools(), on_disconnect="stop")
    tools.adapter = adapter
    opening = body_of("t1", "r0", "slow then more")
    tools.release.set()
    first = [event async for event in adapter.run(_input(opening))]
    (interrupt,) = interrupts_of(first[-1])
    answer_ = {"interruptId": interrupt.id, "status": "resolved", "payload": {"approved": True}}

    events = await adapter.start(_input({**body_of("t1", "r1", "ok"), "messages": [], "resume": [answer_]}))
    asked = await adapter.stop_run("t1", "r1")
    seen = [event async for event in events]

    assert asked is True
    assert [event.type for event in seen] == ["RUN_STARTED", "RUN_FINISHED"]
    finished = seen[-1]
    assert isinstance(finished, RunFinishedEvent)
    assert finished.outcome is not None
    assert finished.outcome.type == "cancelled"
    thread = await adapter.thread("t1")
    # it waits as before
    assert thread is not None
    assert [i["id"] for i in thread["interrupts"]] == [interrupt.id]
    resumed = [event async for event in adapter.resume("t1", [answer_], run_id="r2")]
    assert resumed[-1].type == "RUN_FINISHED"
    assert "gated" in tools.started
    await adapter.aclose()


async def test_a_cancellable_tool_a_resume_runs_is_cancelled_by_a_stop_and_its_stored_answer_is_told() -> None:
    """The approved tool is cancelled where it waits; its answer is stored once, sent, and the turn's listeners hear
    the resume and its cancelled end."""
    tools, heard = Tools(), list[TurnEvent]()
    adapter = Adapter(ScriptedBackend(RULES), tools=tools.tools(), listeners=[heard.append])
    tools.adapter = adapter
    first = [event async for event in adapter.run(_input(body_of("t1", "r0", "guarded")))]
    (interrupt,) = interrupts_of(first[-1])
    approve = {"interruptId": interrupt.id, "status": "resolved", "payload": {"approved": True}}
    events = await adapter.start(_input({**body_of("t1", "r1", "ok"), "messages": [], "resume": [approve]}))
    reading = asyncio.ensure_future(_collect(events))
    await asyncio.to_thread(tools.entered.wait, BOUND)

    asked = await adapter.stop_run("t1", "r1")
    async with asyncio.timeout(BOUND):
        seen = await reading

    assert asked is True
    assert tools.cancelled == ["guarded"]
    finished = seen[-1]
    assert isinstance(finished, RunFinishedEvent)
    assert finished.outcome is not None
    assert finished.outcome.type == "cancelled"
    (told,) = [event for event in seen if isinstance(event, ToolCallResultEvent)]
    assert told.tool_call_id == interrupt.tool_call_id
    thread = await adapter.thread("t1")
    assert thread is not None
    (stored,) = [m for m in thread["messages"] if m["role"] == "tool"]
    assert (stored["toolCallId"], stored["content"], stored["error"]) == (told.tool_call_id, told.content, "cancelled")
    assert "cancelled before it finished" in told.content
    assert thread["interrupts"] == []
    resumed = [event for event in heard if event.run_id == "r1"]
    assert [event.type for event in resumed] == [TurnEventType.TURN_RESUMED, TurnEventType.TURN_CANCELLED]
    assert resumed[0].interrupt_ids == (interrupt.id,)
    assert len({event.turn_id for event in resumed}) == 1
    assert "other" not in tools.started  # no step after the stop
    await adapter.aclose()


async def test_a_resume_stopped_once_it_claimed_runs_its_approved_tools_but_starts_no_cancellable_one() -> None:
    """The stop comes with the claim (a listener of TURN_RESUMED asks for it): the answers are applied whole, but a
    cancellable tool, which a stop cuts short, does not start."""
    tools, heard = Tools(), list[TurnEvent]()

    async def stop_on_resume(event: TurnEvent) -> None:
        heard.append(event)
        if event.type is TurnEventType.TURN_RESUMED:
            assert await adapter.stop_run(event.thread_id, event.run_id or "") is True

    adapter = Adapter(ScriptedBackend(RULES), tools=tools.tools(), listeners=[stop_on_resume])
    tools.adapter = adapter
    first = [event async for event in adapter.run(_input(body_of("t1", "r0", "gated and guarded")))]
    approvals = [
        {"interruptId": interrupt.id, "status": "resolved", "payload": {"approved": True}}
        for interrupt in interrupts_of(first[-1])
    ]

    async with asyncio.timeout(BOUND):  # a cancellable tool that started would wait for ever
        seen = [event async for event in adapter.resume("t1", approvals, run_id="r1")]

    assert tools.started == ["gated"]
    told = {event.tool_call_id: event.content for event in seen if isinstance(event, ToolCallResultEvent)}
    names = {i.tool_call_id: (i.metadata or {}).get("toolName") for i in interrupts_of(first[-1])}
    assert {names[call]: content for call, content in told.items()} == {
        "gated": "gated done",
        "guarded": "The run was stopped before guarded ran; it was not executed.",
    }
    finished = seen[-1]
    assert isinstance(finished, RunFinishedEvent)
    assert finished.outcome is not None
    assert finished.outcome.type == "cancelled"
    assert [event.type for event in heard if event.run_id == "r1"] == [
        TurnEventType.TURN_RESUMED,
        TurnEventType.TURN_CANCELLED,
    ]
    await adapter.aclose()


async def _collect(events: AsyncIterator[BaseEvent]) -> list[BaseEvent]:
    return [event async for event in events]


class Silent:
    """Says two words, then waits for ever; records whether that wait was cancelled and the stream closed."""

    def __init__(self) -> None:
        self.waiting = asyncio.Event()
        self.cancelled = False
        self.closed = False

    async def stream(self, request: ModelRequest) -> AsyncIterator[BackendItem]:
        try:
            yield TextDelta("one ")
            yield TextDelta("two ")
            self.waiting.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                self.cancelled = True
                raise
            yield TextDelta("never")
        finally:
            self.closed = True


async def test_a_stop_while_the_model_is_silent_cuts_its_stream_where_it_waits_and_stores_what_it_said() -> None:
    backend = Silent()
    adapter = Adapter(backend)
    events = await adapter.start(_input(body_of("t1", "r1", "talk")))
    await backend.waiting.wait()
    asked = await adapter.stop_run("t1", "r1")
    seen = [event async for event in events]

    assert asked is True
    assert backend.cancelled
    assert backend.closed
    said = "".join(getattr(event, "delta", "") for event in seen if event.type == "TEXT_MESSAGE_CONTENT")
    assert said == "one two "
    assert [event.type for event in seen][-2:] == ["TEXT_MESSAGE_END", "RUN_FINISHED"]
    finished = seen[-1]
    assert isinstance(finished, RunFinishedEvent)
    assert finished.outcome is not None
    assert finished.outcome.type == "cancelled"
    thread = await adapter.thread("t1")
    assert thread is not None
    assert [(m["role"], m.get("content")) for m in thread["messages"]][-1] == ("assistant", said)
    await adapter.aclose()


async def test_a_stream_read_ahead_gives_every_item_in_order_and_its_failure_after_them() -> None:
    async def items(count: int, then: Exception | None = None) -> AsyncIterator[int]:
        for index in range(count):
            yield index
        if then is not None:
            raise then

    whole = [item async for run in StopSignal().until_stopped(items(3 * READ_AHEAD), -1) for item in run]
    got: list[int] = []
    with pytest.raises(ValueError, match="broke"):
        async for run in StopSignal().until_stopped(items(5, ValueError("broke")), -1):
            got.extend(run)

    assert whole == list(range(3 * READ_AHEAD))
    assert got == list(range(5))


async def test_a_stop_gives_what_was_read_then_the_cut_even_from_a_stream_that_swallows_its_cancellation() -> None:
    signal, waiting = StopSignal(), asyncio.Event()

    async def stubborn() -> AsyncIterator[str]:
        yield "said"
        waiting.set()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.Event().wait()
        yield "after the cut"

    got: list[str] = []
    async for run in signal.until_stopped(stubborn(), "cut"):
        got.extend(run)
        if "said" in run:
            await waiting.wait()
            signal.request()

    assert got == ["said", "cut"]


def _input(body: dict[str, Any]) -> RunAgentInput:
    return RunAgentInput.model_validate(json.loads(json.dumps(body)))
