"""RFC 6902 JSON Patch, applied to a copy: how STATE_DELTA events move the run's state.

Small on purpose: the adapter only needs to follow the state a backend streams, and adds no runtime
dependency for it.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from typing import Any, Final

from adapter._limits import depth_exceeds

_BAD_ESCAPE: Final = re.compile(r"~(?![01])")  # RFC 6901: "~" only as "~0" (a tilde) or "~1" (a slash)


class PatchError(ValueError):
    """A patch that does not apply to the document."""


def apply_patch(document: Any, patch: Sequence[Any], *, max_depth: int | None = None) -> Any:
    """Return `document` with `patch` applied; the input is never changed. Atomic: all or nothing.

    With `max_depth`, a value an operation puts at a place where the document would nest more than
    `max_depth` levels is refused. Only what is put is measured: removing never deepens a document,
    so one that starts within the limit stays within it.
    """
    result = copy.deepcopy(document)
    for operation in patch:
        if not isinstance(operation, dict) or not isinstance(operation.get("path"), str):
            raise PatchError(f"not a patch operation: {operation!r}")
        result = _apply(result, operation, max_depth)
    return result


def _fits(path: str, value: Any, max_depth: int | None) -> Any:
    """`value`, once it is known to fit at `path` within `max_depth` levels (the root is level 1)."""
    if max_depth is not None and depth_exceeds(value, max_depth - len(_tokens(path))):
        raise PatchError(f"the document would nest more than {max_depth} levels deep at {path!r}")
    return value


def _apply(document: Any, operation: dict[str, Any], max_depth: int | None) -> Any:
    op, path = operation.get("op"), operation["path"]
    if op == "test":
        if _get(document, path) != operation.get("value"):
            raise PatchError(f"test failed at {path}")
        return document
    if op in ("move", "copy"):
        source = operation.get("from")
        if not isinstance(source, str):
            raise PatchError(f"{op} needs 'from'")
        value = _fits(path, copy.deepcopy(_get(document, source)), max_depth)
        if op == "move":
            document = _remove(document, source)
        return _add(document, path, value)
    if op == "remove":
        return _remove(document, path)
    if "value" not in operation:
        raise PatchError(f"{op} needs 'value'")
    value = _fits(path, operation["value"], max_depth)
    if op == "add":
        return _add(document, path, copy.deepcopy(value))
    if op == "replace":
        _get(document, path)  # must exist
        return _add(_remove(document, path), path, copy.deepcopy(value)) if path else value
    raise PatchError(f"unknown op {op!r}")


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
    parent_path = "".join("/" + t.replace("~", "~0").replace("/", "~1") for t in tokens[:-1])
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
