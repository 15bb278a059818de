"""Errors raised by schema_tools.

The hierarchy is small::

    SchemaToolsError
    ├── SchemaValidationError   an instance does not match a schema (issues: list[SchemaIssue])
    └── SchemaPolicyError       a schema may not be used (violations: list[PolicyViolation])
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["PolicyViolation", "SchemaIssue", "SchemaPolicyError", "SchemaToolsError", "SchemaValidationError"]

_MAX_LISTED = 10


@dataclass(frozen=True)
class SchemaIssue:
    """One reason why an instance does not match a schema.

    Attributes:
        pointer: JSON pointer into the instance (``""`` is the root). For ``required`` the pointer names the
            missing property itself, e.g. ``"/approved"``.
        keyword: The failing JSON Schema keyword, e.g. ``"required"`` or ``"type"``.
        message: A human-readable message.
    """

    pointer: str
    keyword: str
    message: str


@dataclass(frozen=True)
class PolicyViolation:
    """One reason why a schema is refused by `check_schema`.

    Attributes:
        pointer: JSON pointer into the schema (``""`` is the root).
        rule: A stable rule name, e.g. ``"html"``, ``"ref-remote"`` or ``"max-depth"``.
        message: A human-readable message.
    """

    pointer: str
    rule: str
    message: str


class SchemaToolsError(Exception):
    """Base class of every error schema_tools raises on purpose."""


class SchemaValidationError(SchemaToolsError, ValueError):
    """An instance does not match a schema."""

    def __init__(self, issues: Sequence[SchemaIssue]) -> None:
        self.issues = list(issues)
        super().__init__(_summary("invalid instance", [(i.pointer, i.message) for i in self.issues]))


class SchemaPolicyError(SchemaToolsError, ValueError):
    """A schema is refused; `violations` lists every reason."""

    def __init__(self, violations: Sequence[PolicyViolation]) -> None:
        self.violations = list(violations)
        super().__init__(_summary("schema refused", [(v.pointer, f"{v.rule}: {v.message}") for v in self.violations]))


def _summary(head: str, items: list[tuple[str, str]]) -> str:
    lines = [f"{head} ({len(items)} problem{'s' if len(items) != 1 else ''})"]
    lines += [f"  at {pointer or '(root)'}: {_clip(message)}" for pointer, message in items[:_MAX_LISTED]]
    if len(items) > _MAX_LISTED:
        lines.append(f"  ... and {len(items) - _MAX_LISTED} more")
    return "\n".join(lines)


def _clip(message: str, limit: int = 200) -> str:
    return message if len(message) <= limit else message[: limit - 3] + "..."
