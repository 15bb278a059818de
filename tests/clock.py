"""A settable clock for an adapter (`clocked`, `EngineConfig.use_clock`): tests move time instead of waiting for it."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from adapter import Adapter


class Clock:
    """A settable clock, read by an adapter that `clocked` gave it."""

    def __init__(self) -> None:
        self.now = datetime(2030, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, delta: timedelta) -> None:
        """Move time forward."""
        self.now += delta


def clocked(adapter: Adapter, clock: Callable[[], datetime]) -> Adapter:
    """`adapter`, reading the time from `clock`: the time source is no option of `Adapter`, only tests change it."""
    adapter.config.use_clock(clock)
    return adapter
