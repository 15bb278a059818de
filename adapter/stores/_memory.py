from __future__ import annotations

import asyncio
import json
from typing import Any

from adapter.stores._protocol import StoreConflict, Versioned


class MemoryStore:
    """A process-local store, for tests and single-process use. Nothing survives a restart."""

    def __init__(self) -> None:
        self._documents: dict[str, tuple[str, int]] = {}
        self._lock = asyncio.Lock()

    async def load(self, thread_id: str) -> Versioned | None:
        """Return the thread's document, or None."""
        stored = self._documents.get(thread_id)
        if stored is None:
            return None
        text, version = stored
        # Stored as text so that callers can never mutate what the store holds.
        return Versioned(json.loads(text), version)

    async def save(self, thread_id: str, document: dict[str, Any], *, expected_version: int) -> int:
        """Compare-and-set the thread's document."""
        async with self._lock:
            current = self._documents.get(thread_id, ("", 0))[1]
            if current != expected_version:
                raise StoreConflict(thread_id, expected_version)
            self._documents[thread_id] = (json.dumps(document), current + 1)
            return current + 1

    async def close(self) -> None:
        """Nothing to release."""
