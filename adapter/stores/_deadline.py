"""A store call's deadline: it answers within its `timeout`, or raises `StoreUnavailable` then.

A store that does not answer (a network partition that drops nothing but delivers nothing, a file
system that hangs, a lock held by a frozen writer) must not hold a request for ever. The work a call
stops waiting for is cancelled; it may still end later (a save may then be applied, as any
`StoreUnavailable` save may), and the store waits for it when it closes. `Deadline` serves a store whose calls
are coroutines (PostgreSQL's); `SQLiteStore`'s thread keeps the same rule in `_worker`.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable
from typing import Any, Final, TypeVar

from adapter.stores._protocol import StoreUnavailable

_T = TypeVar("_T")

DEFAULT_TIMEOUT: Final = 5.0
"""Seconds one store call may take by default, waiting for a connection or a lock included."""


def checked_timeout(seconds: float) -> float:
    """`seconds` if it is a usable deadline: a finite number above 0.

    Raises:
        ValueError: Anything else: a store without a deadline could wait for ever.
    """
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not 0 < seconds < math.inf:
        raise ValueError(f"timeout must be a finite number of seconds above 0, not {seconds!r}")
    return float(seconds)


class Deadline:
    """The deadline of every call of one store: `run` gives the call's result within `seconds`, or raises.

    Args:
        seconds: How long one call may take, waiting for a connection or a lock included.
        store: How messages name the store, e.g. "the SQLite store".
    """

    def __init__(self, seconds: float, store: str) -> None:
        self.seconds = checked_timeout(seconds)
        self._store = store
        self._abandoned: set[asyncio.Future[Any]] = set()

    async def run(self, work: Awaitable[_T], what: str) -> _T:
        """The result of `work` (a coroutine), or `StoreUnavailable` once `seconds` have passed.

        Raises:
            StoreUnavailable: `work` did not end in time; it is cancelled, and `what` names it in the message.
        """
        future: asyncio.Future[_T] = asyncio.ensure_future(work)
        try:
            done, _ = await asyncio.wait({future}, timeout=self.seconds)
        except BaseException:  # the caller was cancelled: so is its work
            self._abandon(future)
            raise
        if not done:
            self._abandon(future)
            raise StoreUnavailable(f"{self._store} did not answer {what} within {self.seconds:g} s")
        return future.result()

    async def settle(self) -> None:
        """Cancel again, and wait for, the work calls stopped waiting for (a driver's clean-up); for `close`."""
        while self._abandoned:
            pending = set(self._abandoned)
            for future in pending:
                future.cancel()
            await asyncio.wait(pending)

    def _abandon(self, future: asyncio.Future[Any]) -> None:
        future.cancel()
        if not future.done():  # a task's clean-up still runs (psycopg cancels the query on the server)
            self._abandoned.add(future)
            future.add_done_callback(self._forget)

    def _forget(self, future: asyncio.Future[Any]) -> None:
        self._abandoned.discard(future)
        if not future.cancelled():
            future.exception()  # retrieved: nobody waits for it any more, and its caller was told already
