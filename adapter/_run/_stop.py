"""Stopping a run: the signal a stop request raises, and what the calls a stopped run leaves get as answers.

A stop request (`POST /threads/{threadId}/runs/{runId}/stop`, `Adapter.stop_run`) reaches the replica that
runs the run through its journal (`adapter._sessions._journal`), which raises the run's `StopSignal`. The run reads it
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
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, Final, TypeVar

from adapter._run._tools import ToolResult

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

    The run reads it at its safe points. Where the run waits on what a stop may cut short (a silent model step,
    a cancellable tool), the wait is raced against the request (`until_stopped`, `race`): a stop cancels only
    the work it cuts, never the run's own task.
    """

    def __init__(self) -> None:
        self.requested = False
        self.reason: str | None = None
        """The code a run ends with instead of a cancelled `RUN_FINISHED`: a stop no one asked for (a deadline)."""
        self._watchers: set[asyncio.Future[Any]] = set()

    def request(self, *, reason: str | None = None) -> None:
        """Ask the run to stop (idempotent: the first request's `reason` stands)."""
        if self.requested:
            return
        self.requested = True
        self.reason = reason
        for watcher in self._watchers:
            if not watcher.done():
                watcher.set_result(_STOPPED)

    async def race(self, work: Awaitable[T], stopped: Callable[[], T]) -> T:
        """`work`'s result, or `stopped()` once a stop cancelled it first (a cancellable tool)."""
        task = asyncio.ensure_future(work)
        waiter = asyncio.get_running_loop().create_future()
        try:
            with self._watching(waiter):
                await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            task.cancel()  # the run itself is going away: the tool goes with it, as it would without a race
            raise
        if task.done():
            return task.result()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return task.result() if task.done() and not task.cancelled() else stopped()

    async def until_stopped(self, stream: AsyncIterator[T], cut: T) -> AsyncGenerator[list[T], None]:
        """`stream`'s items in runs until a stop is requested: the stream is then cancelled, `cut` ends the last run.

        The stream is read by a task of its own (`_Reader`), up to `READ_AHEAD` items ahead, and each run is what
        it read meanwhile: the consumer takes a run of items per task switch, not one item per generator step.
        What it read before the stop is still given, so the consumer gets every item the stream made (and its
        collector took in). A stream that ended before the stop ends without `cut`; its failure is raised after the
        items it made before it. However the iteration ends, the stream is closed (cancelled first, if it still
        waits) before this returns.
        """
        reader = _Reader(stream)
        try:
            while True:
                if self.requested:
                    await reader.close()
                    yield reader.take() if reader.end is _DONE else [*reader.take(), cut]
                    return
                if reader.items:
                    yield reader.take()
                    continue
                if reader.end is not None:
                    if reader.end is _DONE:
                        return
                    raise reader.end
                waiter = asyncio.get_running_loop().create_future()
                with self._watching(waiter):
                    await reader.wait(waiter)
        finally:
            await reader.close()

    @contextlib.contextmanager
    def _watching(self, future: asyncio.Future[Any]) -> Iterator[None]:
        """Resolve `future` with `_STOPPED` if a stop is requested while the block runs."""
        if self.requested:
            future.set_result(_STOPPED)
        self._watchers.add(future)
        try:
            yield
        finally:
            self._watchers.discard(future)


_STOPPED: Any = object()
"""What a watched future holds when a stop came first."""
_DONE: Any = object()
"""What `_Reader.end` holds once its stream ended."""
READ_AHEAD: Final = 1024
"""Items the reader of a stream may hold before the consumer takes them: a stream that makes its items at once is
read in runs, not one task switch per item. Each run handed over lets the event loop run the run's readers, and
each then writes to its client: at 64, a 2,000-delta stream went out in 35 writes instead of 4, some 11 % more CPU
per event (docs/benchmarks.md, "The stream, round two"); 1024 makes it 5. A stream that waits (a model on the
network) is handed over at each wait, whatever the bound."""


class _Reader:
    """A stream read by a task of its own, up to `READ_AHEAD` items ahead: a stop cancels what that task waits on."""

    def __init__(self, stream: AsyncIterator[Any]) -> None:
        self._stream = stream
        self.items: list[Any] = []
        """What the stream made and the consumer did not take yet."""
        self.end: Any = None
        """`_DONE` once the stream ended, the exception it raised, or None while it goes on."""
        self._waiter: asyncio.Future[Any] | None = None
        self._room: asyncio.Future[None] | None = None
        self._closing = False
        self._task: asyncio.Task[None] | None = asyncio.ensure_future(self._read())

    def take(self) -> list[Any]:
        """Every item read and not taken yet, oldest first; the reader may read on."""
        items, self.items = self.items, []
        room = self._room
        if room is not None and not room.done():
            room.set_result(None)
        return items

    async def wait(self, waiter: asyncio.Future[Any]) -> None:
        """Return once an item is read, the stream ended, or something else resolved `waiter` (a stop)."""
        if not waiter.done():
            self._waiter = waiter
            await waiter

    async def _read(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            async for item in self._stream:
                if self._closing:  # a stream that swallowed its cancellation: nobody takes its items
                    return
                self.items.append(item)
                self._wake()
                if len(self.items) >= READ_AHEAD:
                    self._room = loop.create_future()
                    await self._room
            self.end = _DONE
        except BaseException as exc:
            if not self._closing:  # the stream's own failure (even a CancelledError it raised): the consumer's
                self.end = exc
        finally:
            self._wake()
            await _aclose(self._stream)

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def close(self) -> None:
        """Cancel the reading task where it waits, and wait until the stream is closed."""
        self._closing = True
        task, self._task = self._task, None
        if task is not None and not task.done():  # one that ended closed its stream: no loop turn to wait for it
            task.cancel()
            await asyncio.wait({task})
            await _aclose(self._stream)  # a task cancelled before it ran never closed it


async def _aclose(stream: AsyncIterator[Any]) -> None:
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        await aclose()
