from __future__ import annotations

import schema_tools


def test_public_names_are_pinned() -> None:
    assert schema_tools.__all__ == [
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


def test_public_names_are_sorted_and_exist() -> None:
    assert schema_tools.__all__ == sorted(schema_tools.__all__)
    for name in schema_tools.__all__:
        assert getattr(schema_tools, name) is not None
