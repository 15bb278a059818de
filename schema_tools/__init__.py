"""JSON Schema utilities: safety checks, validation with JSON pointers, schemas from Python signatures.

Nothing here knows about AG-UI. See ``schema_tools/README.md``.

`check_schema`, `validate`, `avalidate` and `assert_valid` are imported on first use: they bring `jsonschema` (with
`referencing`, `rpds`, `attrs`) and `re2`, which a process that never checks a schema need not hold in memory. So
are the schemas from Python signatures and the forms' values, which a process that reads neither need not hold.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from schema_tools._errors import (
    PolicyViolation,
    SchemaIssue,
    SchemaPolicyError,
    SchemaToolsError,
    SchemaValidationError,
)
from schema_tools._policy import DEFAULT_POLICY, STRICT_TOOL_POLICY, SchemaPolicy
from schema_tools._views import form_picker_spec, strict_schema, tool_spec

if TYPE_CHECKING:
    from schema_tools._check import check_schema
    from schema_tools._forms import apply_defaults, coerce_form_values
    from schema_tools._signature import CallableSignature, Injected, schema_from_callable, schema_from_model
    from schema_tools._validate import assert_valid, avalidate, validate

_LAZY = {
    "check_schema": "schema_tools._check",
    "validate": "schema_tools._validate",
    "avalidate": "schema_tools._validate",
    "assert_valid": "schema_tools._validate",
    "CallableSignature": "schema_tools._signature",
    "Injected": "schema_tools._signature",
    "schema_from_callable": "schema_tools._signature",
    "schema_from_model": "schema_tools._signature",
    "apply_defaults": "schema_tools._forms",
    "coerce_form_values": "schema_tools._forms",
}
"""The names imported on first use, by the module that defines them."""

__all__ = [
    "CallableSignature",
    "DEFAULT_POLICY",
    "Injected",
    "PolicyViolation",
    "STRICT_TOOL_POLICY",
    "SchemaIssue",
    "SchemaPolicy",
    "SchemaPolicyError",
    "SchemaToolsError",
    "SchemaValidationError",
    "apply_defaults",
    "assert_valid",
    "avalidate",
    "check_schema",
    "coerce_form_values",
    "form_picker_spec",
    "schema_from_callable",
    "schema_from_model",
    "strict_schema",
    "tool_spec",
    "validate",
]


def __getattr__(name: str) -> Any:
    """Import a deferred name the first time it is named, then keep it as this package's attribute."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
