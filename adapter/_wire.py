"""An event's wire JSON: the text `event.model_dump_json(by_alias=True)` gives, character for character.

Every event a run sends is encoded once, by the run's driver (`adapter._sessions._journal`). Most of a stream is
events whose fields are all strings (text and argument deltas, starts and ends), and for those pydantic's
serializer costs about 8 µs an event, most of it in the SDK's Python hook that leaves out optional fields
without a value. The same text is built here from the field plan of the SDK's own event class in about 1 µs.
The SDK's models inside an event (a run's outcome and its interrupts, a snapshot's messages and their tool
calls) are built from their own classes' plans alike, and plain JSON data (ints, bools, dicts) by pydantic-core's
serializer, which is pydantic's for an untyped value: a round trip's `RUN_FINISHED`s and `MESSAGES_SNAPSHOT` cost
15 to 35 µs each through pydantic. Anything else (a float, an enum of another kind, an extra field, a class from
outside the SDK, a string the UTF-8 codec refuses) goes through pydantic, so the text, and the error where there
is one, never differ; tests/protocol/test_wire_json.py holds the two equal over every event class of the SDK and
its tool declarations (`model_json`, which `adapter._run._tools` measures a client's declarations with).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from enum import Enum
from json.encoder import encode_basestring
from typing import Final

from ag_ui.core import BaseEvent
from pydantic import BaseModel
from pydantic_core import PydanticSerializationError, to_json

_Plan = tuple[tuple[str, str, bool, Enum | None, str], ...]
"""Per field, in pydantic's order: its name, its quoted alias with the colon, whether a None leaves it out, and
the enum member it defaults to (the event's `type`) with its text, field and value, or None and ""."""

_PLANS: dict[type, _Plan | None] = {}
_PLAIN: Final = frozenset({int, bool, dict})
"""Values pydantic-core serializes as it does an untyped field's (a float is left to pydantic: its field's type
may say how; a dict holding one is inferred alike either way)."""
_SURROGATE: Final = re.compile("[\ud800-\udfff]")
"""What pydantic refuses to encode as UTF-8: such text takes pydantic's path, and its error."""


def model_json(model: BaseModel) -> str:
    """`model.model_dump_json(by_alias=True)`, built directly where the field plans of the SDK's classes tell it.

    That is when every field holds a string, nothing, one of the SDK's own models (an outcome, a snapshot's
    messages), a list of those, or plain JSON data: an event, and also a client's tool declaration.
    """
    text = _model_json(model)
    if text is None or (not text.isascii() and _SURROGATE.search(text)):  # isascii: O(1), and most text is ASCII
        return model.model_dump_json(by_alias=True)
    return text


event_json: Final[Callable[[BaseEvent], str]] = model_json
"""An event's wire JSON: `model_json`, by the name the journal and the SSE writer use."""


def _model_json(model: BaseModel) -> str | None:
    """The model's JSON from its class's field plan; None where only pydantic can tell (the caller asks it)."""
    cls = model.__class__
    plan = _PLANS.get(cls)
    if plan is None and cls not in _PLANS:
        plan = _PLANS[cls] = _plan(cls)
    if plan is None or model.__pydantic_extra__:
        return None
    values, parts = model.__dict__, []  # a pydantic model keeps its fields' values in its __dict__
    for name, key, omittable, constant, constant_text in plan:
        value = values[name]
        if value is None:
            if not omittable:
                parts.append(key + "null")
        elif type(value) is str:
            parts.append(key + encode_basestring(value))
        elif value is constant:  # the event's `type`, its class's one value
            parts.append(constant_text)
        else:
            text = _value_json(value)
            if text is None:
                return None
            parts.append(key + text)
    return "{" + ",".join(parts) + "}"


def _value_json(value: object) -> str | None:
    """A field's value that is not a string: one of the SDK's models, a list of them, or plain JSON data."""
    if isinstance(value, BaseModel):
        return _model_json(value)
    if type(value) is list:
        items: list[str] = []
        for item in value:
            text = encode_basestring(item) if type(item) is str else _value_json(item)
            if text is None:
                return None
            items.append(text)
        return "[" + ",".join(items) + "]"
    if type(value) in _PLAIN:
        try:
            return to_json(value).decode()  # pydantic-core's own serializer, as pydantic's for an untyped value
        except PydanticSerializationError:
            return None
    return None


def _plan(cls: type[BaseModel]) -> _Plan | None:
    """The field plan of one of the SDK's classes; None for a class whose serialization it cannot repeat.

    A subclass from elsewhere may add serializers or computed fields of its own: it always goes through pydantic.
    """
    if not cls.__module__.startswith("ag_ui.") or cls.model_computed_fields:
        return None
    decorators = cls.__pydantic_decorators__
    if decorators.field_serializers or set(decorators.model_serializers) != {"_omit_fields_without_value"}:
        return None
    plan = []
    for name, field in cls.model_fields.items():
        if field.exclude:
            return None
        key = encode_basestring(field.serialization_alias or field.alias or name) + ":"
        omittable = not field.is_required() and field.default is None
        constant = field.default if isinstance(field.default, Enum) and type(field.default.value) is str else None
        constant_text = key + encode_basestring(constant.value) if constant is not None else ""
        plan.append((name, key, omittable, constant, constant_text))
    return tuple(plan)
