from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from schema_tools_samples import MEETING_ROOM_BOOKING

from schema_tools import apply_defaults, coerce_form_values, validate

Strategy = st.SearchStrategy[Any]


def test_apply_defaults_fills_missing_properties_without_mutating() -> None:
    instance = {"topic": "Sync", "start": "2025-01-01T10:00:00Z", "end": "2025-01-01T11:00:00Z"}
    before = copy.deepcopy(instance)

    filled = apply_defaults(instance, MEETING_ROOM_BOOKING)

    assert filled == {**instance, "attendees": 2, "needsProjector": False}
    assert instance == before
    assert validate(filled, MEETING_ROOM_BOOKING) == []


def test_apply_defaults_keeps_given_values_and_follows_refs_items_and_prefix_items() -> None:
    schema = {
        "type": "object",
        "$defs": {"Person": {"type": "object", "properties": {"role": {"type": "string", "default": "guest"}}}},
        "properties": {
            "host": {"$ref": "#/$defs/Person", "default": {}},
            "guests": {"type": "array", "items": {"$ref": "#/$defs/Person"}},
            "pair": {"type": "array", "prefixItems": [{"$ref": "#/$defs/Person"}, {"type": "integer"}]},
            "mode": {"allOf": [{"default": "auto"}]},
        },
    }

    filled = apply_defaults({"guests": [{}, {"role": "admin"}], "pair": [{}, 1], "mode": "manual"}, schema)

    assert filled == {
        "host": {"role": "guest"},
        "guests": [{"role": "guest"}, {"role": "admin"}],
        "pair": [{"role": "guest"}, 1],
        "mode": "manual",
    }


def test_apply_defaults_copies_mutable_defaults() -> None:
    schema = {"type": "object", "properties": {"tags": {"type": "array", "default": []}}}

    first = apply_defaults({}, schema)
    first["tags"].append("x")

    assert apply_defaults({}, schema) == {"tags": []}


def test_apply_defaults_survives_ref_loops_and_remote_refs() -> None:
    schema = {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "properties": {
        "x": {"$ref": "#/$defs/a"}, "y": {"$ref": "https://example.com/s.json"}, "z": {"$ref": "#/nope/0"},
    }}  # fmt: skip

    assert apply_defaults({"x": {}, "y": {}, "z": {}}, schema) == {"x": {}, "y": {}, "z": {}}


@pytest.mark.parametrize(
    ("schema", "value", "expected"),
    [
        pytest.param({"type": "integer"}, "3", 3, id="integer"),
        pytest.param({"type": "integer"}, " -42 ", -42, id="integer-spaces"),
        pytest.param({"type": "integer"}, "3.5", "3.5", id="integer-not-coercible"),
        pytest.param({"type": "number"}, "2.5", 2.5, id="number"),
        pytest.param({"type": "number"}, "3", 3, id="number-integral"),
        pytest.param({"type": "number"}, "1e3", 1000.0, id="number-exponent"),
        pytest.param({"type": "number"}, "NaN", "NaN", id="number-nan-untouched"),
        pytest.param({"type": ["number", "null"]}, "7", 7, id="nullable-number"),
        pytest.param({"type": ["number", "string"]}, "7", "7", id="ambiguous-type-untouched"),
        pytest.param({"type": "boolean"}, "on", True, id="on"),
        pytest.param({"type": "boolean"}, "TRUE", True, id="true"),
        pytest.param({"type": "boolean"}, "1", True, id="one"),
        pytest.param({"type": "boolean"}, "false", False, id="false"),
        pytest.param({"type": "boolean"}, "0", False, id="zero"),
        pytest.param({"type": "boolean"}, "maybe", "maybe", id="boolean-not-coercible"),
        pytest.param({"type": "string"}, "3", "3", id="string-untouched"),
        pytest.param({}, "3", "3", id="untyped-untouched"),
        pytest.param({"type": "array", "items": {"type": "integer"}}, "5", [5], id="single-value-for-array"),
        pytest.param({"type": "array", "items": {"type": "integer"}}, ["1", "x"], [1, "x"], id="array-items"),
        pytest.param({"type": "array", "prefixItems": [{"type": "boolean"}]}, ["on", "1"], [True, "1"], id="prefix"),
        pytest.param({"type": "array"}, {"a": 1}, {"a": 1}, id="object-not-wrapped"),
    ],
)
def test_coerce_form_values(schema: dict[str, Any], value: Any, expected: Any) -> None:
    assert coerce_form_values({"v": value}, {"type": "object", "properties": {"v": schema}}) == {"v": expected}


