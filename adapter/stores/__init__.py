"""Turn stores: where threads and their suspended turns are kept (the layout is in `_protocol`).

The stores are imported on first use: an app on a database (`SQLiteStore`, `PostgresStore`) need not hold the other's
code in memory, nor `sqlite3` when it keeps its threads elsewhere, nor the `MemoryStore` it does not use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from adapter._lazy import deferred
from adapter.stores._protocol import (
    ANY_INCARNATION,
    KEEP,
    JournalAppend,
    JournalEvent,
    RunJournal,
    StaleClaim,
    StoreConflict,
    StoredMessage,
    StoredThread,
    StoreUnavailable,
    ThreadChange,
    ThreadGone,
    ThreadHead,
    ThreadSummary,
    TurnStore,
)

if TYPE_CHECKING:
    from adapter.stores._memory import MemoryStore
    from adapter.stores._postgres import PostgresStore
    from adapter.stores._sqlite import SQLiteStore

_LAZY = {
    "MemoryStore": "adapter.stores._memory",
    "PostgresStore": "adapter.stores._postgres",
    "SQLiteStore": "adapter.stores._sqlite",
}
"""The names imported on first use, by the module that defines them."""

__all__ = [
    "ANY_INCARNATION",
    "KEEP",
    "JournalAppend",
    "JournalEvent",
    "MemoryStore",
    "PostgresStore",
    "RunJournal",
    "SQLiteStore",
    "StaleClaim",
    "StoreConflict",
    "StoreUnavailable",
    "StoredMessage",
    "StoredThread",
    "ThreadChange",
    "ThreadGone",
    "ThreadHead",
    "ThreadSummary",
    "TurnStore",
]


__getattr__, __dir__ = deferred(globals(), _LAZY)
