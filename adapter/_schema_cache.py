"""Client tool schemas already checked, by content: a client that resends its tools with every run pays once.

The cache keeps a digest of each schema's JSON and what `check_schema` found (usually nothing), never
the schema itself, so its memory is bounded by its entry count alone. Reads and writes take a lock:
a large declaration is checked on a worker thread while the event loop checks small ones.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from typing import Final

from pydantic_core import PydanticSerializationError, to_json

from schema_tools import PolicyViolation, SchemaPolicy, SchemaPolicyError, check_schema

DEFAULT_ENTRIES: Final = 4096
"""Schemas remembered per adapter: a digest and (rarely) a few violations each, well under 1 MiB in all."""

_Key = tuple[SchemaPolicy, bytes]


class SchemaCache:
    """`check_schema` results by (policy, schema digest); the least recently used entry goes first."""

    def __init__(self, entries: int = DEFAULT_ENTRIES) -> None:
        self._entries = entries
        self._found: OrderedDict[_Key, tuple[PolicyViolation, ...]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._found)

    def violations(self, schema: object, policy: SchemaPolicy) -> tuple[PolicyViolation, ...]:
        """What `check_schema(schema, policy=policy)` finds: remembered, or checked now and remembered."""
        try:
            key = (policy, hashlib.sha256(to_json(schema)).digest())
        except PydanticSerializationError:  # not JSON: the check itself says so, and there is nothing to key
            return _check(schema, policy)
        with self._lock:
            found = self._found.get(key)
            if found is not None:
                self._found.move_to_end(key)
                return found
        found = _check(schema, policy)
        with self._lock:
            self._found[key] = found
            while len(self._found) > self._entries:
                self._found.popitem(last=False)
        return found


def _check(schema: object, policy: SchemaPolicy) -> tuple[PolicyViolation, ...]:
    try:
        check_schema(schema, policy=policy)
    except SchemaPolicyError as exc:
        return tuple(exc.violations)
    return ()
