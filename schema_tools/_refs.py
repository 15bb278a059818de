"""Local ``$ref`` resolution and detection of reference loops, without fetching anything."""

from __future__ import annotations

from collections.abc import Container, Mapping
from dataclasses import dataclass, field
from urllib.parse import unquote

from schema_tools._pointer import unescape

__all__ = ["RefGraph", "resolve"]


def resolve(ref: str, anchors: Mapping[str, str], schemas: Container[str], root: object) -> str | None:
    """Return the pointer of the schema that local `ref` names, or ``None`` when there is none.

    Accepted forms: ``"#"``, ``"#/json/pointer"`` (percent-decoded, then RFC 6901) and ``"#anchor"``.
    The target must be a schema position, not any JSON value (``"#/properties"`` names a map).
    """
    fragment = unquote(ref[1:])
    if fragment and not fragment.startswith("/"):
        return anchors.get(fragment)
    node = root
    for token in (unescape(part) for part in fragment.split("/")[1:]):
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return None
    return fragment if fragment in schemas else None


@dataclass
class RefGraph:
    """Schema positions linked by "applies to the same instance": in-place applicators and ``$ref``.

    A cycle in this graph never consumes any of the instance, so evaluating it never ends.
    """

    edges: dict[str, list[tuple[str, str | None]]] = field(default_factory=dict)

    def link(self, source: str, target: str, via_ref: str | None = None) -> None:
        """Add an edge; `via_ref` is the pointer of the ``$ref`` keyword when the edge is a reference."""
        self.edges.setdefault(source, []).append((target, via_ref))

    def loops(self) -> list[str]:
        """Return, for each cycle found, the pointer of a ``$ref`` keyword that closes it."""
        found: list[str] = []
        state: dict[str, int] = {}  # 1: on the current path, 2: done
        for start in list(self.edges):
            if start not in state:
                self._search(start, state, found)
        return found

    def _search(self, start: str, state: dict[str, int], found: list[str]) -> None:
        path: list[tuple[str, str | None]] = [(start, None)]
        stack = [iter(self.edges.get(start, ()))]
        state[start] = 1
        while stack:
            step = next(stack[-1], None)
            if step is None:
                state[path.pop()[0]] = 2
                stack.pop()
                continue
            target, via = step
            if state.get(target) == 1:
                entry = next(index for index, (node, _) in enumerate(path) if node == target)
                cycle = [edge for _, edge in path[entry + 1 :]] + [via]
                found.append(next((ref for ref in cycle if ref is not None), target))
            elif target not in state:
                state[target] = 1
                path.append((target, via))
                stack.append(iter(self.edges.get(target, ())))
