"""A small Google-style docstring reader: the prose, and the ``Args:`` descriptions."""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass, field

__all__ = ["Docstring", "parse_docstring"]

_ARG_SECTIONS = frozenset({"args", "arguments", "parameters", "params", "keyword args", "keyword arguments"})
_DROPPED_SECTIONS = _ARG_SECTIONS | {"returns", "return", "yields", "yield", "raises", "except", "exceptions"}
_SECTION = re.compile(r"^([A-Za-z][A-Za-z ]*):\s*$")
_ARG = re.compile(r"^\s*\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


@dataclass(frozen=True)
class Docstring:
    """The parts of a docstring a tool schema uses."""

    description: str
    params: dict[str, str] = field(default_factory=dict)


def parse_docstring(doc: str | None) -> Docstring:
    """Split `doc` into its prose and its ``Args:`` entries.

    The ``Args``, ``Returns``, ``Yields`` and ``Raises`` sections are left out of the description; every
    other section (``Example:``, ``Note:`` ...) is kept verbatim. A section ends at the next line that
    is not indented.
    """
    kept: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    body: list[str] = []
    for line in inspect.cleandoc(doc or "").splitlines():
        header = _SECTION.match(line)
        if header or (section is not None and line and not line[0].isspace()):
            _close(section, body, params)
            section, body = None, []
            if header and header.group(1).lower() in _DROPPED_SECTIONS:
                section = header.group(1).lower()
                continue
        (kept if section is None else body).append(line)
    _close(section, body, params)
    return Docstring("\n".join(kept).strip(), params)


def _close(section: str | None, body: list[str], params: dict[str, str]) -> None:
    if section in _ARG_SECTIONS:
        params.update(_parse_args(body))


def _parse_args(body: list[str]) -> dict[str, str]:
    params: dict[str, list[str]] = {}
    current: list[str] | None = None
    indent: int | None = None
    for line in body:
        if not line.strip():
            continue
        depth = len(line) - len(line.lstrip())
        match = _ARG.match(line)
        if match and (indent is None or depth <= indent):
            indent = depth
            current = params.setdefault(match.group(1), [])
            current.append(match.group(2).strip())
        elif current is not None:
            current.append(line.strip())
    return {name: " ".join(part for part in parts if part) for name, parts in params.items()}
