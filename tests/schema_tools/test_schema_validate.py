from __future__ import annotations

from typing import Any

import pytest

from schema_tools import SchemaIssue, SchemaPolicyError, SchemaValidationError, assert_valid, validate
from schema_tools._validate import compiled  # private on purpose: the compiled-validator cache

ORDER = {
    "type": "object",
    "properties": {
        "customer": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "email": {"type": "string", "format": "email"}},
            "required": ["name", "email"],
        },
        "items": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"sku": {"type": "string"}, "qty": {"type": "integer", "minimum": 1}},
                "required": ["sku", "qty"],
            },
        },
        "payment": {
            "oneOf": [
                {
                    "type": "object",
                    "properties": {"kind": {"const": "card"}, "number": {"type": "string", "pattern": "^[0-9]{16}$"}},
                    "required": ["kind", "number"],
                },
                {
                    "type": "object",
                    "properties": {"kind": {"const": "invoice"}, "due": {"type": "string", "format": "date"}},
                    "required": ["kind", "due"],
                },
            ]
        },
    },
    "required": ["customer", "items", "approved"],
}


def pointers(issues: list[SchemaIssue]) -> list[tuple[str, str]]:
    return [(issue.pointer, issue.keyword) for issue in issues]


def test_valid_instance_has_no_issues() -> None:
    instance = {
        "customer": {"name": "Ada", "email": "ada@example.com"},
        "items": [{"sku": "A-1", "qty": 2}],
        "payment": {"kind": "invoice", "due": "2025-01-31"},
        "approved": True,
    }

    assert validate(instance, ORDER) == []
    assert_valid(instance, ORDER)


def test_required_points_at_the_missing_property() -> None:
    issues = validate({"customer": {"name": "Ada", "email": "a@b.c"}, "items": []}, ORDER)

    assert issues == [SchemaIssue("/approved", "required", "'approved' is a required property")]


def test_nested_object_and_array_pointers() -> None:
    instance = {
        "customer": {"name": 7},
        "items": [{"sku": "A", "qty": 1}, {"sku": "B", "qty": 0}, {"qty": "2"}],
        "approved": True,
    }

    assert sorted(pointers(validate(instance, ORDER))) == [
        ("/customer/email", "required"),
        ("/customer/name", "type"),
        ("/items/1/qty", "minimum"),
        ("/items/2/qty", "type"),
        ("/items/2/sku", "required"),
    ]


@pytest.mark.parametrize(
    ("payment", "expected"),
    [
        pytest.param({"kind": "card", "number": "12"}, [("/payment/number", "pattern")], id="card-branch"),
        pytest.param({"kind": "invoice", "due": "31/01/2025"}, [("/payment/due", "format")], id="invoice-branch"),
        pytest.param("cash", [("/payment", "oneOf")], id="no-branch-stands-out"),
    ],
)
def test_one_of_reports_the_best_matching_branch(payment: Any, expected: list[tuple[str, str]]) -> None:
    instance = {"customer": {"name": "A", "email": "a@b.c"}, "items": [], "approved": True, "payment": payment}

    assert pointers(validate(instance, ORDER)) == expected


@pytest.mark.parametrize(
    ("fmt", "good", "bad"),
    [
        pytest.param("email", "user.name+tag@example.co.uk", "not-an-email", id="email"),
        pytest.param("email", "a@b", "a@@b", id="email-double-at"),
        pytest.param("date", "2024-02-29", "2023-02-29", id="date-leap"),
        pytest.param("date", "2024-12-31", "2024-1-31", id="date-shape"),
        pytest.param("date-time", "2024-05-01T10:20:30Z", "2024-05-01 10:20:30", id="date-time-space"),
        pytest.param("date-time", "2024-05-01T10:20:30.5+02:00", "2024-05-01T10:20:30", id="date-time-no-offset"),
        pytest.param("date-time", "1990-12-31T23:59:60Z", "2024-05-01T25:00:00Z", id="date-time-hour"),
        pytest.param("uri", "https://example.com/a?b=c#d", "/relative/path", id="uri-relative"),
        pytest.param("uri", "urn:isbn:0451450523", "http://exa mple.com", id="uri-space"),
        pytest.param("uri", "mailto:a@b.c", "http://x/%zz", id="uri-bad-percent"),
    ],
)
def test_formats_are_checked(fmt: str, good: str, bad: str) -> None:
    schema = {"type": "string", "format": fmt}

    assert validate(good, schema) == []
    assert pointers(validate(bad, schema)) == [("", "format")]


def test_unknown_formats_are_annotations() -> None:
    assert validate("anything", {"format": "x-custom"}) == []


def test_formats_ignore_other_types() -> None:
    assert validate(5, {"format": "email"}) == []


def test_issues_are_ordered_by_relevance() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {"type": "string"}}}}}

    issues = validate({"a": {"b": 1}}, {**schema, "minProperties": 2})

    assert pointers(issues) == [("", "minProperties"), ("/a/b", "type")]


def test_pointer_escapes_slash_and_tilde() -> None:
    schema = {"properties": {"a/b": {"type": "string"}, "c~d": {"type": "string"}}}

    assert sorted(pointers(validate({"a/b": 1, "c~d": 2}, schema))) == [("/a~1b", "type"), ("/c~0d", "type")]


def test_assert_valid_raises_with_issues_and_pointers_in_message() -> None:
    with pytest.raises(SchemaValidationError) as caught:
        assert_valid({"customer": {}, "items": [], "approved": 1}, ORDER)

    assert pointers(caught.value.issues) == [("/customer/name", "required"), ("/customer/email", "required")]
    assert "/customer/name" in str(caught.value)


def test_validators_are_cached_by_content() -> None:
    first = compiled({"type": "object", "properties": {"a": {"type": "string"}}})
    second = compiled({"properties": {"a": {"type": "string"}}, "type": "object"})

    assert first is second


def test_invalid_schema_is_a_policy_error() -> None:
    with pytest.raises(SchemaPolicyError) as caught:
        validate(1, {"type": "integr"})

    assert [(v.pointer, v.rule) for v in caught.value.violations] == [("/type", "metaschema")]


def test_remote_ref_is_never_fetched() -> None:
    with pytest.raises(SchemaPolicyError) as caught:
        validate(1, {"$ref": "https://example.com/schema.json"})

    assert caught.value.violations[0].rule == "ref-unresolvable"


def test_boolean_schemas() -> None:
    assert validate({"x": 1}, True) == []
    assert pointers(validate({"x": 1}, False)) == [("", "false")]
