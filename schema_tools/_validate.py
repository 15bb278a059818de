"""Validate instances against Draft 2020-12 schemas, reporting JSON pointers.

Compiled validators are cached by schema *content*: the key is the canonical JSON text of the schema
(``json.dumps(schema, sort_keys=True, separators=(",", ":"))``), held in an LRU cache of
`_CACHE_SIZE` entries. Two equal schemas share one validator, and mutating a schema after a call is
safe because the next call computes a new key.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Iterator, Mapping
from typing import Any

import referencing
import referencing.exceptions
from jsonschema import Draft202012Validator, ValidationError
from jsonschema.exceptions import relevance
from jsonschema.protocols import Validator
from jsonschema.validators import extend

from schema_tools._errors import PolicyViolation, SchemaIssue, SchemaPolicyError, SchemaValidationError
from schema_tools._formats import FORMAT_CHECKER
from schema_tools._pattern_keywords import PATTERN_KEYWORDS
from schema_tools._pointer import pointer

__all__ = ["META_VALIDATOR", "assert_valid", "avalidate", "canonical_json", "compiled", "validate"]

_CACHE_SIZE = 512
INLINE_WEIGHT = 2_000
"""`avalidate` validates an instance of at most this many JSON values on the calling thread; a string
weighs one value per `_CHARS_PER_VALUE` characters."""
_CHARS_PER_VALUE = 256
_NO_REMOTE: referencing.Registry[Any] = referencing.Registry()  # no retrieve function: nothing is fetched
META_VALIDATOR = Draft202012Validator(Draft202012Validator.META_SCHEMA)
"""Validates schemas against the Draft 2020-12 meta-schema."""


def _required(validator: Validator, required: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    """Like Draft 2020-12 ``required``, but the error's path names the missing property."""
    if not validator.is_type(instance, "object"):
        return
    for name in required:
        if name not in instance:
            yield ValidationError(f"{name!r} is a required property", path=[name])


_Validator = extend(Draft202012Validator, {"required": _required, **PATTERN_KEYWORDS})  # type: ignore[no-untyped-call]  # untyped in stubs


