"""The store seam: one versioned JSON document per thread, updated by compare-and-set."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True, slots=True)
class Versioned:
    """A thread's stored document and the version it was read at."""

    document: dict[str, Any]
    version: int


class StoreConflict(Exception):
    """The document changed since it was read: another request got there first."""

    def __init__(self, thread_id: str, expected_version: int) -> None:
        self.thread_id = thread_id
        self.expected_version = expected_version
        super().__init__(f"thread {thread_id!r} is no longer at version {expected_version}")


@runtime_checkable
class TurnStore(Protocol):
    """Durable storage for suspended turns, shared by every replica that serves a thread.

    The adapter keeps one JSON document per thread. Each write names the version it read; a write
    against a stale version raises `StoreConflict` and changes nothing, so two requests racing on
    one thread can never both apply.
    """

    async def load(self, thread_id: str) -> Versioned | None:
        """Return the thread's document, or None when the thread has none."""
        ...

    async def save(self, thread_id: str, document: dict[str, Any], *, expected_version: int) -> int:
        """Store `document` if the thread is still at `expected_version` (0: absent); return the new version."""
        ...

    async def close(self) -> None:
        """Release connections and files."""
        ...
