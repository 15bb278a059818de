"""`check_schema`: may this schema be used as a form or tool schema?

Two passes. The first walks the raw JSON without recursion and enforces the size limits (`SchemaPolicy`)
and that the document is JSON at all; when it fails (``not-json``, ``max-depth``, ``max-nodes``,
``max-bytes``) the second pass is skipped, so a bomb costs at most ``max_nodes`` steps. The second pass
reports every other violation at once: the Draft 2020-12 meta-schema, unknown keywords, markup in text,
regexes, references and identifiers, and the size of the schema once its references are expanded
(``max-expansion``, counted in time linear in the document: ``schema_tools._expansion``).
"""

from __future__ import annotations

import json
import math
from typing import Any

from schema_tools._errors import PolicyViolation, SchemaPolicyError
from schema_tools._expansion import unfolded_size
from schema_tools._pointer import pointer
from schema_tools._policy import DEFAULT_POLICY, SchemaPolicy
from schema_tools._schema_walk import SchemaWalk, enum_violation

__all__ = ["check_schema"]

_GATES = frozenset({"not-json", "max-depth", "max-nodes", "max-bytes"})
_MAX_INT_BITS = 13_000  # about 4 000 digits, under Python's int-to-str conversion limit


def check_schema(schema: object, *, policy: SchemaPolicy = DEFAULT_POLICY) -> None:
    """Refuse `schema` unless it is safe to use as a form or tool schema under `policy`.

    Rules (the ``rule`` of each `PolicyViolation`):

    - ``root-type``: the root is not a JSON object; ``root-object``: the policy requires
      ``"type": "object"`` at the root (`STRICT_TOOL_POLICY` does).
    - ``not-json`` (non-string keys, NaN, other Python objects), ``max-bytes``, ``max-depth``,
      ``max-nodes``, ``max-string-length`` (any string or key), ``max-enum``, ``max-pattern-length``.
    - ``metaschema``: invalid under the Draft 2020-12 meta-schema.
    - ``unknown-keyword``: not a 2020-12 keyword (core, applicator, unevaluated, validation, meta-data,
      format-annotation, content); ``x-`` keys are allowed and their strings are checked as text.
    - ``markup``: HTML tags, event handlers or script URLs in ``title``, ``description``, ``$comment``,
      property names, strings inside ``enum``/``const``/``default``/``examples`` and ``x-`` values.
    - ``pattern-invalid`` / ``pattern-redos``: a ``pattern`` or ``patternProperties`` key does not compile
      with Python ``re`` or looks catastrophic (heuristic, see ``schema_tools/_regex.py``).
    - ``ref-remote`` (a ``$ref`` not starting with ``#``), ``ref-unresolvable`` (no such local schema),
      ``ref-loop`` (a cycle of ``$ref`` and in-place applicators that never consumes the instance),
      ``dynamic-ref`` (``$dynamicRef`` is refused), ``id`` (``$id`` only at the root and only as a
      ``urn:``), ``schema-dialect`` (``$schema`` only at the root and only the 2020-12 URI),
      ``vocabulary`` (``$vocabulary`` belongs in meta-schemas).
    - ``max-expansion``: more than ``max_expansion`` JSON values once every ``$ref`` is replaced by the
      schema it names (a reference inside a recursion counts once); the pointer is the smallest schema
      found over the limit.

    Nothing is ever fetched.

    Args:
        schema: Parsed JSON, usually a dict.
        policy: Limits; `DEFAULT_POLICY` for server-registered schemas, `STRICT_TOOL_POLICY` for
            schemas from clients.

    Raises:
        SchemaPolicyError: With every violation found; the only exception raised for any JSON input.
    """
    try:
        violations = _violations(schema, policy)
    except RecursionError:
        violations = [PolicyViolation("", "max-depth", "the schema nests too deeply to check")]
    if violations:
        raise SchemaPolicyError(violations)


def _violations(schema: object, policy: SchemaPolicy) -> list[PolicyViolation]:
    if not isinstance(schema, dict):
        return [PolicyViolation("", "root-type", f"the root must be a JSON object, not {type(schema).__name__}")]
    found = _limits(schema, policy)
    if any(violation.rule in _GATES for violation in found):
        return found
    if policy.require_object_root and schema.get("type") != "object":
        found.append(PolicyViolation("", "root-object", 'the root must declare "type": "object"'))
    found += SchemaWalk(schema, policy).run()
    unfolded = unfolded_size(schema, policy.max_expansion)
    if unfolded.where is not None and not any(violation.rule == "max-enum" for violation in found):  # counted once
        message = f"more than {policy.max_expansion} JSON values once its references are expanded"
        found.append(PolicyViolation(unfolded.where, "max-expansion", message))
    return list(dict.fromkeys(found))


def _limits(schema: dict[str, Any], policy: SchemaPolicy) -> list[PolicyViolation]:
    found: list[PolicyViolation] = []
    stack: list[tuple[object, tuple[str | int, ...]]] = [(schema, ())]
    for count in range(1, policy.max_nodes + 2):
        if not stack:
            return found + _size(schema, policy)
        if count > policy.max_nodes:
            return [*found, PolicyViolation("", "max-nodes", f"more than {policy.max_nodes} JSON values")]
        value, path = stack.pop()
        problem = _node_problem(value, path, policy)
        if problem is not None:
            found.append(problem)
            if problem.rule in _GATES:
                return found
        if problem is not None and problem.rule == "max-enum":
            continue
        children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
        stack.extend((child, (*path, key)) for key, child in children)
    return found  # pragma: no cover - the loop returns


def _node_problem(value: object, path: tuple[str | int, ...], policy: SchemaPolicy) -> PolicyViolation | None:
    where = pointer(path)
    if isinstance(value, dict | list):
        if len(path) + 1 > policy.max_depth:
            return PolicyViolation(where, "max-depth", f"nested deeper than {policy.max_depth} levels")
        if path and path[-1] == "enum" and len(value) > policy.max_enum:
            return enum_violation(where, len(value), policy)
        return _key_problem(value, path, policy) if isinstance(value, dict) else None
    if isinstance(value, str):
        if len(value) > policy.max_string_length:
            return PolicyViolation(where, "max-string-length", f"longer than {policy.max_string_length} characters")
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return PolicyViolation(where, "not-json", f"{value} is not a JSON number")
    if isinstance(value, int) and value.bit_length() > _MAX_INT_BITS:
        return PolicyViolation(where, "not-json", "integer too large to write as JSON")
    if value is None or isinstance(value, bool | int | float):
        return None
    return PolicyViolation(where, "not-json", f"{type(value).__name__} is not a JSON value")


def _key_problem(value: dict[Any, Any], path: tuple[str | int, ...], policy: SchemaPolicy) -> PolicyViolation | None:
    for key in value:
        if not isinstance(key, str):
            return PolicyViolation(pointer(path), "not-json", "object keys must be strings")
        if len(key) > policy.max_string_length:
            return PolicyViolation(pointer((*path, key)), "max-string-length", "key too long")
    return None


def _size(schema: dict[str, Any], policy: SchemaPolicy) -> list[PolicyViolation]:
    if policy.max_bytes is None:
        return []
    text = json.dumps(schema, ensure_ascii=False, separators=(",", ":"))
    size = len(text.encode("utf-8", "surrogatepass"))
    if size <= policy.max_bytes:
        return []
    return [PolicyViolation("", "max-bytes", f"{size} bytes as JSON, more than {policy.max_bytes}")]
