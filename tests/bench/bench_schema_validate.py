"""Benchmark: `schema_tools.validate` (cached validators) against compiling a validator per call.

Run with ``python tests/bench/bench_schema_validate.py [N]``. Every side validates the same instance
against the same frozen schema with format checking, in the same run. Baselines:

- ``fresh``: a new ``Draft202012Validator`` for every call, as code without a cache would build;
- ``jsonschema.validate``: the convenience function, which also checks the schema against the
  meta-schema on every call (schema_tools does that once, when it compiles).

Each figure is the best of several rounds, to damp noise from other processes. jsonschema builds
validators lazily, so the gain is small for a flat schema and grows with ``$ref`` (a fresh validator
has to build its reference resolver again) and against ``jsonschema.validate``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

import jsonschema
from jsonschema import Draft202012Validator, FormatChecker

from schema_tools import validate

SCHEMA: dict[str, Any] = {
    "type": "object",
    "title": "Support ticket",
    "properties": {
        "title": {"type": "string", "minLength": 1, "maxLength": 200},
        "priority": {"type": "string", "enum": ["LOW", "MEDIUM", "HIGH"]},
        "affectedSystem": {"type": "string"},
        "impactScope": {"type": "string", "enum": ["ONE_USER", "PARTIAL_USERS", "ALL_USERS"]},
        "reporter": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "email": {"type": "string", "format": "email"}},
            "required": ["name", "email"],
        },
        "occurredAt": {"type": "string", "format": "date-time"},
        "tags": {"type": "array", "items": {"type": "string", "pattern": "^[a-z-]+$"}, "maxItems": 10},
    },
    "required": ["title", "priority", "affectedSystem", "impactScope"],
    "additionalProperties": False,
}
REF_SCHEMA: dict[str, Any] = {
    "$defs": {
        "scope": {"type": "string", "enum": ["ONE_USER", "PARTIAL_USERS", "ALL_USERS"]},
        "person": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "email": {"type": "string", "format": "email"}},
            "required": ["name", "email"],
        },
    },
    **SCHEMA,
    "properties": {
        **SCHEMA["properties"],
        "impactScope": {"$ref": "#/$defs/scope"},
        "reporter": {"$ref": "#/$defs/person"},
    },
}
ROUNDS = 5
INSTANCE = {
    "title": "Login outage",
    "priority": "HIGH",
    "affectedSystem": "SSO",
    "impactScope": "ALL_USERS",
    "reporter": {"name": "Ada", "email": "ada@example.com"},
    "occurredAt": "2025-01-31T08:15:00Z",
    "tags": ["login", "sso"],
}


def cached(schema: dict[str, Any]) -> None:
    assert validate(INSTANCE, schema) == []


def fresh(schema: dict[str, Any]) -> None:
    validator = Draft202012Validator(schema, format_checker=FormatChecker())
    assert not list(validator.iter_errors(INSTANCE))


def convenience(schema: dict[str, Any]) -> None:
    jsonschema.validate(INSTANCE, schema, cls=Draft202012Validator, format_checker=FormatChecker())


def per_call_us(fn: Callable[[dict[str, Any]], None], schema: dict[str, Any], n: int) -> float:
    fn(schema)  # warm up (fills the cache for the cached side)
    best = float("inf")
    for _ in range(ROUNDS):
        start = time.perf_counter()
        for _ in range(n):
            fn(schema)
        best = min(best, (time.perf_counter() - start) / n * 1e6)
    return best


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000
    print(f"{n} validations per round, best of {ROUNDS} rounds")
    for label, schema in (("flat schema", SCHEMA), ("schema with $ref", REF_SCHEMA)):
        ours = per_call_us(cached, schema, n)
        baseline = per_call_us(fresh, schema, n)
        checked = per_call_us(convenience, schema, n)
        print(f"{label}:")
        print(f"  schema_tools.validate (cached)   {ours:8.1f} us/call")
        print(f"  fresh Draft202012Validator       {baseline:8.1f} us/call  ratio {baseline / ours:5.1f}x")
        print(f"  jsonschema.validate              {checked:8.1f} us/call  ratio {checked / ours:5.1f}x")


if __name__ == "__main__":
    main()
