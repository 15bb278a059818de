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
import types
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Generator, Iterator
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
    the work it cuts. A model step's stream is read in the run's own task, so there the stop cancels that task
    where the stream waits, and takes its cancel back (`uncancel`) once the stream gave way: the run goes on.
    """

    def __init__(self) -> None:
        self.requested = False
        self.reason: str | None = None
        """The code a run ends with instead of a cancelled `RUN_FINISHED`: a stop no one asked for (a deadline)."""
        self._watchers: set[asyncio.Future[Any]] = set()
        self._reading: tuple[asyncio.Task[Any], _Reader] | None = None
        """The task waiting where a stream waits (`until_stopped`), and its reader: a stop cancels it there."""

    def request(self, *, reason: str | None = None) -> None:
        """Ask the run to stop (idempotent: the first request's `reason` stands)."""
        if self.requested:
            return
        self.requested = True
        self.reason = reason
        for watcher in self._watchers:
            if not watcher.done():
                watcher.set_result(_STOPPED)
        if self._reading is not None:
            task, reader = self._reading
            reader.cut = reader.closing = True
            task.cancel()

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

        The stream is read in this task (`_Reader`), up to `READ_AHEAD` items at a time, and each run is what it
        made before it would wait: the consumer takes a run of items per wait, not one item per generator step.
        Where the stream waits, a stop cancels this task there (told apart from any other cancel by the task's
        cancel count, `uncancel`), and the stream is cancelled where it waits, as a task of its own reading it would
        be, without one: no task started and no loop turn to hand its items over. What it read before the stop is
        still given, so the consumer gets every item the stream made (and its collector took in). A stream that
        ended before the stop ends without `cut`; its failure is raised after the items it made before it. However
        the iteration ends, the stream is closed (cancelled first, if it still waits) before this returns.
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
                task = asyncio.current_task()
                assert task is not None
                self._reading = (task, reader)
                try:
                    await reader.wait()
                except asyncio.CancelledError:  # the stream gave it back (its closing was cancelled)
                    if not reader.cut or task.uncancel() > 0:  # not the stop's, or from outside as well: it goes on
                        raise
                    continue
                finally:
                    self._reading = None
                if reader.cut and task.uncancel() > 0:  # the stream took the stop's cancel; one from outside goes on
                    raise asyncio.CancelledError
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
_FULL: Any = object()
"""What `_Reader._read` yields when `READ_AHEAD` items wait to be taken."""
READ_AHEAD: Final = 1024
"""Items the reader of a stream may hold before the consumer takes them: a stream that makes its items at once is
read in runs, not one task switch per item. Each run handed over lets the event loop run the run's readers, and
each then writes to its client: at 64, a 2,000-delta stream went out in 35 writes instead of 4, some 11 % more CPU
per event (docs/benchmarks.md, "The stream, round two"); 1024 makes it 5. A stream that waits (a model on the
network) is handed over at each wait, whatever the bound."""


class _Reader:
    """A stream read in the task that takes its items, up to `READ_AHEAD` ahead, a run at a time.

    `_read` is the reading loop, a generator-based coroutine that this class steps by hand: it reads on at once
    while the stream makes items without waiting, and where the stream waits it hands over what it read; the task
    that takes the items then awaits what the stream waits on (`wait`), so a cancel of that task reaches the stream
    where it waits, as it would a task of the stream's own.
    """

    def __init__(self, stream: AsyncIterator[Any]) -> None:
        self._stream = stream
        self.items: list[Any] = []
        """What the stream made and the consumer did not take yet."""
        self.end: Any = None
        """`_DONE` once the stream ended, the exception it raised, or None while it goes on."""
        self.closing = False
        """Nobody takes the stream's items any more: its cancellation is swallowed, and it is closed."""
        self.cut = False
        """A stop cancelled the task waiting on the stream (`StopSignal.request`): its cancel is the stop's."""
        self._steps = self._read()
        self._waits_on: Any = _FULL
        """What the stream waits on (a future, or None for a bare yield), `_FULL` when it waits for room, `_DONE`
        once `_read` returned."""
        self._step(None, None)

    def take(self) -> list[Any]:
        """Every item read and not taken yet, oldest first."""
        items, self.items = self.items, []
        return items

    @types.coroutine
    def _read(self) -> Generator[Any, Any, None]:
        step = self._stream.__anext__
        try:
            while True:
                item = yield from step().__await__()
                if self.closing:  # a stream that swallowed its cancellation: nobody takes its items
                    return
                self.items.append(item)
                if len(self.items) >= READ_AHEAD:
                    yield _FULL
                    if self.closing:
                        return
        except StopAsyncIteration:
            self.end = _DONE
        except Exception as exc:  # the stream's own failure: the consumer's, after the items it made
            if not self.closing:
                self.end = exc
        except GeneratorExit:
            raise
        except BaseException:  # a cancel: the stop's (swallowed), or the consumer's own (raised to it)
            if not self.closing:
                raise
        finally:
            yield from _aclose(self._stream)

    def _step(self, sent: Any, thrown: BaseException | None) -> None:
        """Read on until the stream waits or ends: send it `sent`, or throw `thrown` in where it waits."""
        try:
            waits_on = self._steps.throw(thrown) if thrown is not None else self._steps.send(sent)
        except StopIteration:
            waits_on = _DONE
        except BaseException:
            self._waits_on = _DONE
            raise
        self._waits_on = waits_on

    @types.coroutine
    def wait(self, *, closed: bool = False) -> Generator[Any, Any, None]:
        """Await what the stream waits on, reading on, until it made items or ended (`closed`: until it ended).

        A stream that waits for room (`READ_AHEAD` items taken at once) reads on after one loop turn (a bare
        yield): the run's readers write what it made meanwhile.
        """
        while self._waits_on is not _DONE and (closed or not self.items):
            try:
                sent = yield None if self._waits_on is _FULL else self._waits_on
            except GeneratorExit:
                self._steps.close()
                raise
            except BaseException as thrown:
                self._step(None, thrown)
            else:
                self._step(sent, None)

    async def close(self) -> None:
        """Cancel the stream where it waits (as `Task.cancel` would), and wait until it is closed."""
        self.closing = True
        waits_on = self._waits_on
        if waits_on is _DONE:
            return
        if waits_on is _FULL:
            self._step(None, None)
        elif not (isinstance(waits_on, asyncio.Future) and waits_on.cancel()):
            self._step(None, asyncio.CancelledError())
        # else its CancelledError reaches the stream once the future it awaits is done, as in a task of its own
        await self.wait(closed=True)


async def _aclose(stream: AsyncIterator[Any]) -> None:
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        await aclose()
