"""Validate instances against Draft 2020-12 schemas, reporting JSON pointers, in a bounded number of steps.

Compiled validators are cached by schema *content*: the key is the canonical JSON text of the schema
(``json.dumps(schema, sort_keys=True, separators=(",", ":"))``), in an LRU cache bounded in entries
(`_CACHE_ENTRIES`) and in bytes (`CACHE_BYTES`, each validator counted at `_BYTES_PER_CHAR` per character of
its key). Two equal schemas share one validator, and mutating a schema after a call is safe because the
next call computes a new key.

Every validation runs under a step budget (`schema_tools._steps`): each schema evaluation spends one step
plus one per keyword and per entry of a keyword's list or map, each regex compiled or matched spends by its
size, and ``uniqueItems`` spends one step per value it hashes. A schema of 2^n schemas once its references
are expanded, or a recursion that evaluates the same value many times, meets the budget, not the clock.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from typing import Any, Final

import referencing
import referencing.exceptions
from jsonschema import Draft202012Validator, ValidationError
from jsonschema.exceptions import relevance
from jsonschema.protocols import Validator
from jsonschema.validators import create

from schema_tools._errors import PolicyViolation, SchemaIssue, SchemaPolicyError, SchemaValidationError
from schema_tools._formats import FORMAT_CHECKER
from schema_tools._keywords import SCHEMA_LISTS, SCHEMA_MAPS, SCHEMA_SINGLE
from schema_tools._lru import CostCache
from schema_tools._meta import SHALLOW_META_VALIDATOR
from schema_tools._pattern_keywords import PATTERN_KEYWORDS
from schema_tools._pointer import pointer
from schema_tools._steps import OverBudget, StepBudget, metered, spend

__all__ = [
    "CACHE_BYTES",
    "INLINE_STEPS",
    "INLINE_WEIGHT",
    "MAX_STEPS",
    "META_VALIDATOR",
    "OVER_BUDGET",
    "assert_valid",
    "avalidate",
    "canonical_json",
    "checked",
    "compiled",
    "validate",
]

_CACHE_ENTRIES: Final = 512
CACHE_BYTES: Final = 32 << 20
"""The most the cached validators may hold, each counted at `_BYTES_PER_CHAR` per character of its schema."""
_BYTES_PER_CHAR: Final = 8  # a parsed schema and its validator hold several times the schema's JSON text
MAX_STEPS: Final = 1_000_000
"""The steps one `validate` call may take by default: a step is about 2 microseconds of work."""
INLINE_STEPS: Final = 10_000
"""The steps `avalidate` takes on the calling thread (the event loop) before it goes on on a worker thread."""
INLINE_WEIGHT: Final = 2_000
"""`avalidate` validates an instance of at most this many JSON values on the calling thread; a string
weighs one value per `_CHARS_PER_VALUE` characters."""
_CHARS_PER_VALUE = 256
OVER_BUDGET: Final = "max-steps"
"""The keyword of the one issue `validate` returns for an instance it could not check within its step budget."""
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


def _unique_items(validator: Validator, unique: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    """Draft 2020-12 ``uniqueItems`` in linear time: jsonschema compares unhashable items pairwise."""
    if unique and validator.is_type(instance, "array") and not _distinct(instance):
        yield ValidationError(f"{instance!r} has non-unique elements")


def _distinct(items: list[Any]) -> bool:
    counted = [0]
    keys = {_key(item, counted) for item in items}
    spend(1 + counted[0])
    return len(keys) == len(items)


def _key(value: Any, counted: list[int]) -> Hashable:
    """A hashable form of a JSON value; equal under JSON Schema (``1 == 1.0``, ``true != 1``) when keys are."""
    counted[0] += 1
    if isinstance(value, bool) or value is None:
        return ("literal", value)
    if isinstance(value, int | float):
        return ("number", value)
    if isinstance(value, list):
        return ("array", tuple(_key(item, counted) for item in value))
    if isinstance(value, dict):
        return ("object", frozenset((name, _key(item, counted)) for name, item in value.items()))
    return ("string", value)


def _applicable(schema: Mapping[str, Any]) -> Iterable[tuple[str, Any]]:
    """The keywords of one schema evaluation, after spending its steps: jsonschema asks once per evaluation."""
    spend(_weight(schema))
    return schema.items()


def _weight(schema: Mapping[str, Any] | bool) -> int:
    """The steps one evaluation of `schema` spends: one, and one per keyword and per entry of a list or map."""
    if isinstance(schema, bool):
        return 1
    return 1 + sum(1 + len(value) if isinstance(value, list | dict) else 1 for value in schema.values())


def _counting(keywords: Mapping[str, Callable[..., Any]]) -> Any:
    """A Draft 2020-12 validator class with `keywords`, whose every schema evaluation spends steps."""
    base = Draft202012Validator
    build: Any = create  # its stubs type `id_of` and `applicable_validators` narrower than Draft 2020-12's own
    return build(
        meta_schema=base.META_SCHEMA,
        validators=keywords,
        type_checker=base.TYPE_CHECKER,
        format_checker=base.FORMAT_CHECKER,
        id_of=base.ID_OF,
        applicable_validators=_applicable,
    )


_Validator = _counting(
    {**Draft202012Validator.VALIDATORS, "required": _required, "uniqueItems": _unique_items, **PATTERN_KEYWORDS}
)
_CACHE: CostCache[str, Validator] = CostCache(_CACHE_ENTRIES, CACHE_BYTES)


def canonical_json(schema: Any) -> str:
    """Return the canonical JSON text of `schema` (sorted keys, no whitespace).

    Raises:
        TypeError: If `schema` is not JSON data.
    """
    return json.dumps(schema, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _compile(canonical: str) -> Validator:
    found = _CACHE.get(canonical)
    if found is not None:
        return found
    schema = json.loads(canonical)
    problems = _meta_problems(schema)
    if problems:
        raise SchemaPolicyError(problems)
    validator: Validator = _Validator(schema, format_checker=FORMAT_CHECKER, registry=_NO_REMOTE)
    _CACHE.put(canonical, validator, len(canonical) * _BYTES_PER_CHAR)
    return validator


def _meta_problems(schema: Any) -> list[PolicyViolation]:
    """The schema's violations of the Draft 2020-12 meta-schema, checked node by node (`schema_tools._meta`).

    The official meta-schema resolves a ``$dynamicRef`` per subschema, about a millisecond each, which no
    step counts; the shallow check of each node is the same check, in steps in proportion to the schema.
    """
    found: list[PolicyViolation] = []
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(schema, ())]
    while stack:
        node, path = stack.pop()
        if not isinstance(node, dict):
            continue
        spend(_weight(node))
        found += [
            PolicyViolation(pointer((*path, *error.absolute_path)), "metaschema", error.message)
            for error in SHALLOW_META_VALIDATOR.iter_errors(node)
        ]
        for key, value in node.items():
            if key in SCHEMA_SINGLE:
                stack.append((value, (*path, key)))
            elif key in SCHEMA_LISTS and isinstance(value, list):
                stack += [(sub, (*path, key, number)) for number, sub in enumerate(value)]
            elif key in SCHEMA_MAPS and isinstance(value, dict):
                stack += [(sub, (*path, key, name)) for name, sub in value.items()]
    return found


def compiled(schema: Mapping[str, Any] | bool) -> Validator:
    """Return the cached validator for `schema` (see the module docstring for the cache key).

    Raises:
        SchemaPolicyError: If `schema` is not a valid Draft 2020-12 schema (rule ``"metaschema"``).
    """
    return _compile(canonical_json(schema))


def validate(instance: Any, schema: Mapping[str, Any] | bool, *, max_steps: int = MAX_STEPS) -> list[SchemaIssue]:
    """Validate `instance` against a Draft 2020-12 `schema` and return every issue.

    The schema is always read as Draft 2020-12 (``$schema`` is not consulted). It is compiled once and
    cached by content: the key is its canonical JSON text (sorted keys, no whitespace), in an LRU cache of
    at most 512 validators and `CACHE_BYTES`, so equal schemas share a validator and mutating a schema is safe.

    Formats ``email``, ``date``, ``date-time`` and ``uri`` are checked. Issues come most relevant first
    (``jsonschema.exceptions.relevance``). A ``required`` issue points at the missing property
    (``"/approved"``), not at the object that lacks it. A failed ``oneOf``/``anyOf`` is reported through
    the errors of its closest branch when one stands out (branches failing on ``type`` at that spot or
    on ``const``/``enum`` are skipped; the one with fewest errors wins), else as itself. Nothing is fetched:
    a ``$ref`` that is not in the schema is a `SchemaPolicyError`.

    The check takes at most `max_steps` steps (see the module docstring), compiling the schema included.
    An instance it cannot check within them gets one issue, at the root, whose keyword is ``"max-steps"``
    (`OVER_BUDGET`): it is refused, whether or not it would have been valid.

    Args:
        instance: Parsed JSON data.
        schema: A Draft 2020-12 schema.
        max_steps: The step budget of this call.

    Returns:
        The issues, empty when `instance` is valid.

    Raises:
        SchemaPolicyError: If the schema is invalid, has an unresolvable ``$ref`` or a ``$ref`` loop. Run
            `check_schema` once when a schema is registered to catch these (and more) early.
    """
    return checked(instance, schema, StepBudget(max_steps))


def checked(instance: Any, schema: Mapping[str, Any] | bool, budget: StepBudget) -> list[SchemaIssue]:
    """`validate` within `budget`, whose `used` then tells how many steps the check took."""
    try:
        with metered(budget):
            validator = compiled(schema)
            spend(_weight(schema))  # the root's evaluation: the cached validator's keywords are listed already
            errors = sorted(validator.iter_errors(instance), key=relevance, reverse=True)
    except OverBudget:
        return [
            SchemaIssue("", OVER_BUDGET, f"checking this value against its schema takes more than {budget.limit} steps")
        ]
    except referencing.exceptions.Unresolvable as exc:
        raise SchemaPolicyError([PolicyViolation("", "ref-unresolvable", str(exc))]) from exc
    except RecursionError as exc:
        raise SchemaPolicyError([PolicyViolation("", "ref-loop", "evaluation does not terminate")]) from exc
    return [_issue(leaf) for error in errors for leaf in _expand(error)]


async def avalidate(
    instance: Any, schema: Mapping[str, Any] | bool, *, max_steps: int = MAX_STEPS
) -> list[SchemaIssue]:
    """`validate`, on a worker thread unless it is small and quick, so that an event loop keeps serving.

    Small instances (at most `INLINE_WEIGHT` JSON values, long strings counted by length) are validated
    inline, within `INLINE_STEPS`: a thread hop costs more than they do. The size is measured by a walk that
    stops at the limit. A large instance, or a small one that needs more steps (a costly schema), is
    validated on a worker thread within `max_steps`.

    Raises:
        SchemaPolicyError: As `validate`.
    """
    if _weighs_at_most(instance, INLINE_WEIGHT):
        issues = validate(instance, schema, max_steps=min(INLINE_STEPS, max_steps))
        if max_steps <= INLINE_STEPS or not _over_budget(issues):
            return issues
    return await asyncio.to_thread(validate, instance, schema, max_steps=max_steps)


def _over_budget(issues: list[SchemaIssue]) -> bool:
    return len(issues) == 1 and issues[0].keyword == OVER_BUDGET


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