def canonical_json(schema: Any) -> str:
    """Return the canonical JSON text of `schema` (sorted keys, no whitespace).

    Raises:
        TypeError: If `schema` is not JSON data.
    """
    return json.dumps(schema, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _compile(canonical: str) -> Validator:
    schema = json.loads(canonical)
    problems = list(META_VALIDATOR.iter_errors(schema))
    if problems:
        raise SchemaPolicyError([PolicyViolation(pointer(e.absolute_path), "metaschema", e.message) for e in problems])
    validator: Validator = _Validator(schema, format_checker=FORMAT_CHECKER, registry=_NO_REMOTE)
    return validator


def compiled(schema: Mapping[str, Any] | bool) -> Validator:
    """Return the cached validator for `schema` (see the module docstring for the cache key).

    Raises:
        SchemaPolicyError: If `schema` is not a valid Draft 2020-12 schema (rule ``"metaschema"``).
    """
    return _compile(canonical_json(schema))


def validate(instance: Any, schema: Mapping[str, Any] | bool) -> list[SchemaIssue]:
    """Validate `instance` against a Draft 2020-12 `schema` and return every issue.

    The schema is always read as Draft 2020-12 (``$schema`` is not consulted). It is compiled once and
    cached by content: the key is its canonical JSON text (sorted keys, no whitespace), in an LRU cache of
    512 validators, so equal schemas share a validator and mutating a schema is safe.

    Formats ``email``, ``date``, ``date-time`` and ``uri`` are checked. Issues come most relevant first
    (``jsonschema.exceptions.relevance``). A ``required`` issue points at the missing property
    (``"/approved"``), not at the object that lacks it. A failed ``oneOf``/``anyOf`` is reported through
    the errors of its closest branch when one stands out (branches failing on ``type`` at that spot or
    on ``const``/``enum`` are skipped; the one with fewest errors wins), else as itself. Nothing is fetched:
    a ``$ref`` that is not in the schema is a `SchemaPolicyError`.

    Args:
        instance: Parsed JSON data.
        schema: A Draft 2020-12 schema.

    Returns:
        The issues, empty when `instance` is valid.

    Raises:
        SchemaPolicyError: If the schema is invalid, has an unresolvable ``$ref`` or a ``$ref`` loop. Run
            `check_schema` once when a schema is registered to catch these (and more) early.
    """
    validator = compiled(schema)
    try:
        errors = sorted(validator.iter_errors(instance), key=relevance, reverse=True)
    except referencing.exceptions.Unresolvable as exc:
        raise SchemaPolicyError([PolicyViolation("", "ref-unresolvable", str(exc))]) from exc
    except RecursionError as exc:
        raise SchemaPolicyError([PolicyViolation("", "ref-loop", "evaluation does not terminate")]) from exc
    return [_issue(leaf) for error in errors for leaf in _expand(error)]


async def avalidate(instance: Any, schema: Mapping[str, Any] | bool) -> list[SchemaIssue]:
    """`validate`, on a worker thread when `instance` is large, so that an event loop keeps serving.

    Small instances (at most `INLINE_WEIGHT` JSON values, long strings counted by length) are validated
    inline: a thread hop costs more than they do. The size is measured by a walk that stops at the limit.

    Raises:
        SchemaPolicyError: As `validate`.
    """
    if _weighs_at_most(instance, INLINE_WEIGHT):
        return validate(instance, schema)
    return await asyncio.to_thread(validate, instance, schema)


def _weighs_at_most(instance: Any, limit: int) -> bool:
    stack, weight = [instance], 0
    while stack:
        value = stack.pop()
        weight += 1 + (len(value) // _CHARS_PER_VALUE if isinstance(value, str) else 0)
        if weight > limit:
            return False
        if isinstance(value, dict):
            stack += value.keys()
            stack += value.values()
        elif isinstance(value, list):
            stack += value
    return True


def assert_valid(instance: Any, schema: Mapping[str, Any] | bool) -> None:
    """Raise unless `instance` is valid under `schema`; see `validate`.

    Raises:
        SchemaValidationError: With every issue in `issues`.
        SchemaPolicyError: If the schema is invalid or has an unresolvable ``$ref``.
    """
    issues = validate(instance, schema)
    if issues:
        raise SchemaValidationError(issues)


def _expand(error: ValidationError) -> list[ValidationError]:
    """Replace a failed ``anyOf``/``oneOf`` by the errors of its closest branch, when one stands out.

    A branch whose errors include a ``type`` error at the combinator's own instance, or a ``const``/``enum``
    error, is taken as "not meant" (a discriminator mismatch). Among the other branches the one with the
    fewest errors is the closest; on a tie the combinator's own error is kept.
    """
    if error.validator not in ("anyOf", "oneOf") or not error.context:
        return [error]
    branches: dict[Any, list[ValidationError]] = {}
    for sub in error.context:
        branches.setdefault(sub.relative_schema_path[0], []).append(sub)
    meant = sorted((subs for subs in branches.values() if not _mismatch(error, subs)), key=len)
    if not meant or (len(meant) > 1 and len(meant[0]) == len(meant[1])):
        return [error]
    return [leaf for sub in sorted(meant[0], key=relevance, reverse=True) for leaf in _expand(sub)]


def _mismatch(parent: ValidationError, errors: list[ValidationError]) -> bool:
    depth = len(parent.absolute_path)
    return any(
        sub.validator in ("const", "enum") or (sub.validator == "type" and len(sub.absolute_path) == depth)
        for sub in errors
    )


def _issue(error: ValidationError) -> SchemaIssue:
    keyword = "false" if error.validator is None else str(error.validator)
    return SchemaIssue(pointer(error.absolute_path), keyword, error.message)
