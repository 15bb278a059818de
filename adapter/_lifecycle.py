"""Lifecycle events for listeners: where a turn stands, for notifications and audit.

A listener is a plain or async callable taking a `TurnEvent`. One that raises is logged and never
breaks a run.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeAlias

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
