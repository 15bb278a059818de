"""`SchemaPolicy`: the limits and switches `check_schema` applies to a schema from outside."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_POLICY", "STRICT_TOOL_POLICY", "SchemaPolicy"]


@dataclass(frozen=True)
class SchemaPolicy:
    """Limits and switches for `check_schema`.

    Attributes:
        max_bytes: Largest size of the schema as compact UTF-8 JSON, or ``None`` for no byte limit.
        max_depth: Deepest nesting of JSON objects and arrays; the root object is depth 1.
        max_nodes: Most JSON values (objects, arrays, strings, numbers, booleans, nulls) in the schema.
        max_enum: Most entries in one ``enum``.
        max_string_length: Longest string anywhere in the schema, object keys included.
        max_pattern_length: Longest ``pattern`` or ``patternProperties`` key.
        max_expansion: Most JSON values once every ``$ref`` is replaced by the schema it names (see
            ``schema_tools._expansion``): what evaluating the schema against one value may cost. A 1 KB
            schema whose levels each say ``allOf: [next, next]`` is 2^n values once expanded.
        require_object_root: The root must declare ``"type": "object"``.
    """

    max_bytes: int | None = None
    max_depth: int = 32
    max_nodes: int = 10_000
    max_enum: int = 1_000
    max_string_length: int = 10_000
    max_pattern_length: int = 1_000
    max_expansion: int = 100_000
    require_object_root: bool = False


DEFAULT_POLICY = SchemaPolicy()
"""For schemas the server registers itself (form schemas, backend tool parameters)."""

STRICT_TOOL_POLICY = SchemaPolicy(
    max_bytes=64 * 1024,
    max_depth=16,
    max_nodes=2_000,
    max_enum=256,
    max_string_length=4_000,
    max_pattern_length=256,
    max_expansion=10_000,
    require_object_root=True,
)
"""For untrusted schemas, such as the tool parameters a client sends in ``RunAgentInput.tools``."""
