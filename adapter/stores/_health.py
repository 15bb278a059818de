"""What `GET /health` says of a store: it answers and can be written, it answers but cannot be written, or neither."""

from __future__ import annotations

import asyncio
import inspect
import logging
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
