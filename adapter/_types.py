"""The project's typed aliases: what a JSON value is, a protocol model as the wire carries it, a message's kind."""

from __future__ import annotations

from typing import Any, TypeAlias

from ag_ui.core import ActivityMessage, AssistantMessage, ToolMessage
from pydantic import BaseModel

JSON: TypeAlias = Any
"""Any JSON value, as `json.loads` returns it."""


def wire_json(model: BaseModel) -> dict[str, Any]:
    """A protocol model as the JSON object the wire carries: camelCase keys, unset optional fields left out."""
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


KIND_BY_CLASS: dict[type, type] = {}
"""`message_kind` by class, read first in a hot loop (`KIND_BY_CLASS.get(cls) or message_kind(m)`)."""


def message_kind(message: object) -> type:
    """Which of ToolMessage, AssistantMessage or ActivityMessage `message` is an instance of; `object` for none.

    Memoised by class: a walk over a long history asks it per message, where `isinstance` against a pydantic
    model class goes through the metaclass's check each time.
    """
    cls = message.__class__
    kind = KIND_BY_CLASS.get(cls)
    if kind is None:
        kind = next((k for k in (ToolMessage, AssistantMessage, ActivityMessage) if issubclass(cls, k)), object)
        KIND_BY_CLASS[cls] = kind
    return kind
