"""A fast, node-by-node check against the Draft 2020-12 meta-schema.

The official meta-schema recurses into subschemas through ``$dynamicRef``, which jsonschema resolves
at about a millisecond per subschema: too slow for a 2 000-node schema from an untrusted client. Here
the seven vocabulary meta-schemas are merged into one *shallow* meta-schema without references, in
which every subschema position only has to be an object or a boolean. `SchemaWalk` applies it to each
schema node it visits, which together is the same check as the recursive meta-schema.
"""

from __future__ import annotations

import importlib
from typing import Any

from jsonschema import Draft202012Validator

__all__ = ["SHALLOW_META", "SHALLOW_META_VALIDATOR"]

_VOCABULARIES = ("core", "applicator", "unevaluated", "validation", "meta-data", "format-annotation", "content")
_ROOT_ONLY = frozenset({"$schema", "$id", "$vocabulary", "$dynamicAnchor", "$defs", "title"})
_SUBSCHEMA = {"type": ["object", "boolean"]}


def _shallow(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, list):
        return [_shallow(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    if node.get("$dynamicRef") == "#meta":
        return dict(_SUBSCHEMA)
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):  # a reference, not a property named "$ref"
        rest = {key: _shallow(value, defs) for key, value in node.items() if key != "$ref"}
        return {"allOf": [_shallow(defs[ref.removeprefix("#/$defs/")], defs), rest]}
    return {key: _shallow(value, defs) for key, value in node.items()}


def _vocabulary(name: str) -> dict[str, Any]:
    specifications: Any = importlib.import_module("jsonschema_specifications")
    contents: dict[str, Any] = specifications.REGISTRY[f"https://json-schema.org/draft/2020-12/meta/{name}"].contents
    defs = contents.get("$defs", {})
    shallow: dict[str, Any] = _shallow({k: v for k, v in contents.items() if k not in _ROOT_ONLY}, defs)
    return shallow


def _merged() -> dict[str, Any]:
    """One ``{"type": ..., "properties": ...}`` schema: the vocabularies declare disjoint keywords."""
    merged: dict[str, Any] = {"type": ["object", "boolean"], "properties": {}}
    for name in _VOCABULARIES:
        vocabulary = _vocabulary(name)
        if set(vocabulary) != {"type", "properties"} or set(vocabulary["properties"]) & set(merged["properties"]):
            raise RuntimeError(f"unexpected shape of the {name} meta-schema")  # pragma: no cover
        merged["properties"].update(vocabulary["properties"])
    return merged


SHALLOW_META: dict[str, Any] = _merged()
"""The vocabulary meta-schemas merged, with each subschema position reduced to "object or boolean"."""

SHALLOW_META_VALIDATOR = Draft202012Validator(SHALLOW_META)
