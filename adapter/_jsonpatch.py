"""RFC 6902 JSON Patch, applied to a copy: how STATE_DELTA events move the run's state.

Small on purpose: the adapter only needs to follow the state a backend streams, and adds no runtime
dependency for it.

Applying a patch costs at most about `max_bytes` of work, whoever sends it: the document and every value an
operation adds or copies are measured (`_Budget`) before they are copied, and a patch that would exceed the budget
is refused with `PatchTooLarge` before the copy is made. Twenty `copy` operations that each double the document
would otherwise build millions of values.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Sequence
from typing import Any, Final

from adapter._errors import STATE_PATCH_TOO_LARGE
from adapter._limits import depth_exceeds

_BAD_ESCAPE: Final = re.compile(r"~(?![01])")  # RFC 6901: "~" only as "~0" (a tilde) or "~1" (a slash)
MAX_PATCHED_BYTES: Final = 8 * 1024 * 1024
"""The default budget of one patch: the document plus what it adds or copies, measured as `_Budget` does."""
_VALUE_COST: Final = 16
"""What each value (and each object member) counts besides its text: copying many tiny values is not free."""


class PatchError(ValueError):
    """A patch that does not apply to the document."""


class PatchTooLarge(PatchError):
    """A patch whose result would exceed the budget; refused before the copy that would exceed it."""

    code = STATE_PATCH_TOO_LARGE


class _Budget:
    """What a patch may still build: about the bytes of its JSON, each value counting `_VALUE_COST` more."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.left = limit

    def spend(self, value: Any) -> None:
        """Count `value` against the budget, walking no more of it than the budget has left."""
        stack = [value]
        while stack:
            node = stack.pop()
            self.left -= _VALUE_COST
            if isinstance(node, str):
                self.left -= len(node)
            elif isinstance(node, dict):
                self.left -= sum(len(key) + _VALUE_COST for key in node)
                stack.extend(node.values())
            elif isinstance(node, list):
                stack.extend(node)
            if self.left < 0:
                raise PatchTooLarge(f"the patched state would exceed {self.limit} bytes")


def apply_patch(
    document: Any, patch: Sequence[Any], *, max_depth: int | None = None, max_bytes: int = MAX_PATCHED_BYTES
) -> Any:
    """Return `document` with `patch` applied; the input is never changed. Atomic: all or nothing.

    With `max_depth`, a value an operation puts at a place where the document would nest more than
    `max_depth` levels is refused. Only what is put is measured: removing never deepens a document,
    so one that starts within the limit stays within it.

    Raises:
        PatchTooLarge: The document and the values the patch adds or copies exceed `max_bytes`.
        PatchError: The patch does not apply.
    """
    budget = _Budget(max_bytes)
    budget.spend(document)
    result = copy.deepcopy(document)
    for operation in patch:
        if not isinstance(operation, dict) or not isinstance(operation.get("path"), str):
            raise PatchError(f"not a patch operation: {operation!r}")
        result = _apply(result, operation, max_depth, budget)
    return result


def _fits(path: str, value: Any, max_depth: int | None) -> Any:
    """`value`, once it is known to fit at `path` within `max_depth` levels (the root is level 1)."""
    if max_depth is not None and depth_exceeds(value, max_depth - len(_tokens(path))):
        raise PatchError(f"the document would nest more than {max_depth} levels deep at {path!r}")
    return value


def _apply(document: Any, operation: dict[str, Any], max_depth: int | None, budget: _Budget) -> Any:
    op, path = operation.get("op"), operation["path"]
    if op == "test":
        if _get(document, path) != operation.get("value"):
            raise PatchError(f"test failed at {path}")
        return document
    if op in ("move", "copy"):
        source = operation.get("from")
        if not isinstance(source, str):
            raise PatchError(f"{op} needs 'from'")
        value = _fits(path, _get(document, source), max_depth)
        if op == "move":
            return _add(_remove(document, source), path, value)  # the value leaves its place: no copy
        budget.spend(value)
        return _add(document, path, copy.deepcopy(value))
    if op == "remove":
        return _remove(document, path)
    if "value" not in operation:
        raise PatchError(f"{op} needs 'value'")
    value = _fits(path, operation["value"], max_depth)
    budget.spend(value)
    if op == "add":
        return _add(document, path, copy.deepcopy(value))
    if op == "replace":
        _get(document, path)  # must exist
        return _add(_remove(document, path), path, copy.deepcopy(value)) if path else copy.deepcopy(value)
    raise PatchError(f"unknown op {op!r}")


def pointer(tokens: Iterable[str]) -> str:
    """The JSON pointer (RFC 6901) of a path of member names and indices; `""` for the whole document."""
    return "".join("/" + token.replace("~", "~0").replace("/", "~1") for token in tokens)


def _tokens(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/") or _BAD_ESCAPE.search(path):
        raise PatchError(f"not a JSON pointer: {path!r}")
    return [token.replace("~1", "/").replace("~0", "~") for token in path[1:].split("/")]


def _index(container: list[Any], token: str, *, append: bool = False) -> int:
    if append and token == "-":
        return len(container)
    if not token.isdigit() or (len(token) > 1 and token.startswith("0")):
        raise PatchError(f"not an array index: {token!r}")
    index = int(token)
    if index > len(container) or (index == len(container) and not append):
        raise PatchError(f"index {index} out of range")
    return index


def _get(document: Any, path: str) -> Any:
    node = document
    for token in _tokens(path):
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list):
            node = node[_index(node, token)]
        else:
            raise PatchError(f"no value at {path}")
    return node


def _parent(document: Any, path: str) -> tuple[Any, str]:
    tokens = _tokens(path)
    parent_path = pointer(tokens[:-1])
    return _get(document, parent_path), tokens[-1]


def _add(document: Any, path: str, value: Any) -> Any:
    if path == "":
        return value
    parent, token = _parent(document, path)
    if isinstance(parent, dict):
        parent[token] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, token, append=True), value)
    else:
        raise PatchError(f"cannot add at {path}")
    return document


def _remove(document: Any, path: str) -> Any:
    if path == "":
        raise PatchError("cannot remove the whole document")
    parent, token = _parent(document, path)
    if isinstance(parent, dict) and token in parent:
        del parent[token]
    elif isinstance(parent, list):
        del parent[_index(parent, token)]
    else:
        raise PatchError(f"no value at {path}")
    return document
