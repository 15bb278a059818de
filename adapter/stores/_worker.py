"""A store's own worker thread: its calls run there one at a time, in order, each answered within the deadline.

`run_in_executor` costs a call two futures chained across threads (a `concurrent.futures.Future`, with its lock and
condition, wrapped in an asyncio future) and `Deadline` a timer of its own. Here a call is one asyncio future and one
entry in a queue, and the thread sets its outcome on the loop with `call_soon_threadsafe`. The calls' deadlines come
in the order the calls were made (each `seconds` after its call), so one timer serves them all (`adapter._alarms`).
A call whose caller stopped waiting (cancelled, or past its deadline) before it began is never run; one already
running ends on the thread, and `stop` waits for it.
"""

from __future__ import annotations

import asyncio
import functools
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from adapter._alarms import Alarm, Alarms
from adapter.stores._deadline import checked_timeout
from adapter.stores._protocol import StoreUnavailable

_T = TypeVar("_T")


@dataclass(slots=True)
class _Call(Generic[_T]):
    future: asyncio.Future[_T]
    function: Callable[..., _T]
    args: tuple[Any, ...]
    what: str
    deadline: Alarm | None = None


class Worker:
    """One thread, started by the first call, that runs `call`'s functions in order; `stop` ends it.

    It serves one event loop at a time: a call from another loop than the last one's drops the calls of that loop
    still waiting (their loop has ended: nobody can be told), and their timer.

    Args:
        seconds: How long one call may take, waiting behind earlier calls included, before `StoreUnavailable`.
        store: How messages name the store, e.g. "the SQLite store".
        name: The thread's name.
    """

    def __init__(self, seconds: float, store: str, name: str) -> None:
        self.seconds = checked_timeout(seconds)
        self._store = store
        self._name = name
        self._queue: queue.SimpleQueue[_Call[Any] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._deadlines = Alarms(self.seconds)  # a loop's calls end with it: another loop's start afresh

    async def call(self, what: str, function: Callable[..., _T], *args: Any) -> _T:
        """`function(*args)` on the thread, or `StoreUnavailable` (naming `what`) once `seconds` have passed."""
        call: _Call[_T] = _Call(asyncio.get_running_loop().create_future(), function, args, what)
        call.deadline = self._deadlines.set(functools.partial(self._expire, call))
        self._submit(call)
        return await call.future

    async def stop(self, last: Callable[[], object]) -> None:
        """Run `last` after every call made before (however long they take), then end the thread."""
        if self._thread is None:
            return
        future = asyncio.get_running_loop().create_future()
        self._queue.put(_Call(future, last, (), "the last call"))  # no deadline: waited for whole
        self._queue.put(None)
        await future

    def _submit(self, call: _Call[Any]) -> None:
        if self._thread is None:
            # A daemon: a store never closed must not hold the interpreter's exit (SQLite survives the cut).
            self._thread = threading.Thread(target=self._serve, name=self._name, daemon=True)
            self._thread.start()
        self._queue.put(call)

    def _expire(self, call: _Call[Any]) -> None:
        """Tell a call past its deadline that the store did not answer."""
        if not call.future.done():
            message = f"{self._store} did not answer {call.what} within {self.seconds:g} s"
            call.future.set_exception(StoreUnavailable(message))

    def _answer(self, call: _Call[_T], result: _T | None, error: BaseException | None) -> None:
        if not call.future.done():  # else cancelled, or past its deadline: nobody waits for it
            if error is None:
                call.future.set_result(result)  # type: ignore[arg-type]  # None only with an error
            else:
                call.future.set_exception(error)
        if call.deadline is not None:
            call.deadline.cancel()

    # Below, the thread.

    def _serve(self) -> None:
        while (call := self._queue.get()) is not None:
            # Read across threads under the GIL: at worst a call given up this instant runs, as an executor's would.
            if call.future.done():
                continue  # its caller stopped waiting before it began: never run
            try:
                outcome: tuple[Any, BaseException | None] = (call.function(*call.args), None)
            except BaseException as error:  # the caller's to raise, as an executor's future would: the thread lives
                outcome = (None, error)
            try:
                call.future.get_loop().call_soon_threadsafe(self._answer, call, *outcome)
            except RuntimeError:  # its loop is closed: nobody waits for it
                pass
