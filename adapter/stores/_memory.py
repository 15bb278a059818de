from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field

from adapter.stores._protocol import (
    JSONValue,
    StaleClaim,
    StoreConflict,
    StoredMessage,
    StoredThread,
    ThreadChange,
    ThreadHead,
)


@dataclass(slots=True)
class _Thread:
    version: int = 0
    claim: int = 0
    messages: list[StoredMessage] = field(default_factory=list)
    records: dict[str, str] = field(default_factory=dict)
    """Head records as JSON text, so that no caller can mutate what the store holds."""


class MemoryStore:
    """A process-local store, for tests and single-process use. Nothing survives a restart.

    Messages are kept as the immutable `StoredMessage`s the engine appended: a load hands out the
    same objects, never a copy.
    """

    def __init__(self) -> None:
        self._threads: dict[str, _Thread] = {}
        self._lock = asyncio.Lock()

    async def load(self, thread_id: str, *, since: int | None = 0) -> StoredThread | None:
        """Return the thread's head and its messages from position `since` on, or None."""
        thread = self._threads.get(thread_id)
        if thread is None:
            return None
        head = ThreadHead(
            version=thread.version,
            claim=thread.claim,
            message_count=len(thread.messages),
            **{name: json.loads(text) for name, text in thread.records.items()},
        )
        start = len(thread.messages) if since is None else min(since, len(thread.messages))
        return StoredThread(head, start, thread.messages[start:])

    async def save(
        self, thread_id: str, change: ThreadChange, *, expected_version: int, fence: int | None = None
    ) -> int:
        """Write `change` if the thread is at `expected_version` (and, with `fence`, at that claim)."""
        async with self._lock:
            current = self._threads.get(thread_id) or _Thread()
            if fence is not None and current.claim != fence:
                raise StaleClaim(thread_id, expected_version, fence)
            if current.version != expected_version:
                raise StoreConflict(thread_id, expected_version)
            change.check(len(current.messages))
            records = {name: _text(value) for name, value in change.records().items()}
            _apply(current, change, records)
            self._threads[thread_id] = current
            return current.version

    async def ping(self) -> None:
        """Always answers: the store is in this process."""

    async def close(self) -> None:
        """Nothing to release."""


def _apply(thread: _Thread, change: ThreadChange, records: dict[str, str]) -> None:
    """Change `thread` in place; `change.check` has passed, so nothing below can fail half-way."""
    if change.keep is not None:
        del thread.messages[change.keep :]
    for position, message in change.replace.items():
        thread.messages[position] = message
    thread.messages.extend(change.append)
    thread.records.update(records)
    thread.version += 1
    thread.claim += change.claim


def _text(value: JSONValue) -> str:
    # ASCII-escaped, like SQLite's copy: a lone surrogate from client JSON survives the round trip.
    return json.dumps(value)
