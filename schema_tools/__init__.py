"""JSON Schema utilities: safety checks, validation with JSON pointers, schemas from Python signatures.

Nothing here knows about AG-UI. See ``schema_tools/README.md``.
"""

from __future__ import annotations

from schema_tools._errors import (
    PolicyViolation,
    SchemaIssue,
    SchemaPolicyError,
    SchemaToolsError,
    SchemaValidationError,
)
from schema_tools._signature import CallableSignature, Injected, schema_from_callable, schema_from_model
from schema_tools._validate import assert_valid, validate
from schema_tools._views import form_picker_spec, strict_schema, tool_spec

__all__ = [
    "CallableSignature",
    "Injected",
    "PolicyViolation",
    "SchemaIssue",
    "SchemaPolicyError",
    "SchemaToolsError",
    "SchemaValidationError",
    "assert_valid",
    "form_picker_spec",
    "schema_from_callable",
    "schema_from_model",
    "strict_schema",
    "tool_spec",
    "validate",
]
