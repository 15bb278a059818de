"""The project's typed aliases: what a JSON value is, and a protocol model as the wire carries it."""

from __future__ import annotations

from typing import Any, TypeAlias

from pydantic import BaseModel

JSON: TypeAlias = Any
"""Any JSON value, as `json.loads` returns it."""


def wire_json(model: BaseModel) -> dict[str, Any]:
    """A protocol model as the JSON object the wire carries: camelCase keys, unset optional fields left out."""
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)
