"""Lifecycle listeners: every turn event, in order, with its ids; a failing listener never breaks a run."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from agui import collect
from formkit import BOOKING, interrupt_of, of, say

from adapter import Adapter, TurnEvent, TurnEventType
from adapter.backends import ModelRequest, ScriptedBackend, TextDelta
from examples.meeting_room import MEETING_FORM, RULES, reserve_meeting_room


class Recorder:
    """A sync and an async listener that keep what they hear."""

    def __init__(self) -> None:
        self.events: list[TurnEvent] = []
        self.awaited: list[TurnEvent] = []

    def __call__(self, event: TurnEvent) -> None:
        self.events.append(event)

    async def later(self, event: TurnEvent) -> None:
        self.awaited.append(event)

    @property
    def types(self) -> list[TurnEventType]:
        return [event.type for event in self.events]


def broken(event: TurnEvent) -> None:
    raise RuntimeError(f"listener bug on {event.type}")


class FailingBackend:
    async def stream(self, request: ModelRequest) -> AsyncIterator[TextDelta]:
        yield TextDelta("Let me")
        raise RuntimeError("the model went away")


def booking(*listeners: Any, backend: Any = None) -> Adapter:
    return Adapter(
        backend or ScriptedBackend(RULES), tools=[reserve_meeting_room], forms=[MEETING_FORM], listeners=listeners
    )


async def test_listeners_hear_a_form_turn_in_order() -> None:
    heard = Recorder()
    adapter = booking(heard, heard.later)
    asked = await say(adapter, "t-life", "book a meeting room")
    interrupt = interrupt_of(asked)
    submission = {"actionId": interrupt["toolCallId"], "status": "resolved", "payload": BOOKING}

    await collect(adapter.resume("t-life", [submission]), resumed=True)

    turn_id = of(asked, "ACTIVITY_SNAPSHOT")[0]["content"]["turnId"]
    assert heard.types == [
        TurnEventType.TURN_STARTED,
        TurnEventType.TURN_SUSPENDED,
        TurnEventType.TURN_RESUMED,
        TurnEventType.TURN_COMPLETED,
    ]
    assert {(event.thread_id, event.turn_id) for event in heard.events} == {("t-life", turn_id)}
    assert [event.interrupt_ids for event in heard.events] == [(), (interrupt["id"],), (interrupt["id"],), ()]
    started, suspended, resumed, completed = heard.events
    assert started.run_id == suspended.run_id == of(asked, "RUN_STARTED")[0]["runId"]
    assert resumed.run_id == completed.run_id != started.run_id
    assert heard.awaited == heard.events


async def test_a_failing_listener_is_logged_and_never_breaks_the_run(caplog: pytest.LogCaptureFixture) -> None:
    heard = Recorder()
    adapter = booking(broken, heard)

    with caplog.at_level(logging.ERROR, logger="adapter.lifecycle"):
        asked = await say(adapter, "t-broken", "book a meeting room")

    assert of(asked, "RUN_FINISHED")[0]["outcome"]["type"] == "interrupt"
    assert heard.types == [TurnEventType.TURN_STARTED, TurnEventType.TURN_SUSPENDED]
    assert [record.getMessage() for record in caplog.records] == [
        "a lifecycle listener failed on TURN_STARTED for thread t-broken",
        "a lifecycle listener failed on TURN_SUSPENDED for thread t-broken",
    ]
    assert all(record.exc_info for record in caplog.records)


async def test_a_backend_failure_is_turn_failed() -> None:
    heard = Recorder()
    adapter = booking(heard, backend=FailingBackend())

    events = await say(adapter, "t-failed", "book a meeting room")

    assert of(events, "RUN_ERROR")[0]["code"] == "BACKEND_ERROR"
    assert heard.types == [TurnEventType.TURN_STARTED, TurnEventType.TURN_FAILED]
    assert heard.events[1].code == "BACKEND_ERROR"
    assert heard.events[0].turn_id == heard.events[1].turn_id


async def test_cancel_turn_is_turn_cancelled() -> None:
    heard = Recorder()
    adapter = booking(heard)
    interrupt = interrupt_of(await say(adapter, "t-abandoned", "book a meeting room"))

    await adapter.cancel_turn("t-abandoned")

    assert heard.types == [TurnEventType.TURN_STARTED, TurnEventType.TURN_SUSPENDED, TurnEventType.TURN_CANCELLED]
    cancelled = heard.events[-1]
    assert (cancelled.thread_id, cancelled.turn_id) == ("t-abandoned", heard.events[0].turn_id)
    assert cancelled.interrupt_ids == (interrupt["id"],)
