"""The jsonschema keywords that match regexes, rewritten to match them with RE2 (see `schema_tools._re2`).

jsonschema calls Python's ``re.search`` for ``pattern``, for ``patternProperties``, and again inside
``additionalProperties`` and ``unevaluatedProperties`` (which must know which properties a pattern
covers). Each of the four is replaced here; everything else stays jsonschema's own. Messages are
jsonschema's. A pattern RE2 cannot compile makes `validate` raise `SchemaPolicyError`
(``pattern-invalid``); `check_schema` reports it earlier, with its pointer.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Protocol

from jsonschema import ValidationError

from schema_tools._errors import PolicyViolation, SchemaPolicyError
from schema_tools._re2 import RegexUnsupported, search

__all__ = ["PATTERN_KEYWORDS"]

_IN_PLACE = ("allOf", "oneOf", "anyOf")


class Validator(Protocol):
    """What the keywords use of a jsonschema validator (the stubs' protocol lacks `descend`)."""

    _resolver: Any

    def is_type(self, instance: Any, type: str) -> bool: ...

    def is_valid(self, instance: Any) -> bool: ...

    def evolve(self, **changes: Any) -> Validator: ...

    def descend(
        self, instance: Any, schema: Any, path: str | int | None = None, schema_path: str | int | None = None
    ) -> Iterator[ValidationError]: ...


def _matches(pattern: str, text: str) -> bool:
    try:
        return search(pattern, text)
    except RegexUnsupported as exc:
        raise SchemaPolicyError([PolicyViolation("", "pattern-invalid", f"{pattern!r}: {exc}")]) from None


def _pattern(validator: Validator, pattern: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not _matches(pattern, instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator: Validator, patterns: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for name, value in instance.items():
            if _matches(pattern, name):
                yield from validator.descend(value, subschema, path=name, schema_path=pattern)


def _additional(instance: Mapping[str, Any], schema: Mapping[str, Any]) -> list[str]:
    properties = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    return [
        name for name in instance if name not in properties and not any(_matches(pattern, name) for pattern in patterns)
    ]


def _additional_properties(validator: Validator, extra: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    extras = _additional(instance, schema)
    if validator.is_type(extra, "object"):
        for name in extras:
            yield from validator.descend(instance[name], extra, path=name)
    elif not extra and extras:
        joined = ", ".join(repr(name) for name in sorted(extras))
        if "patternProperties" in schema:
            verb = "does" if len(extras) == 1 else "do"
            patterns = ", ".join(repr(pattern) for pattern in sorted(schema["patternProperties"]))
            yield ValidationError(f"{joined} {verb} not match any of the regexes: {patterns}")
        else:
            verb = "was" if len(extras) == 1 else "were"
            yield ValidationError(f"Additional properties are not allowed ({joined} {verb} unexpected)")


def _unevaluated_properties(validator: Validator, rest: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    evaluated = _evaluated(validator, instance, schema)
    failed = [name for name in instance if name not in evaluated and not _valid(validator, instance[name], rest)]
    if not failed:
        return
    verb = "was" if len(failed) == 1 else "were"
    if rest is False:
        names = ", ".join(repr(name) for name in sorted(failed, key=str))
        yield ValidationError(f"Unevaluated properties are not allowed ({names} {verb} unexpected)")
    else:
        names = ", ".join(repr(name) for name in failed)
        yield ValidationError(
            f"Unevaluated properties are not valid under the given schema ({names} {verb} unevaluated and invalid)"
        )


def _evaluated(validator: Validator, instance: Mapping[str, Any], schema: Any) -> set[str]:
    """The properties some keyword of `schema` evaluates, as jsonschema's own search finds them."""
    if validator.is_type(schema, "boolean"):
        return set()
    found = _referenced(validator, instance, schema)
    found |= set(schema.get("properties", {})) & set(instance)
    for keyword in ("additionalProperties", "unevaluatedProperties"):
        if keyword in schema:
            found |= {name for name, value in instance.items() if _valid(validator, value, schema[keyword])}
    for pattern in schema.get("patternProperties", {}):
        found |= {name for name in instance if _matches(pattern, name)}
    for name, subschema in schema.get("dependentSchemas", {}).items():
        if name in instance:
            found |= _evaluated(validator, instance, subschema)
    for keyword in _IN_PLACE:
        for subschema in schema.get(keyword, []):
            if _valid(validator, instance, subschema):
                found |= _evaluated(validator, instance, subschema)
    return found | _conditional(validator, instance, schema)


def _valid(validator: Validator, instance: Any, schema: Any) -> bool:
    return next(iter(validator.descend(instance, schema)), None) is None


def _referenced(validator: Validator, instance: Mapping[str, Any], schema: Mapping[str, Any]) -> set[str]:
    found: set[str] = set()
    for keyword in ("$ref", "$dynamicRef"):
        if keyword in schema:
            resolved = validator._resolver.lookup(schema[keyword])  # private, as in jsonschema's own search
            inner = validator.evolve(schema=resolved.contents, _resolver=resolved.resolver)
            found |= _evaluated(inner, instance, resolved.contents)
    return found


def _conditional(validator: Validator, instance: Mapping[str, Any], schema: Mapping[str, Any]) -> set[str]:
    if "if" not in schema:
        return set()
    if validator.evolve(schema=schema["if"]).is_valid(instance):
        found = _evaluated(validator, instance, schema["if"])
        return found | (_evaluated(validator, instance, schema["then"]) if "then" in schema else set())
    return _evaluated(validator, instance, schema["else"]) if "else" in schema else set()


PATTERN_KEYWORDS = {
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "additionalProperties": _additional_properties,
    "unevaluatedProperties": _unevaluated_properties,
}
"""Keyword functions for `jsonschema.validators.extend`."""
