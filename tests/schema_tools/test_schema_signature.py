from __future__ import annotations

import enum
from typing import Annotated, Any, Literal, Optional

import pydantic
import pytest

from schema_tools import CallableSignature, Injected, SchemaValidationError, schema_from_callable, schema_from_model


class Unit(enum.Enum):
    CELSIUS = "celsius"
    FAHRENHEIT = "fahrenheit"


class Address(pydantic.BaseModel):
    street: str
    city: str
    zip_code: str | None = None


class LineItem(pydantic.BaseModel):
    sku: str
    qty: int = pydantic.Field(ge=1)


class ToolContext:
    pass


class RequestContext(ToolContext):
    pass


class Secrets:
    pass


def get_weather(location: str, unit: Literal["celsius", "fahrenheit"] = "celsius") -> str:
    """Get the current weather.

    Args:
        location: City and country, e.g. "Paris, France".
        unit: Temperature unit.

    Returns:
        A sentence about the weather.
    """
    return location


async def search(query: str, limit: int = 10, exact: bool = False) -> list[str]:
    """Search the knowledge base."""
    return [query]


def set_reminder(text: str, when: Optional[str] = None, repeat: int | None = None) -> None:  # noqa: UP045 - under test
    """Set a reminder."""


def convert(value: float, unit: Unit = Unit.CELSIUS) -> float:
    """Convert a temperature."""
    return value


def ship(address: Address, express: bool = False) -> None:
    """Ship to an address."""


def order(items: list[LineItem], note: str = "") -> None:
    """Place an order."""


def described(
    city: Annotated[str, pydantic.Field(description="The city.", min_length=1)],
    days: Annotated[int, "How many days ahead."] = 1,
) -> None:
    """Forecast.

    Args:
        city: Ignored, the Field description wins.
        days: Ignored, the Annotated text wins.
    """


def with_context(ctx: ToolContext, ticket_id: str, req: RequestContext | None = None) -> None:
    """Close a ticket."""


def with_marker(secrets: Annotated[Secrets, Injected], ticket_id: str) -> None:
    """Reopen a ticket."""


def untyped(a, b=2):  # type: ignore[no-untyped-def]
    """Untyped parameters accept anything."""


def tags(labels: list[str], scores: dict[str, float] | None = None) -> None:
    """Tag something."""


def no_params() -> None:
    """Ping."""


def described_by_docstring(ticket_id: str, reason: str = "duplicate") -> None:
    """Close a ticket with a reason.

    Closing is final.

    Args:
        ticket_id: The ticket to close,
            as shown in the tracker.
        reason: Why it is closed.

    Raises:
        KeyError: If the ticket does not exist.
    """


ADDRESS_DEF = {
    "properties": {
        "street": {"type": "string"},
        "city": {"type": "string"},
        "zip_code": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
    },
    "required": ["street", "city"],
    "title": "Address",
    "type": "object",
}
LINE_ITEM_DEF = {
    "properties": {"sku": {"type": "string"}, "qty": {"minimum": 1, "type": "integer"}},
    "required": ["sku", "qty"],
    "title": "LineItem",
    "type": "object",
}


