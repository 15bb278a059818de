"""Helpers for form submissions: fill in defaults, and coerce HTML form strings to declared types."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Mapping
from typing import Any

from schema_tools._pointer import unescape

__all__ = ["apply_defaults", "coerce_form_values"]

_INTEGER = re.compile(r"[+-]?\d+")
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_BOOLEANS = {"true": True, "on": True, "1": True, "yes": True, "false": False, "off": False, "0": False, "no": False}
_MAX_REF_HOPS = 64

Schema = Mapping[str, Any]


def apply_defaults(instance: Any, schema: Schema) -> Any:
    """Return a copy of `instance` with the ``default`` of every missing object property filled in.

    Walks ``properties``, ``items``, ``prefixItems``, ``allOf`` and local ``$ref`` (``#`` and
    ``#/...``); ``anyOf``/``oneOf`` are ambiguous and skipped. A filled-in default is copied and gets
    nested defaults too. The input is not mutated; a valid instance stays valid as long as the defaults
    themselves are valid.
    """
    return _Walker(schema, _fill_defaults).walk(copy.deepcopy(instance), schema)


def coerce_form_values(instance: Any, schema: Schema) -> Any:
    """Return a copy of `instance` with HTML form strings converted to the types the schema declares.

    Only where the schema declares exactly one type (``"integer"`` or ``["integer", "null"]``):

    - integer: ``"3"`` becomes ``3``; number: ``"2.5"`` becomes ``2.5`` (``"3"`` becomes ``3``);
    - boolean: ``"true"``, ``"on"``, ``"yes"``, ``"1"`` and ``"false"``, ``"off"``, ``"no"``, ``"0"``
      (any case) become booleans;
    - array: a single scalar becomes ``[scalar]`` (a repeated field sent once); items are coerced too.

    Walks ``properties``, ``items``, ``prefixItems``, ``allOf`` and local ``$ref``. Values that cannot
    be coerced are left as they are, so validation reports them. The input is not mutated.
    """
    return _Walker(schema, _coerce).walk(copy.deepcopy(instance), schema)


class _Walker:
    """Apply `visit` to each value together with the (resolved) schema that applies to it."""

    def __init__(self, root: Schema, visit: Callable[[_Walker, Any, Schema], Any]) -> None:
        self.root = root
        self.visit = visit

    def walk(self, value: Any, schema: Any) -> Any:
        for node in self.schemas(schema):
            value = self.visit(self, value, node)
            if isinstance(value, dict):
                for name, sub in _mapping(node.get("properties")).items():
                    if name in value:
                        value[name] = self.walk(value[name], sub)
            elif isinstance(value, list):
                value = [
                    self.walk(item, sub) for item, sub in zip(value, self.item_schemas(node, len(value)), strict=True)
                ]
        return value

    def schemas(self, schema: Any) -> list[Schema]:
        """`schema` itself, its ``allOf`` members and its ``$ref`` targets (resolved, loop-safe)."""
        found: list[Schema] = []
        pending, hops = [schema], 0
        while pending and hops < _MAX_REF_HOPS:
            node, hops = self.resolve(pending.pop(0)), hops + 1
            if isinstance(node, Mapping) and all(node is not seen for seen in found):
                found.append(node)
                pending += [node["$ref"]] if isinstance(node.get("$ref"), str) else []
                pending += [sub for sub in node.get("allOf", []) if isinstance(sub, Mapping)]
        return found

    def resolve(self, ref_or_schema: Any) -> Any:
        if not isinstance(ref_or_schema, str):
            return ref_or_schema
        if ref_or_schema != "#" and not ref_or_schema.startswith("#/"):
            return None
        node: Any = self.root
        for token in ref_or_schema[2:].split("/") if ref_or_schema != "#" else []:
            node = _mapping(node).get(unescape(token)) if not isinstance(node, list) else _index(node, token)
        return node

    def item_schemas(self, node: Schema, count: int) -> list[Any]:
        prefix = [sub for sub in node.get("prefixItems", []) if isinstance(sub, Mapping | bool)]
        rest = node.get("items", {})
        return (prefix + [rest] * count)[:count]


def _fill_defaults(walker: _Walker, value: Any, node: Schema) -> Any:
    if not isinstance(value, dict):
        return value
    for name, sub in _mapping(node.get("properties")).items():
        if name in value:
            continue
        for candidate in walker.schemas(sub):
            if "default" in candidate:
                value[name] = copy.deepcopy(candidate["default"])
                break
    return value


def _coerce(walker: _Walker, value: Any, node: Schema) -> Any:
    declared = _single_type(node.get("type"))
    if declared == "array" and isinstance(value, str | int | float | bool):
        return [value]
    if not isinstance(value, str):
        return value
    text = value.strip()
    if declared == "integer" and _INTEGER.fullmatch(text):
        return int(text)
    if declared == "number" and _NUMBER.fullmatch(text):
        return int(text) if _INTEGER.fullmatch(text) else float(text)
    if declared == "boolean" and text.lower() in _BOOLEANS:
        return _BOOLEANS[text.lower()]
    return value


def _single_type(declared: Any) -> str | None:
    if isinstance(declared, str):
        return declared
    if isinstance(declared, list):
        types = [kind for kind in declared if kind != "null"]
        return types[0] if len(types) == 1 and isinstance(types[0], str) else None
    return None


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _index(items: list[Any], token: str) -> Any:
    return items[int(token)] if token.isdigit() and int(token) < len(items) else None
