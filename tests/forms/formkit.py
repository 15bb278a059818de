"""Helpers for the forms tests: spied tools, and Python-API runs checked like the bytes on the wire."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from ag_ui.core import ActivityMessage, Message
from agui import run_events, run_input, user

from adapter import Adapter, FunctionTool

BOOKING = {"topic": "Q3 planning", "time": "2030-01-02T10:00:00Z", "attendees": 6}
"""A valid `meeting_room_booking` submission."""

DETAILS = {"affectedSystem": "统一登录系统", "impactScope": "ALL_USERS"}
"""A valid `support_ticket_details` submission."""

TICKET_REQUEST = "帮我创建一个高优先级的登录故障工单"


def spied(original: FunctionTool) -> tuple[FunctionTool, list[dict[str, Any]]]:
    """The same tool, recording the keyword arguments (its `ToolContext` included) of every execution."""
    runs: list[dict[str, Any]] = []
    fn = original.fn
    assert fn is not None
    assert original.signature is not None
    assert not original.signature.is_async

    def record(**kwargs: Any) -> Any:
        runs.append(kwargs)
        return fn(**kwargs)

    return dataclasses.replace(original, fn=record), runs


def arguments(run: dict[str, Any]) -> dict[str, Any]:
    """One recorded execution's arguments, without the injected context."""
    return {name: value for name, value in run.items() if name != "ctx"}


async def say(adapter: Adapter, thread_id: str, text: str) -> list[dict[str, Any]]:
    """Run one new user message through the Python API."""
    return await run_events(adapter, run_input(thread_id, [user(text)]))


def of(events: Sequence[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """The events of one type, in order."""
    return [event for event in events if event["type"] == kind]


def interrupt_of(events: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The one interrupt the run ended with."""
    (finished,) = of(events, "RUN_FINISHED")
    (interrupt,) = finished["outcome"]["interrupts"]
    return dict(interrupt)


def cards(messages: Sequence[dict[str, Any]] | Sequence[Message]) -> list[dict[str, Any]]:
    """The `agent_form` activity messages of a conversation, as wire JSON."""
    found = []
    for message in messages:
        if isinstance(message, ActivityMessage):
            message = message.model_dump(mode="json", by_alias=True)
        if isinstance(message, dict) and message.get("role") == "activity":
            found.append(message)
    return found
