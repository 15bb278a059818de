"""Turn stores: where threads and their suspended turns are kept (the layout is in `_protocol`)."""

from adapter.stores._memory import MemoryStore
from adapter.stores._postgres import PostgresStore
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
from adapter.stores._sqlite import SQLiteStore

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
