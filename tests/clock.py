"""A settable clock for `Adapter(clock=...)`: tests move time instead of waiting for it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta


class Clock:
    """A settable clock for `Adapter(clock=...)`."""

    def __init__(self) -> None:
        self.now = datetime(2030, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, delta: timedelta) -> None:
        """Move time forward."""
        self.now += delta
