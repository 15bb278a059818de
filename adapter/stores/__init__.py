"""Turn stores: where threads and their suspended turns are kept (the layout is in `_protocol`)."""

from adapter.stores._memory import MemoryStore
from adapter.stores._postgres import PostgresStore
from adapter.stores._protocol import (
    KEEP,
    JournalEvent,
    RunJournal,
    StaleClaim,
    StoreConflict,
    StoredMessage,
    StoredThread,
    StoreUnavailable,
    ThreadChange,
    ThreadHead,
    ThreadSummary,
    TurnStore,
)
from adapter.stores._sqlite import SQLiteStore

__all__ = [
    "KEEP",
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
    "ThreadHead",
    "ThreadSummary",
    "TurnStore",
]
