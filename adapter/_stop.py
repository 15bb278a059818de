"""Stopping a run: the signal a stop request raises, and what the calls a stopped run leaves get as answers.

A stop request (`POST /threads/{threadId}/runs/{runId}/stop`, `Adapter.stop_run`) reaches the replica that
runs the run through its journal (`adapter._journal`), which raises the run's `StopSignal`. The run reads it
at its safe points: before each model step, between the events of a step, and before it runs a step's calls.
It then ends with `RUN_FINISHED` and the outcome `{"type": "cancelled"}`:

- a tool that already started finishes, and its result is recorded as any other; a tool declared
  `@tool(cancellable=True)` is cancelled instead (`asyncio.CancelledError` is raised at the point where it
  waits), and its call is answered `stopped_during`;
- every call of the run that has no answer yet (made by the step, waiting for an approval or the client,
  deferred by the backend) is answered `stopped_before`, once; no tool runs after the stop;
- a model step that is streaming is cut short: what it said so far is kept, its open messages are ended.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import TypeVar

from adapter._tools import ToolResult

T = TypeVar("T")

STOPPED = "cancelled"
"""The `error` of a call a stop answered: the same as a person's cancel, so a client treats both alike."""


def stopped_before(name: str) -> ToolResult:
    """The answer to a call a stopped run never ran."""
    return ToolResult(f"The run was stopped before {name} ran; it was not executed.", error=STOPPED)


def stopped_during(name: str) -> ToolResult:
    """The answer to a cancellable tool the stop cancelled while it ran."""
    return ToolResult(f"The run was stopped while {name} ran; it was cancelled before it finished.", error=STOPPED)


class StopSignal:
    """Whether someone asked one run to stop; raised once, never lowered.

    `on_request` lets the run's driver cut a silent model step short (`adapter._journal`): the signal itself
    knows nothing of tasks.
    """

    def __init__(self) -> None:
        self.requested = False
        self.reason: str | None = None
        """The code a run ends with instead of a cancelled `RUN_FINISHED`: a stop no one asked for (a deadline)."""
        self.cutting = False
        """The driver cancelled the run's wait on a silent backend stream, for this stop."""
        self._event: asyncio.Event | None = None
        self.on_request: Callable[[], None] | None = None

    def request(self, *, reason: str | None = None) -> None:
        """Ask the run to stop (idempotent: the first request's `reason` stands)."""
        if self.requested:
            return
        self.requested = True
        self.reason = reason
        if self._event is not None:
            self._event.set()
        if self.on_request is not None:
            self.on_request()

    def absorb(self) -> bool:
        """Whether a `CancelledError` is this stop cutting a silent model step short; if so, it is withdrawn."""
        if not self.cutting:
            return False
        self.cutting = False
        task = asyncio.current_task()
        if task is not None:
            task.uncancel()
        return True

    async def race(self, work: Awaitable[T], stopped: Callable[[], T]) -> T:
        """`work`'s result, or `stopped()` once a stop cancelled it first (a cancellable tool)."""
        if self._event is None:
            self._event = asyncio.Event()
            if self.requested:
                self._event.set()
        task = asyncio.ensure_future(work)
        waiter = asyncio.ensure_future(self._event.wait())
        try:
            await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            task.cancel()  # the run itself is going away: the tool goes with it, as it would without a race
            raise
        finally:
            waiter.cancel()
        if task.done():
            return task.result()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return task.result() if task.done() and not task.cancelled() else stopped()
