from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from schema_tools_samples import OPENAI_LINKED_LIST, TOOLS

from schema_tools import check_schema, form_picker_spec, strict_schema, tool_spec, validate


def objects(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        if node.get("type") == "object" or "properties" in node:
            yield node
        for value in node.values():
            yield from objects(value)
    elif isinstance(node, list):
        for value in node:
            yield from objects(value)


def test_strict_schema_closes_objects_and_makes_optional_properties_nullable() -> None:
    schema = {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "unit": {"type": "string", "enum": ["c", "f"], "default": "c"},
            "days": {"type": ["integer"]},
            "tags": {"anyOf": [{"type": "string"}, {"type": "array"}], "description": "Tags."},
            "address": {"$ref": "#/$defs/Address"},
            "anything": {},
        },
        "required": ["city"],
        "$defs": {"Address": {"type": "object", "properties": {"street": {"type": "string"}}}},
    }

    assert strict_schema(schema) == {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "unit": {"type": ["string", "null"], "enum": ["c", "f", None], "default": "c"},
            "days": {"type": ["integer", "null"]},
            "tags": {"anyOf": [{"type": "string"}, {"type": "array"}, {"type": "null"}], "description": "Tags."},
            "address": {"anyOf": [{"$ref": "#/$defs/Address"}, {"type": "null"}]},
            "anything": {},
        },
        "required": ["city", "unit", "days", "tags", "address", "anything"],
        "additionalProperties": False,
        "$defs": {
            "Address": {
                "type": "object",
                "properties": {"street": {"type": ["string", "null"]}},
                "required": ["street"],
                "additionalProperties": False,
            }
        },
    }


def test_strict_schema_does_not_mutate_its_input() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "string"}}
    before = copy.deepcopy(schema)

    strict_schema(schema)

    assert schema == before


def test_strict_schema_keeps_already_nullable_and_required_properties() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": ["string", "null"]}, "b": {"anyOf": [{"type": "integer"}, {"type": "null"}]}},
        "required": ["a"],
    }

    assert strict_schema(schema)["properties"] == schema["properties"]


@pytest.mark.parametrize("schema", [pytest.param(schema, id=name) for name, schema in TOOLS.items()])
def test_strict_schema_of_real_tools_is_closed_everywhere(schema: dict[str, Any]) -> None:
    strict = strict_schema(schema)

    check_schema(strict)
    for node in objects(strict):
        assert node["additionalProperties"] is False
        assert node["required"] == list(node["properties"])


def test_strict_linked_list_accepts_null_terminated_lists() -> None:
    strict = strict_schema(OPENAI_LINKED_LIST)

    assert validate({"linked_list": {"value": 1, "next": {"value": 2, "next": None}}}, strict) == []


def test_tool_spec_has_the_openai_shape() -> None:
    parameters = {"type": "object", "properties": {"q": {"type": "string"}}}

    spec = tool_spec("search", "Search things.", parameters)

    assert spec == {
        "type": "function",
        "function": {"name": "search", "description": "Search things.", "parameters": parameters},
    }
    assert spec["function"]["parameters"] is not parameters


def test_tool_spec_strict() -> None:
    parameters = {"type": "object", "properties": {"q": {"type": "string"}}}

    assert tool_spec("search", "Search things.", parameters, strict=True) == {
        "type": "function",
        "function": {
            "name": "search",
            "description": "Search things.",
            "parameters": {
                "type": "object",
                "properties": {"q": {"type": ["string", "null"]}},
                "required": ["q"],
                "additionalProperties": False,
            },
            "strict": True,
        },
    }


def test_form_picker_spec_lists_keys_and_never_schemas() -> None:
    forms = {
        "meeting_room_booking": "预定会议室时收集会议主题、时间和参会人数",
        "support_ticket_details": "创建故障工单缺少信息时使用",
    }

    description, parameters = form_picker_spec(forms, base_description="Ask the user to fill in a form.")

    assert description == (
        "Ask the user to fill in a form.\n\n"
        "Available forms (formKey: when to use it):\n"
        "- meeting_room_booking: 预定会议室时收集会议主题、时间和参会人数\n"
        "- support_ticket_details: 创建故障工单缺少信息时使用"
    )
    assert parameters == {
        "type": "object",
        "properties": {"formKey": {"type": "string", "enum": ["meeting_room_booking", "support_ticket_details"]}},
        "required": ["formKey"],
        "additionalProperties": False,
    }
    check_schema(parameters)


def test_form_picker_spec_needs_a_form() -> None:
    with pytest.raises(ValueError, match="at least one form"):
        form_picker_spec({}, base_description="Pick a form.")
