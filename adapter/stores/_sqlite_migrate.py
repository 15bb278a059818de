"""Moving a SQLite file from the one-document-per-thread layout to the append-only one (issue 10)."""

from __future__ import annotations

import json
import sqlite3
from typing import Any, Final

LEGACY_TABLE: Final = "agui_turns"
"""Before issue 10: `(thread_id, version, document)`, the whole thread as one JSON document."""


def migrate_documents(connection: sqlite3.Connection) -> int:
    """Move every legacy document into `agui_threads` and `agui_messages`, then drop the old table.

    Runs in one `BEGIN IMMEDIATE` transaction, so a process racing to open the same file waits and
    then finds nothing left to do. Versions carry over; claim numbers start at 0.

    Returns:
        How many threads were moved.
    """
    if not _has_legacy_table(connection):
        return 0
    connection.execute("BEGIN IMMEDIATE")
    try:
        moved = 0
        if _has_legacy_table(connection):  # another process may have migrated while this one waited
            for thread_id, version, text in connection.execute(
                f"SELECT thread_id, version, document FROM {LEGACY_TABLE}"
            ):
                _move(connection, thread_id, version, json.loads(text))
                moved += 1
            connection.execute(f"DROP TABLE {LEGACY_TABLE}")
        connection.execute("COMMIT")
    except BaseException:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        raise
    return moved


def _has_legacy_table(connection: sqlite3.Connection) -> bool:
    found = connection.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (LEGACY_TABLE,))
    return found.fetchone() is not None


def _move(connection: sqlite3.Connection, thread_id: str, version: int, document: dict[str, Any]) -> None:
    messages: list[dict[str, Any]] = document.get("messages") or []
    connection.executemany(
        "INSERT INTO agui_messages (thread_id, position, message_id, role, body) VALUES (?, ?, ?, ?, ?)",
        [(thread_id, i, str(m.get("id", "")), str(m.get("role", "")), json.dumps(m)) for i, m in enumerate(messages)],
    )
    records = [json.dumps(document.get(name)) for name in ("open_turn", "applied")]
    connection.execute(
        "INSERT INTO agui_threads (thread_id, version, claim, message_count, open_turn, applied) "
        "VALUES (?, ?, 0, ?, ?, ?)",
        (thread_id, version, len(messages), *records),
    )
