"""The kit's answer to an approval, built from what the interrupt's `responseSchema` asks for.

A framework says how it wants an approval answered: AG2 asks for a bare boolean, Agno for `{"accepted": true}`,
others for an enum (`"approve"` / `"reject"`). An answer of the wrong shape is rightly refused, and a kit that always
sent `{"approved": true}` reported the refusal as the target's fault. So the answer is built from the schema, checked
against it (within the schema step budget), and the case's evidence names it. Without a schema the answer is AG-UI's
recommended `{"approved": true|false}` (INT-7).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from adapter.conformance._grader import schema_issues

_YES = re.compile(r"^(?:approved?|yes|y|accept(?:ed)?|allow(?:ed)?|confirm(?:ed)?|ok|proceed|grant(?:ed)?|true)$", re.I)
_NO = re.compile(r"^(?:den(?:y|ied)|no|n|reject(?:ed)?|declined?|refused?|cancel(?:led)?|disallow(?:ed)?|false)$", re.I)
_YES_NAME = re.compile(r"approv|accept|allow|confirm|consent|proceed|grant", re.I)
"""A boolean property whose name says that true approves (`confirmed`, `accepted`, `allowCall`)."""
_DEPTH = 4  # levels of nested objects the kit fills in; approval schemas are one or two deep
_SAMPLES: dict[str, Any] = {"string": "conformance", "integer": 1, "number": 1, "null": None, "array": [], "object": {}}


class NoAnswer(Exception):
    """No answer the kit can build fits the interrupt's `responseSchema`; the message says why."""


@dataclass(frozen=True, slots=True)
class Answer:
    """An approval or a denial: the payload sent, and how the schema led to it."""

    payload: Any
    how: str

    def __str__(self) -> str:
        return f"{json.dumps(self.payload)} ({self.how})"


def approval_answer(interrupt: Mapping[str, Any], approve: bool) -> Answer:
    """The payload that approves (or denies) what `interrupt` asks about, as its `responseSchema` asks.

    Raises:
        NoAnswer: The schema cannot be evaluated, or no payload the kit can build fits it.
    """
    schema = interrupt.get("responseSchema")
    if not isinstance(schema, Mapping) or not schema:
        return Answer({"approved": approve}, "no responseSchema: AG-UI's recommended payload")
    for payload, how in _candidates(schema, approve, _DEPTH):
        issues = schema_issues(payload, dict(schema))
        if isinstance(issues, str):
            raise NoAnswer(issues)
        if not issues:
            return Answer(payload, f"responseSchema asks for {how}")
    word = "approval" if approve else "denial"
    raise NoAnswer(f"no {word} the kit can build fits the interrupt's responseSchema {_short(schema)}")


def _candidates(schema: Mapping[str, Any], approve: bool, depth: int) -> Iterator[tuple[Any, str]]:
    """Payloads that may answer `schema`, the likeliest first; each is checked against the schema before use."""
    if depth <= 0:
        return
    if "const" in schema and _reads(schema["const"], approve):
        yield schema["const"], f"the constant {json.dumps(schema['const'])}"
    values = schema.get("enum")
    if isinstance(values, list):
        yield from ((v, f"one of {json.dumps(values)}") for v in values if _reads(v, approve))
    for key in ("anyOf", "oneOf", "allOf"):
        branches = schema.get(key)
        if isinstance(branches, list):
            for branch in branches:
                if isinstance(branch, Mapping):
                    yield from _candidates({**schema, key: [], **branch}, approve, depth - 1)
    types = schema.get("type")
    kinds = set(types) if isinstance(types, list) else {types}
    if "boolean" in kinds:
        yield approve, "a bare boolean"
    if "object" in kinds or (types is None and isinstance(schema.get("properties"), Mapping)):
        yield from _objects(schema, approve, depth)
    if "string" in kinds and "enum" not in schema:
        yield ("approved" if approve else "denied"), "a string (guessed)"


def _objects(schema: Mapping[str, Any], approve: bool, depth: int) -> Iterator[tuple[Any, str]]:
    """Objects whose deciding property (`approved`, a boolean named like it, or one with an enum) says the answer."""
    properties = schema.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    deciding = sorted(properties, key=lambda name: (name != "approved", not _YES_NAME.search(name)))
    for name in deciding:
        sub = properties[name]
        if not isinstance(sub, Mapping):
            continue
        for value, how in _candidates(sub, approve, depth - 1):
            if isinstance(value, bool) and not _YES_NAME.search(name):
                continue  # a boolean says yes or no only in a property named for approval
            filled = {**_required(schema, depth, skip=name), name: value}
            yield filled, f"an object with {name!r} as {how}"
    if not properties:
        yield {"approved": approve}, "an object: AG-UI's recommended payload"


def _required(schema: Mapping[str, Any], depth: int, *, skip: str) -> dict[str, Any]:
    """The schema's other required properties, filled with plain values of their type."""
    properties = schema.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    required = schema.get("required")
    filled: dict[str, Any] = {}
    for name in required if isinstance(required, list) else []:
        if name == skip or not isinstance(name, str):
            continue
        filled[name] = _sample(properties.get(name), depth - 1)
    return filled


def _sample(schema: Any, depth: int) -> Any:
    if not isinstance(schema, Mapping) or depth <= 0:
        return "conformance"
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    types = schema.get("type")
    kind = types[0] if isinstance(types, list) and types else types
    if kind == "object":
        return _required(schema, depth, skip="")
    if kind == "boolean":
        return True
    return _SAMPLES.get(str(kind), "conformance")


def _reads(value: Any, approve: bool) -> bool:
    """Whether an enum member or constant reads as approving (or, for `approve=False`, as denying)."""
    if isinstance(value, bool):
        return value is approve
    if not isinstance(value, str):
        return False
    return bool((_YES if approve else _NO).match(value.strip()))


def _short(schema: Mapping[str, Any]) -> str:
    text = json.dumps(schema)
    return text if len(text) <= 200 else text[:199] + "…"