def obj(properties: dict[str, Any], required: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    schema = {"additionalProperties": False, "properties": properties, "type": "object", **extra}
    return {**schema, "required": required} if required else schema


@pytest.mark.parametrize(
    ("fn", "expected"),
    [
        pytest.param(
            get_weather,
            obj(
                {
                    "location": {"description": 'City and country, e.g. "Paris, France".', "type": "string"},
                    "unit": {
                        "default": "celsius",
                        "description": "Temperature unit.",
                        "enum": ["celsius", "fahrenheit"],
                        "type": "string",
                    },
                },
                ["location"],
            ),
            id="docstring-args-and-literal",
        ),
        pytest.param(
            search,
            obj(
                {
                    "query": {"type": "string"},
                    "limit": {"default": 10, "type": "integer"},
                    "exact": {"default": False, "type": "boolean"},
                },
                ["query"],
            ),
            id="async-with-defaults",
        ),
        pytest.param(
            set_reminder,
            obj(
                {
                    "text": {"type": "string"},
                    "when": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
                    "repeat": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None},
                },
                ["text"],
            ),
            id="optional",
        ),
        pytest.param(
            convert,
            obj(
                {"value": {"type": "number"}, "unit": {"$ref": "#/$defs/Unit", "default": "celsius"}},
                ["value"],
                **{"$defs": {"Unit": {"enum": ["celsius", "fahrenheit"], "title": "Unit", "type": "string"}}},
            ),
            id="enum",
        ),
        pytest.param(
            ship,
            obj(
                {"address": {"$ref": "#/$defs/Address"}, "express": {"default": False, "type": "boolean"}},
                ["address"],
                **{"$defs": {"Address": ADDRESS_DEF}},
            ),
            id="nested-model",
        ),
        pytest.param(
            order,
            obj(
                {
                    "items": {"items": {"$ref": "#/$defs/LineItem"}, "type": "array"},
                    "note": {"default": "", "type": "string"},
                },
                ["items"],
                **{"$defs": {"LineItem": LINE_ITEM_DEF}},
            ),
            id="list-of-models",
        ),
        pytest.param(
            described,
            obj(
                {
                    "city": {"description": "The city.", "minLength": 1, "type": "string"},
                    "days": {"default": 1, "description": "How many days ahead.", "type": "integer"},
                },
                ["city"],
            ),
            id="annotated-descriptions",
        ),
        pytest.param(with_context, obj({"ticket_id": {"type": "string"}}, ["ticket_id"]), id="injected-type"),
        pytest.param(with_marker, obj({"ticket_id": {"type": "string"}}, ["ticket_id"]), id="injected-marker"),
        pytest.param(untyped, obj({"a": {}, "b": {"default": 2}}, ["a"]), id="untyped-is-any"),
        pytest.param(
            tags,
            obj(
                {
                    "labels": {"items": {"type": "string"}, "type": "array"},
                    "scores": {
                        "anyOf": [{"additionalProperties": {"type": "number"}, "type": "object"}, {"type": "null"}],
                        "default": None,
                    },
                },
                ["labels"],
            ),
            id="containers",
        ),
        pytest.param(no_params, obj({}), id="no-parameters"),
        pytest.param(
            described_by_docstring,
            obj(
                {
                    "ticket_id": {"description": "The ticket to close, as shown in the tracker.", "type": "string"},
                    "reason": {"default": "duplicate", "description": "Why it is closed.", "type": "string"},
                },
                ["ticket_id"],
            ),
            id="multiline-docstring-args",
        ),
    ],
)
def test_schema_from_callable(fn: Any, expected: dict[str, Any]) -> None:
    assert schema_from_callable(fn, injected=(ToolContext,)) == expected


def test_name_description_and_async() -> None:
    sync = CallableSignature.from_callable(described_by_docstring)
    asynchronous = CallableSignature.from_callable(search)

    assert (sync.name, sync.is_async) == ("described_by_docstring", False)
    assert sync.description == "Close a ticket with a reason.\n\nClosing is final."
    assert (asynchronous.name, asynchronous.is_async, asynchronous.description) == (
        "search",
        True,
        "Search the knowledge base.",
    )


def test_injected_parameters_are_reported_by_type() -> None:
    signature = CallableSignature.from_callable(with_context, injected=(ToolContext,))
    marked = CallableSignature.from_callable(with_marker)

    assert signature.injected == {"ctx": ToolContext, "req": RequestContext | None}
    assert marked.injected == {"secrets": Secrets}


def test_injected_type_without_injection_is_refused() -> None:
    with pytest.raises(TypeError, match="with_context"):
        schema_from_callable(with_context)


