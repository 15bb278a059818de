"""JSON Schema utilities: safety checks, validation with JSON pointers, schemas from Python signatures.

Nothing here knows about AG-UI. See ``schema_tools/README.md``.
"""

from __future__ import annotations

from schema_tools._check import check_schema
from schema_tools._errors import (
    PolicyViolation,
    SchemaIssue,
    SchemaPolicyError,
    SchemaToolsError,
    SchemaValidationError,
)
from schema_tools._forms import apply_defaults, coerce_form_values
from schema_tools._policy import DEFAULT_POLICY, STRICT_TOOL_POLICY, SchemaPolicy
from schema_tools._signature import CallableSignature, Injected, schema_from_callable, schema_from_model
from schema_tools._validate import assert_valid, avalidate, validate
from schema_tools._views import form_picker_spec, strict_schema, tool_spec

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
