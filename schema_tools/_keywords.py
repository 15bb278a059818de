"""The Draft 2020-12 keywords, grouped by what their values are."""

from __future__ import annotations

__all__ = [
    "ANNOTATION_TEXT",
    "DATA_VALUES",
    "IN_PLACE_LISTS",
    "IN_PLACE_MAPS",
    "IN_PLACE_SINGLE",
    "KNOWN",
    "SCHEMA_LISTS",
    "SCHEMA_MAPS",
    "SCHEMA_SINGLE",
]

SCHEMA_MAPS = frozenset({"$defs", "properties", "patternProperties", "dependentSchemas"})
"""Keywords whose value maps names to subschemas."""

SCHEMA_LISTS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
"""Keywords whose value is a list of subschemas."""

SCHEMA_SINGLE = frozenset(
    {
        "items", "contains", "additionalProperties", "propertyNames", "if", "then", "else", "not",
        "unevaluatedItems", "unevaluatedProperties", "contentSchema",
    }
)  # fmt: skip
"""Keywords whose value is one subschema."""

IN_PLACE_MAPS = frozenset({"dependentSchemas"})
IN_PLACE_LISTS = frozenset({"allOf", "anyOf", "oneOf"})
IN_PLACE_SINGLE = frozenset({"if", "then", "else", "not"})
"""Applicators whose subschemas apply to the same instance (no descent into the data)."""

ANNOTATION_TEXT = frozenset({"title", "description", "$comment"})
"""Keywords whose value is text a front end may show."""

DATA_VALUES = frozenset({"enum", "const", "default", "examples"})
"""Keywords whose value is instance data (its strings may be shown as labels or prefilled values)."""

_CORE = frozenset({"$schema", "$id", "$ref", "$anchor", "$dynamicRef", "$dynamicAnchor", "$vocabulary"})
_VALIDATION = frozenset(
    {
        "type", "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum", "maxLength",
        "minLength", "pattern", "maxItems", "minItems", "uniqueItems", "maxContains", "minContains",
        "maxProperties", "minProperties", "required", "dependentRequired",
    }
)  # fmt: skip
_META_DATA = frozenset({"deprecated", "readOnly", "writeOnly"})
_FORMAT_AND_CONTENT = frozenset({"format", "contentEncoding", "contentMediaType"})

KNOWN = (
    _CORE | _VALIDATION | _META_DATA | _FORMAT_AND_CONTENT | ANNOTATION_TEXT | DATA_VALUES
    | SCHEMA_MAPS | SCHEMA_LISTS | SCHEMA_SINGLE
)  # fmt: skip
"""Every keyword of the core, applicator, unevaluated, validation, meta-data, format and content vocabularies."""
