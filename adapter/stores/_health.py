"""What `GET /health` says of a store: it answers and can be written, it answers but cannot be written, or neither."""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Callable
from typing import Any, Literal

log = logging.getLogger("adapter.stores")

StoreHealth = Literal["ok", "read-only", "unreachable"]


async def health(store: Any, timeout: float) -> StoreHealth:
    """Ask `store.ping(write=True)`, then, if that failed, `store.ping()`; each within `timeout` seconds.

    A store whose `ping` takes no `write` (one written before it) is asked `ping()` alone: "ok" when it answers.
    """
    if not _takes_write(store.ping):
        return "ok" if await _answers(store.ping(), timeout, "did not answer") else "unreachable"
    if await _answers(store.ping(write=True), timeout, "cannot be written"):
        return "ok"
    return "read-only" if await _answers(store.ping(), timeout, "did not answer") else "unreachable"


async def _answers(ping: Any, timeout: float, failing: str) -> bool:
    try:
        await asyncio.wait_for(ping, timeout)
    except Exception:
        log.warning("health: the store %s", failing, exc_info=True)
        return False
    return True


def _takes_write(ping: Any) -> bool:
    try:
        parameters = inspect.signature(ping).parameters.values()
    except (TypeError, ValueError):  # pragma: no cover - a ping without a signature (a C function)
        return False
    return any(p.name == "write" or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


class Probe:
    """`health` of one store for many callers: asked once for all who come while it is asked, then kept `fresh` s.

    A balancer checks every replica every second or so, and under load a check that writes (`ping(write=True)`)
    adds load and queues behind the runs; checks that come together share one ask, and one answer serves the
    checks of the next second.
    """

    def __init__(
        self, store: Any, timeout: float, *, fresh: float = 1.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.store = store
        self.timeout = timeout
        self.fresh = fresh
        self.clock = clock
        self._answer: StoreHealth | None = None
        self._answered_at = 0.0
        self._asking: asyncio.Future[StoreHealth] | None = None

    async def __call__(self) -> StoreHealth:
        """The store's health: the last answer while it is fresh, else the one being asked, else a new ask."""
        if self._answer is not None and self.clock() - self._answered_at < self.fresh:
            return self._answer
        if self._asking is None:
            self._asking = asyncio.ensure_future(self._ask())
        return await asyncio.shield(self._asking)  # a caller that leaves does not cancel the others' ask

    async def _ask(self) -> StoreHealth:
        try:
            answer = await health(self.store, self.timeout)
            self._answer, self._answered_at = answer, self.clock()
            return answer
        finally:
            self._asking = None
