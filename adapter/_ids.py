"""Ids: the one way the engine and the backends mint them, and the key that names one logical call."""

from __future__ import annotations

import hashlib
import uuid


def new_id(prefix: str) -> str:
    """An opaque, unique id: `prefix`, an underscore and 32 hex digits (`msg_…`, `int_…`, `call_…`)."""
    return f"{prefix}_{uuid.uuid4().hex}"


def idempotency_key(thread_id: str, tool_call_id: str) -> str:
    """The same key for every execution of one logical call, replays included."""
    return hashlib.sha256(f"{thread_id}\x00{tool_call_id}".encode()).hexdigest()[:32]