@pytest.mark.parametrize(
    "fn",
    [
        pytest.param(lambda *args: None, id="var-positional"),
        pytest.param(lambda **kwargs: None, id="var-keyword"),
        pytest.param(lambda a, /: None, id="positional-only"),
    ],
)
def test_unsupported_parameter_kinds_are_refused(fn: Any) -> None:
    with pytest.raises(TypeError, match="cannot be described"):
        schema_from_callable(fn)


def test_awkward_parameter_names_survive() -> None:
    def tool(schema: str, model_config: int = 0, _private: bool = False) -> None:
        """Names that clash with pydantic's own."""

    signature = CallableSignature.from_callable(tool)

    assert list(signature.schema["properties"]) == ["schema", "model_config", "_private"]
    assert signature.bind({"schema": "s", "_private": True}) == {"schema": "s", "model_config": 0, "_private": True}


def test_bind_converts_to_python_types_and_fills_defaults() -> None:
    assert CallableSignature.from_callable(convert).bind({"value": 21.5, "unit": "fahrenheit"}) == {
        "value": 21.5,
        "unit": Unit.FAHRENHEIT,
    }
    assert CallableSignature.from_callable(order).bind({"items": [{"sku": "A", "qty": 2}]}) == {
        "items": [LineItem(sku="A", qty=2)],
        "note": "",
    }
    assert CallableSignature.from_callable(ship).bind({"address": {"street": "1 Main", "city": "X"}}) == {
        "address": Address(street="1 Main", city="X"),
        "express": False,
    }


def test_bind_leaves_injected_parameters_to_the_caller() -> None:
    signature = CallableSignature.from_callable(with_context, injected=(ToolContext,))

    assert signature.bind({"ticket_id": "T-1"}) == {"ticket_id": "T-1"}


@pytest.mark.parametrize(
    ("fn", "arguments", "expected"),
    [
        pytest.param(get_weather, {}, [("/location", "required")], id="missing"),
        pytest.param(get_weather, {"location": "P", "unit": "kelvin"}, [("/unit", "enum")], id="literal"),
        pytest.param(get_weather, {"location": "P", "extra": 1}, [("/extra", "additionalProperties")], id="extra"),
        pytest.param(search, {"query": "q", "limit": "many"}, [("/limit", "type")], id="type"),
        pytest.param(convert, {"value": 1, "unit": "kelvin"}, [("/unit", "enum")], id="enum"),
        pytest.param(
            order,
            {"items": [{"sku": "A", "qty": 1}, {"sku": "B", "qty": 0}, {"qty": 1}]},
            [("/items/1/qty", "minimum"), ("/items/2/sku", "required")],
            id="list-of-models",
        ),
        pytest.param(ship, {"address": {"street": 1, "city": "X"}}, [("/address/street", "type")], id="nested-model"),
        pytest.param(set_reminder, {"text": "t", "repeat": []}, [("/repeat", "type")], id="optional-drops-union-tags"),
        pytest.param(described, {"city": ""}, [("/city", "minLength")], id="field-constraint"),
        pytest.param(search, ["q"], [("", "type")], id="not-an-object"),
    ],
)
def test_bind_rejects_with_pointers(fn: Any, arguments: Any, expected: list[tuple[str, str]]) -> None:
    with pytest.raises(SchemaValidationError) as caught:
        CallableSignature.from_callable(fn).bind(arguments)

    assert [(issue.pointer, issue.keyword) for issue in caught.value.issues] == expected


def test_schema_from_model_keeps_only_configured_root_titles() -> None:
    class Titled(pydantic.BaseModel):
        model_config = pydantic.ConfigDict(title="Shipping address")
        street: str

    assert schema_from_model(Address) == {key: value for key, value in ADDRESS_DEF.items() if key != "title"}
    assert schema_from_model(Titled) == {
        "properties": {"street": {"type": "string"}},
        "required": ["street"],
        "title": "Shipping address",
        "type": "object",
    }
