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
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, TypeVar

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

    async def until_stopped(self, stream: AsyncIterator[T], cut: T) -> AsyncGenerator[T, None]:
        """`stream`'s items, until a stop comes while it is silent: it is then cancelled where it waits, and `cut` ends.

        The stream is read by a task of its own (`_Reader`), one item at a time and only once the consumer asks
        for it: a consumer that stops between two items leaves none read and unsent, and an item read as the stop
        came is still given. However the iteration ends, the stream is closed (cancelled first, if it still waits)
        before this returns.
        """
        reader = _Reader(stream)
        try:
            while True:
                ready = asyncio.get_running_loop().create_future()
                with self._watching(ready):
                    item = await reader.next(ready)
                if item is _STOPPED:
                    await reader.close()
                    item = reader.late
                    if item is not _NOTHING and item is not _DONE:
                        yield item
                    if item is not _DONE:
                        yield cut
                    return
                if item is _DONE:
                    return
                yield item
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
"""What `_Reader.next` gives at the end of its stream."""
_NOTHING: Any = object()


class _Reader:
    """A stream read by a task of its own, one item per `next`: a stop cancels what that task waits on, alone."""

    def __init__(self, stream: AsyncIterator[Any]) -> None:
        self._stream = stream
        self._ready: asyncio.Future[Any] | None = None
        self._asked: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self.late: Any = _NOTHING
        """The item (or `_DONE`) the stream gave after something else answered `next` (a stop came first)."""

    async def next(self, ready: asyncio.Future[Any]) -> Any:
        """The stream's next item, `_DONE` at its end, or what else resolved `ready` first; its failure raised."""
        if ready.done():
            return ready.result()
        self._ready = ready
        if self._task is None:
            self._task = asyncio.ensure_future(self._read())
        elif self._asked is not None and not self._asked.done():
            self._asked.set_result(None)
        return await ready

    async def _read(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._wanted():
                try:
                    item = await anext(self._stream)
                except StopAsyncIteration:
                    self._hand(_DONE)
                    return
                if self._closing:  # a stream that swallowed its cancellation: nobody takes its items
                    return
                self._asked = loop.create_future()
                self._hand(item)
                await self._asked
        except BaseException as exc:
            if not self._closing:  # the stream's own failure (even a CancelledError it raised): the consumer's
                self._hand(exc, failed=True)
        finally:
            await _aclose(self._stream)

    def _wanted(self) -> bool:
        """Whether an item is waited for: not once a stop answered the consumer while this task was being woken."""
        return not self._closing and self._ready is not None and not self._ready.done()

    def _hand(self, item: Any, *, failed: bool = False) -> None:
        ready = self._ready
        if ready is not None and not ready.done():
            if failed:
                ready.set_exception(item)
            else:
                ready.set_result(item)
        elif not failed:  # read as the stop came: the stream's collector has it, so the consumer gets it too
            self.late = item

    async def close(self) -> None:
        """Cancel the reading task where it waits, and wait until the stream is closed."""
        self._closing = True
        task = self._task
        if task is None:
            await _aclose(self._stream)
            return
        task.cancel()
        await asyncio.wait({task})


async def _aclose(stream: AsyncIterator[Any]) -> None:
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        await aclose()