def test_coerce_form_values_walks_nested_objects_and_refs_without_mutating() -> None:
    schema = {
        "$defs": {"Qty": {"type": "integer", "minimum": 1}},
        "type": "object",
        "properties": {
            "order": {"type": "object", "properties": {"qty": {"$ref": "#/$defs/Qty"}, "gift": {"type": "boolean"}}}
        },
    }
    instance = {"order": {"qty": "2", "gift": "on"}, "extra": "5"}

    assert coerce_form_values(instance, schema) == {"order": {"qty": 2, "gift": True}, "extra": "5"}
    assert instance == {"order": {"qty": "2", "gift": "on"}, "extra": "5"}


SCALARS: list[tuple[dict[str, Any], Strategy]] = [
    ({"type": "string", "maxLength": 5}, st.text(max_size=5)),
    ({"type": "integer", "minimum": -100, "maximum": 100}, st.integers(-100, 100)),
    ({"type": "number"}, st.floats(-1e9, 1e9, allow_nan=False) | st.integers(-1000, 1000)),
    ({"type": "boolean"}, st.booleans()),
    ({"type": "string", "enum": ["low", "high"]}, st.sampled_from(["low", "high"])),
]


@st.composite
def fields(draw: st.DrawFn, depth: int) -> tuple[dict[str, Any], Strategy]:
    kinds = ["scalar", "array", "object"] if depth < 2 else ["scalar"]
    kind = draw(st.sampled_from(kinds))
    if kind == "object":
        schema, values = draw(forms(depth + 1))
    else:
        item_schema, item_values = draw(st.sampled_from(SCALARS))
        schema, values = copy.deepcopy(item_schema), item_values
        if kind == "array":
            schema, values = {"type": "array", "items": schema}, st.lists(item_values, max_size=3)
    if draw(st.booleans()):
        schema = {**schema, "default": draw(values)}
    return schema, values


@st.composite
def forms(draw: st.DrawFn, depth: int = 0) -> tuple[dict[str, Any], Strategy]:
    names = draw(st.lists(st.sampled_from(["a", "b", "c", "d", "e"]), unique=True, max_size=4))
    specs = {name: draw(fields(depth)) for name in names}
    required = draw(st.lists(st.sampled_from(names), unique=True)) if names else []
    schema: dict[str, Any] = {"type": "object", "properties": {name: spec for name, (spec, _) in specs.items()}}
    if required:
        schema["required"] = required
    if draw(st.booleans()):
        schema["additionalProperties"] = False
    values = st.fixed_dictionaries(
        {name: specs[name][1] for name in required},
        optional={name: spec[1] for name, spec in specs.items() if name not in required},
    )
    return schema, values


def as_form_strings(value: Any, schema: dict[str, Any]) -> Any:
    """Render a valid instance the way an HTML form would send it."""
    kind = schema.get("type")
    if kind == "object":
        return {name: as_form_strings(item, schema["properties"][name]) for name, item in value.items()}
    if kind == "array":
        items = [as_form_strings(item, schema["items"]) for item in value]
        return items[0] if len(items) == 1 else items
    if kind == "boolean":
        return "true" if value else "false"
    if kind in ("integer", "number"):
        return repr(value)
    return value


@settings(max_examples=100)
@given(st.data())
def test_defaults_and_coercion_keep_valid_instances_valid(data: st.DataObject) -> None:
    schema, values = data.draw(forms())
    instance = data.draw(values)
    assert validate(instance, schema) == []

    filled = apply_defaults(instance, schema)
    coerced = coerce_form_values(instance, schema)
    both = apply_defaults(coerce_form_values(as_form_strings(instance, schema), schema), schema)

    assert validate(filled, schema) == []
    assert validate(coerced, schema) == []
    assert coerced == instance
    assert both == filled
    assert {name for name, spec in schema["properties"].items() if "default" in spec} <= set(filled)
