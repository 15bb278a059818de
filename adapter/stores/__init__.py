"""Turn stores: where threads and their suspended turns are kept (the layout is in `_protocol`)."""

from adapter.stores._memory import MemoryStore
from adapter.stores._postgres import PostgresStore
from adapter.stores._protocol import (
    KEEP,
    StaleClaim,
    StoreConflict,
    StoredMessage,
    StoredThread,
    StoreUnavailable,
    ThreadChange,
    ThreadHead,
    TurnStore,
)
from adapter.stores._sqlite import SQLiteStore

__all__ = [
    "KEEP",
    "MemoryStore",
    "PostgresStore",
    "SQLiteStore",
    "StaleClaim",
    "StoreConflict",
    "StoreUnavailable",
    "StoredMessage",
    "StoredThread",
    "ThreadChange",
    "ThreadHead",
    "TurnStore",
]
