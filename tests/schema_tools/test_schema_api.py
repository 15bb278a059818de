from __future__ import annotations

import schema_tools


def test_public_names_are_pinned() -> None:
    assert schema_tools.__all__ == [
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


def test_every_public_name_exists() -> None:
    for name in schema_tools.__all__:
        assert getattr(schema_tools, name) is not None
