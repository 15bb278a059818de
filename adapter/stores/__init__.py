"""Turn stores: where suspended turns wait for their resume."""

from adapter.stores._memory import MemoryStore
from adapter.stores._protocol import StoreConflict, TurnStore, Versioned
from adapter.stores._sqlite import SQLiteStore

__all__ = ["MemoryStore", "SQLiteStore", "StoreConflict", "TurnStore", "Versioned"]
