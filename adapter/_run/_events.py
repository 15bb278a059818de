"""Events: the AG-UI events built from the engine's records, and the `TurnEvent`s told to listeners.

Each built in one place, so every path builds them alike.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeAlias

from ag_ui.core import (
    ActivityMessage,
    ActivitySnapshotEvent,
    TokenUsage,
    ToolCallResultEvent,
    ToolMessage,
    aggregate_token_usage,
)

from adapter.backends._seam import Usage


def result_event(message: ToolMessage) -> ToolCallResultEvent:
    """The TOOL_CALL_RESULT that announces a ToolMessage."""
    # The event has no error field; metadata carries it, so a client sees a declined call as declined.
    metadata = {"error": message.error} if message.error is not None else None
    return ToolCallResultEvent(
        message_id=message.id,
        tool_call_id=message.tool_call_id,
        content=message.content,
        role="tool",
        metadata=metadata,
    )


def activity_event(message: ActivityMessage) -> ActivitySnapshotEvent:
    """The ACTIVITY_SNAPSHOT that shows an activity message (a form card) as it now stands."""
    return ActivitySnapshotEvent(
        message_id=message.id, activity_type=message.activity_type, content=message.content, replace=True
    )


def token_usage(usage: Sequence[Usage]) -> list[TokenUsage] | None:
    """A run's usage in AG-UI's accounting: one entry per provider and model; None when the backend reported nothing.

    The steps' counts are summed as the SDK's `aggregate_token_usage` sums them: a count no step
    reported stays unset, so "not reported" is not zero (LIFE-10).
    """
    if not usage:
        return None
    return aggregate_token_usage(
        [
            TokenUsage(
                provider=u.provider,
                model=u.model,
                input_tokens=u.input_tokens,
                output_tokens=u.output_tokens,
                total_tokens=u.input_tokens + u.output_tokens,
                reasoning_tokens=u.reasoning_tokens,
                cached_input_tokens=u.cached_input_tokens,
                cache_write_input_tokens=u.cache_write_input_tokens,
            )
            for u in usage
        ]
    )


log = logging.getLogger("adapter.lifecycle")


class TurnEventType(StrEnum):
    """What happened to a turn."""

    TURN_STARTED = "TURN_STARTED"
    TURN_SUSPENDED = "TURN_SUSPENDED"
    TURN_RESUMED = "TURN_RESUMED"
    TURN_COMPLETED = "TURN_COMPLETED"
    TURN_FAILED = "TURN_FAILED"
    TURN_CANCELLED = "TURN_CANCELLED"


@dataclass(frozen=True, slots=True)
class TurnEvent:
    """One lifecycle event of a turn."""

    type: TurnEventType
    thread_id: str
    turn_id: str
    run_id: str | None = None
    interrupt_ids: tuple[str, ...] = ()
    code: str | None = None
    """The error code, on TURN_FAILED."""


Listener: TypeAlias = Callable[[TurnEvent], Awaitable[None] | None]


async def notify(listeners: Iterable[Listener], event: TurnEvent) -> None:
    """Tell every listener, in order; a failing listener is logged and skipped."""
    for listener in listeners:
        try:
            result = listener(event)
            if inspect.isawaitable(result):
                await result
        except Exception:
            log.exception("a lifecycle listener failed on %s for thread %s", event.type, event.thread_id)
