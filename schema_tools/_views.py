"""Model-facing views: provider tool specs, the OpenAI strict-mode schema, the form picker."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

__all__ = ["form_picker_spec", "strict_schema", "tool_spec"]

_SUBSCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SUBSCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_SUBSCHEMAS = (
    "items", "additionalProperties", "unevaluatedProperties", "unevaluatedItems", "contains",
    "propertyNames", "not", "if", "then", "else",
)  # fmt: skip
_ANY_OF_SIBLINGS = frozenset({"anyOf", "title", "description", "default", "examples", "$comment"})


def tool_spec(name: str, description: str, parameters: Mapping[str, Any], *, strict: bool = False) -> dict[str, Any]:
    """Build an OpenAI chat-completions tool entry.

    Args:
        name: The function name the model calls.
        description: What the function does, for the model.
        parameters: The JSON Schema (an object) of the arguments.
        strict: Apply `strict_schema` and add ``"strict": true`` (OpenAI structured outputs).

    Returns:
        ``{"type": "function", "function": {"name", "description", "parameters"[, "strict"]}}``.
    """
    function: dict[str, Any] = {"name": name, "description": description}
    if strict:
        function["parameters"] = strict_schema(parameters)
        function["strict"] = True
    else:
        function["parameters"] = copy.deepcopy(dict(parameters))
    return {"type": "function", "function": function}


def strict_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Return the strict-mode view of `schema` that OpenAI structured outputs require.

    Recursively (``$defs`` included), every object schema gets ``additionalProperties: false`` (a schema
    there is replaced) and lists every property in ``required``; a property that was optional becomes
    nullable instead: ``"null"`` joins its ``type`` list (and ``None`` its ``enum``), ``{"type": "null"}``
    joins its ``anyOf``, or it is wrapped as ``{"anyOf": [schema, {"type": "null"}]}``. Keywords a provider
    may not support (``format``, ``pattern`` ...) are kept. The input is not mutated.
    """
    return _strict_node(copy.deepcopy(dict(schema)))


def form_picker_spec(forms: Mapping[str, str], *, base_description: str) -> tuple[str, dict[str, Any]]:
    """Build the description and parameters of a control tool that lets the model pick a form.

    The model sees only the form keys and what each form is for, never the form schemas.

    Args:
        forms: Form key to the description of when to use that form (in order).
        base_description: The text that opens the tool description.

    Returns:
        ``(description, parameters)``; the parameters are a strict object with one required ``formKey``
        string property whose ``enum`` lists the keys.

    Raises:
        ValueError: If `forms` is empty.
    """
    if not forms:
        raise ValueError("form_picker_spec needs at least one form")
    lines = [base_description.rstrip(), "", "Available forms (formKey: when to use it):"]
    lines += [f"- {key}: {' '.join(text.split())}" for key, text in forms.items()]
    parameters = {
        "type": "object",
        "properties": {"formKey": {"type": "string", "enum": list(forms)}},
        "required": ["formKey"],
        "additionalProperties": False,
    }
    return "\n".join(lines).strip(), parameters


def _strict(node: Any) -> Any:
    return _strict_node(node) if isinstance(node, dict) else node


def _strict_node(node: dict[str, Any]) -> dict[str, Any]:
    for key in _SUBSCHEMA_MAPS:
        if isinstance(node.get(key), dict):
            node[key] = {name: _strict(sub) for name, sub in node[key].items()}
    for key in _SUBSCHEMA_LISTS:
        if isinstance(node.get(key), list):
            node[key] = [_strict(sub) for sub in node[key]]
    for key in _SUBSCHEMAS:
        if key in node:
            node[key] = _strict(node[key])
    if _is_object(node):
        _close_object(node)
    return node


def _is_object(node: dict[str, Any]) -> bool:
    declared = node.get("type")
    return declared == "object" or (isinstance(declared, list) and "object" in declared) or "properties" in node


def _close_object(node: dict[str, Any]) -> None:
    properties = node.setdefault("properties", {})
    required = [name for name in node.get("required", []) if name in properties]
    for name in properties:
        if name not in required:
            properties[name] = _nullable(properties[name])
    node["required"] = list(properties)
    node["additionalProperties"] = False


def _nullable(schema: Any) -> Any:
    if not isinstance(schema, dict) or not schema:
        return schema
    declared = schema.get("type")
    if isinstance(declared, str | list) and "const" not in schema:
        types = [declared] if isinstance(declared, str) else list(declared)
        schema["type"] = types if "null" in types else [*types, "null"]
        if isinstance(schema.get("enum"), list) and None not in schema["enum"]:
            schema["enum"] = [*schema["enum"], None]
        return schema
    if isinstance(schema.get("anyOf"), list) and set(schema) <= _ANY_OF_SIBLINGS:
        if {"type": "null"} not in schema["anyOf"]:
            schema["anyOf"] = [*schema["anyOf"], {"type": "null"}]
        return schema
    return {"anyOf": [schema, {"type": "null"}]}
