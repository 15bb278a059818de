"""The keyword-aware pass of `check_schema`: every rule that needs to know what a value means."""

from __future__ import annotations

from typing import Any

from schema_tools._errors import PolicyViolation
from schema_tools._keywords import (
    ANNOTATION_TEXT,
    DATA_VALUES,
    IN_PLACE_LISTS,
    IN_PLACE_MAPS,
    IN_PLACE_SINGLE,
    KNOWN,
    SCHEMA_LISTS,
    SCHEMA_MAPS,
    SCHEMA_SINGLE,
)
from schema_tools._meta import SHALLOW_META_VALIDATOR
from schema_tools._pointer import pointer
from schema_tools._policy import SchemaPolicy
from schema_tools._refs import RefGraph, resolve
from schema_tools._regex import pattern_problem
from schema_tools._text import markup_problem

__all__ = ["DIALECTS", "SchemaWalk", "enum_violation"]

DIALECTS = frozenset({"https://json-schema.org/draft/2020-12/schema", "https://json-schema.org/draft/2020-12/schema#"})

Path = tuple[str | int, ...]


class SchemaWalk:
    """Walk the schema positions of one document and collect policy violations."""

    def __init__(self, root: dict[str, Any], policy: SchemaPolicy) -> None:
        self.root = root
        self.policy = policy
        self.found: list[PolicyViolation] = []
        self.schemas: set[str] = set()
        self.anchors: dict[str, str] = {}
        self.refs: list[tuple[str, str, str]] = []  # (schema pointer, $ref value, $ref pointer)
        self.graph = RefGraph()

    def run(self) -> list[PolicyViolation]:
        """Walk from the root, then resolve references and look for loops."""
        self.schema(self.root, ())
        for source, ref, where in self.refs:
            self.reference(source, ref, where)
        self.found += [PolicyViolation(where, "ref-loop", "references loop without consuming the instance")
                       for where in self.graph.loops()]  # fmt: skip
        return self.found

    def add(self, path: Path, rule: str, message: str) -> None:
        """Record one violation at `path`."""
        self.found.append(PolicyViolation(pointer(path), rule, message))

    def schema(self, node: object, path: Path) -> None:
        """Check a value in schema position (a subschema)."""
        self.schemas.add(pointer(path))
        if isinstance(node, dict):
            for error in SHALLOW_META_VALIDATOR.iter_errors(node):
                self.add((*path, *error.absolute_path), "metaschema", error.message)
            for key, value in node.items():
                self.keyword(node, key, value, path)

    def keyword(self, node: dict[str, Any], key: str, value: Any, parent: Path) -> None:
        """Check one keyword of the schema at `parent`."""
        path = (*parent, key)
        if key.startswith("x-"):
            self.data(value, path)
        elif key not in KNOWN:
            self.add(path, "unknown-keyword", f"{key!r} is not a Draft 2020-12 keyword (use an x- prefix)")
        elif key in SCHEMA_MAPS or key in SCHEMA_LISTS or key in SCHEMA_SINGLE:
            self.subschemas(key, value, parent)
        elif key == "enum" and isinstance(value, list) and len(value) > self.policy.max_enum:
            self.found.append(enum_violation(pointer(path), len(value), self.policy))
        elif key in ANNOTATION_TEXT or key in DATA_VALUES:
            self.data(value, path)
        elif key == "pattern" and isinstance(value, str):
            self.pattern(value, path)
        else:
            self.core(key, value, parent)

    def subschemas(self, key: str, value: Any, parent: Path) -> None:
        """Descend into the subschemas of an applicator keyword."""
        if key in SCHEMA_SINGLE:
            children = [((*parent, key), value)]
        elif key in SCHEMA_LISTS and isinstance(value, list):
            children = [((*parent, key, index), sub) for index, sub in enumerate(value)]
        elif key in SCHEMA_MAPS and isinstance(value, dict):
            children = [((*parent, key, name), sub) for name, sub in value.items()]
            self.names(key, list(value), (*parent, key))
        else:
            return
        in_place = key in IN_PLACE_LISTS or key in IN_PLACE_MAPS or key in IN_PLACE_SINGLE
        for path, sub in children:
            if in_place:
                self.graph.link(pointer(parent), pointer(path))
            self.schema(sub, path)

    def names(self, key: str, names: list[str], path: Path) -> None:
        """Check property names (shown as labels) and ``patternProperties`` regexes."""
        for name in names:
            if key == "patternProperties":
                self.pattern(name, (*path, name))
            elif key in ("properties", "dependentSchemas"):
                self.text(name, (*path, name))

    def core(self, key: str, value: Any, parent: Path) -> None:
        """Check the identifier and reference keywords."""
        path = (*parent, key)
        if key == "$ref" and isinstance(value, str):
            self.refs.append((pointer(parent), value, pointer(path)))
        elif key == "$dynamicRef":
            self.add(path, "dynamic-ref", "$dynamicRef is not supported")
        elif key in ("$anchor", "$dynamicAnchor") and isinstance(value, str):
            self.anchors.setdefault(value, pointer(parent))
        elif key == "$id" and (parent or not (isinstance(value, str) and value.startswith("urn:"))):
            self.add(path, "id", "$id is allowed only at the root and only as a urn: (nothing is fetched)")
        elif key == "$schema" and (parent or not (isinstance(value, str) and value in DIALECTS)):
            self.add(path, "schema-dialect", "only the Draft 2020-12 $schema, at the root, is allowed")
        elif key == "$vocabulary":
            self.add(path, "vocabulary", "$vocabulary belongs in meta-schemas")

    def reference(self, source: str, ref: str, where: str) -> None:
        """Resolve one ``$ref`` locally and link it into the loop graph."""
        if not ref.startswith("#"):
            self.found.append(PolicyViolation(where, "ref-remote", f"{ref!r} is not a local reference"))
            return
        target = resolve(ref, self.anchors, self.schemas, self.root)
        if target is None:
            self.found.append(PolicyViolation(where, "ref-unresolvable", f"{ref!r} names no schema here"))
        else:
            self.graph.link(source, target, via_ref=where)

    def pattern(self, value: str, path: Path) -> None:
        """Check a regex."""
        if len(value) > self.policy.max_pattern_length:
            self.add(path, "max-pattern-length", f"longer than {self.policy.max_pattern_length} characters")
            return
        problem = pattern_problem(value)
        if problem is not None:
            self.add(path, *problem)

    def data(self, value: Any, path: Path) -> None:
        """Check every string (and object key) inside a JSON value for markup."""
        if isinstance(value, str):
            self.text(value, path)
        elif isinstance(value, list):
            for index, item in enumerate(value):
                self.data(item, (*path, index))
        elif isinstance(value, dict):
            for key, item in value.items():
                self.text(key, (*path, key))
                self.data(item, (*path, key))

    def text(self, value: str, path: Path) -> None:
        """Check one string for markup."""
        problem = markup_problem(value)
        if problem is not None:
            self.add(path, "markup", problem)


def enum_violation(where: str, size: int, policy: SchemaPolicy) -> PolicyViolation:
    """The ``max-enum`` violation, shared by both passes so that it is reported once."""
    return PolicyViolation(where, "max-enum", f"{size} entries, more than {policy.max_enum}")
