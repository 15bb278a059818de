"""The size of a schema once every ``$ref`` is expanded: what evaluating it against one value can cost.

A validator that meets ``{"$ref": "#/$defs/a"}`` evaluates the schema the reference names, as if it were
written there. A 1 KB document whose levels each say ``allOf: [next, next]`` is a tree of 2^n schemas once
expanded, and costs that much to evaluate. `unfolded_size` counts the JSON values of that expanded tree
without building it: the size of each schema position is computed once (memoised), from the positions below
it and those its references name, so the count costs time linear in the document.

A reference inside a recursion (its target leads back to it, as a tree whose ``children`` are the tree
again) counts as itself, one value: evaluation follows it only as deep as the instance goes, and
`validate`'s step budget bounds what that costs. For a schema without recursion the count is exact, and
without references it is the number of JSON values (`SchemaPolicy.max_nodes` counts the same).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from schema_tools._keywords import SCHEMA_LISTS, SCHEMA_MAPS, SCHEMA_SINGLE
from schema_tools._pointer import pointer
from schema_tools._refs import resolve

__all__ = ["Unfolded", "unfolded_size"]

_REFS = ("$ref", "$dynamicRef")
_ANCHORS = ("$anchor", "$dynamicAnchor")


@dataclass(frozen=True)
class Unfolded:
    """What `unfolded_size` found.

    Attributes:
        size: JSON values once every reference is expanded, or ``limit + 1`` when that is more than the limit.
        where: The pointer of the smallest schema position found over the limit; ``None`` within it.
        work: Values, positions and edges visited: linear in the document, whatever it expands to.
    """

    size: int
    where: str | None
    work: int


@dataclass
class _Graph:
    """Schema positions (objects and booleans in schema position), their own values, children and references."""

    pointers: list[str] = field(default_factory=list)
    own: list[int] = field(default_factory=list)
    children: list[list[int]] = field(default_factory=list)
    refs: list[list[str]] = field(default_factory=list)
    anchors: dict[str, str] = field(default_factory=dict)
    work: int = 0

    def add(self, path: tuple[str | int, ...]) -> int:
        self.pointers.append(pointer(path))
        self.own.append(1)
        self.children.append([])
        self.refs.append([])
        return len(self.pointers) - 1


def unfolded_size(root: Mapping[str, Any] | bool, limit: int) -> Unfolded:
    """Count the JSON values of `root` with every local ``$ref`` replaced by the schema it names.

    Counting stops as soon as some position is over `limit`. A reference that names nothing (or nothing
    local) counts as itself; `check_schema` refuses it on its own.
    """
    graph = _walk(root)
    index = {where: number for number, where in enumerate(graph.pointers)}
    targets: list[list[int]] = []
    for refs in graph.refs:
        found = (resolve(ref, graph.anchors, index, root) if ref.startswith("#") else None for ref in refs)
        targets.append([index[where] for where in found if where is not None])
        graph.work += len(refs)
    component = _components([graph.children[n] + targets[n] for n in range(len(targets))])
    dag = [graph.children[n] + [t for t in targets[n] if component[t] != component[n]] for n in range(len(targets))]
    return _sizes(graph, dag, limit)


def _walk(root: Mapping[str, Any] | bool) -> _Graph:
    graph = _Graph()
    stack: list[tuple[Any, tuple[str | int, ...], int | None]] = [(root, (), None)]
    while stack:
        node, path, parent = stack.pop()
        graph.work += 1
        if not isinstance(node, dict | bool):
            assert parent is not None, "the root is an object or a boolean"
            graph.own[parent] += _values(node, graph)
            continue
        here = graph.add(path)
        if parent is not None:
            graph.children[parent].append(here)
        if isinstance(node, dict):
            stack += _keywords(node, path, here, graph)
    return graph


def _keywords(
    node: dict[str, Any], path: tuple[str | int, ...], here: int, graph: _Graph
) -> list[tuple[Any, tuple[str | int, ...], int | None]]:
    """Count the values of `node` that are not subschemas, and return its subschemas to walk."""
    below: list[tuple[Any, tuple[str | int, ...], int | None]] = []
    for key, value in node.items():
        if key in SCHEMA_SINGLE:
            below.append((value, (*path, key), here))
        elif key in SCHEMA_LISTS and isinstance(value, list):
            graph.own[here] += 1
            below += [(sub, (*path, key, number), here) for number, sub in enumerate(value)]
        elif key in SCHEMA_MAPS and isinstance(value, dict):
            graph.own[here] += 1
            below += [(sub, (*path, key, name), here) for name, sub in value.items()]
        else:
            graph.own[here] += _values(value, graph)
            if key in _REFS and isinstance(value, str):
                graph.refs[here].append(value)
            elif key in _ANCHORS and isinstance(value, str):
                graph.anchors.setdefault(value, pointer(path))
    return below


def _values(value: Any, graph: _Graph) -> int:
    """The JSON values in `value`, counted without recursion."""
    count, stack = 0, [value]
    while stack:
        item = stack.pop()
        count += 1
        if isinstance(item, dict):
            stack += item.values()
        elif isinstance(item, list):
            stack += item
    graph.work += count
    return count


def _components(edges: list[list[int]]) -> list[int]:
    """Each node's strongly connected component (Tarjan's algorithm, without recursion)."""
    order, low, component = [-1] * len(edges), [0] * len(edges), [-1] * len(edges)
    on_stack, stack, counter, found = [False] * len(edges), [], 0, 0
    for start in range(len(edges)):
        if order[start] != -1:
            continue
        order[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack[start] = True
        work = [(start, 0)]
        while work:
            node, at = work[-1]
            if at < len(edges[node]):
                work[-1] = (node, at + 1)
                target = edges[node][at]
                if order[target] == -1:
                    order[target] = low[target] = counter
                    counter += 1
                    stack.append(target)
                    on_stack[target] = True
                    work.append((target, 0))
                elif on_stack[target]:
                    low[node] = min(low[node], order[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == order[node]:
                while True:
                    member = stack.pop()
                    on_stack[member] = False
                    component[member] = found
                    if member == node:
                        break
                found += 1
    return component


def _sizes(graph: _Graph, dag: list[list[int]], limit: int) -> Unfolded:
    """Each position's unfolded size, children and named schemas first; the root's is the answer."""
    size = [-1] * len(dag)
    work = [(0, 0)]
    while work:
        node, at = work[-1]
        graph.work += 1
        if at < len(dag[node]):
            work[-1] = (node, at + 1)
            if size[dag[node][at]] < 0:
                work.append((dag[node][at], 0))
            continue
        work.pop()
        total = graph.own[node] + sum(size[below] for below in dag[node])
        if total > limit:
            return Unfolded(limit + 1, graph.pointers[node], graph.work)
        size[node] = total
    return Unfolded(size[0], None, graph.work)
