"""RFC 6902 JSON Patch: how STATE_DELTA events move the run's state, each patch costing in proportion to itself.

Small on purpose: the adapter only needs to follow the state a backend streams, and adds no runtime
dependency for it.

    PatchedDocument   a document changed in place, atomically, its size kept as patches apply
    StateWork         what copying and measuring cost, and the part that counts against a limit
    apply_patch       one patch applied to a copy (the client's view of a stream, a tool's patch)

A `PatchedDocument` owns its value (it copies a shared one before its first change), so a patch changes
it in place: its cost is the patch's values, measured and copied once, plus the path it walks, whatever
the size of the document. A value a patch removes or replaces is measured to keep the size: each value
is removed at most once after it entered, so that work is at most what entered the document. What is not
in proportion to the patch (copying a shared document before its first change, the values `copy`
operations duplicate) is charged to a `StateWork` budget, and refused with `PatchTooLarge` before the copy.

The size counts a value's JSON text about as `_measure` does, each value `_VALUE_COST` more; a change that
would make it exceed `max_bytes` is refused before anything is copied. Twenty `copy` operations that each
double the document would otherwise build millions of values.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

from adapter._errors import STATE_PATCH_TOO_LARGE
from adapter._limits import depth_exceeds

_BAD_ESCAPE: Final = re.compile(r"~(?![01])")  # RFC 6901: "~" only as "~0" (a tilde) or "~1" (a slash)
MAX_PATCHED_BYTES: Final = 8 * 1024 * 1024
"""The default size a patched document may reach, measured as `_measure` does."""
WORK_FACTOR: Final = 8
"""The copying a `StateWork` allows beyond what patches bring, as a multiple of `max_bytes`."""
_VALUE_COST: Final = 16
"""What each value (and each object member) counts besides its text: copying many tiny values is not free."""


class PatchError(ValueError):
    """A patch that does not apply to the document."""


class PatchTooLarge(PatchError):
    """A patch whose result, or whose copying, would exceed its budget; refused before the copy that would."""

    code = STATE_PATCH_TOO_LARGE


class StateWork:
    """The copying and measuring that state changes do, in units of `_measure`.

    `measured` and `copied` count all of it; `charged` counts what is not in proportion to a patch (a
    shared document copied before its first change, the values `copy` operations duplicate), which may not
    pass `limit`.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.measured = 0
        self.copied = 0
        self.charged = 0

    def charge(self, units: int) -> None:
        """Count `units` of copying against the limit, before it is done.

        Raises:
            PatchTooLarge: They would pass the limit.
        """
        if self.charged + units > self.limit:
            raise PatchTooLarge(f"the state changes would copy more than {self.limit} bytes")
        self.charged += units

    def measure(self, value: Any, cap: int | None = None) -> int:
        """`_measure(value, cap)`, counted."""
        size = _measure(value, cap)
        self.measured += size
        return size

    def copy(self, value: Any, size: int) -> Any:
        """A deep copy of `value`, whose measured size is `size`, counted."""
        self.copied += size
        return copy.deepcopy(value)


def _measure(value: Any, cap: int | None = None) -> int:
    """About the bytes of `value`'s JSON, each value and member counting `_VALUE_COST` more.

    With `cap`, the walk stops once the count passes it, and returns that count: measuring a value that
    would not fit costs no more than the room there was.
    """
    size, stack = 0, [value]
    while stack:
        node = stack.pop()
        size += _VALUE_COST
        if isinstance(node, str):
            size += len(node)
        elif isinstance(node, dict):
            size += sum(len(key) + _VALUE_COST for key in node)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
        if cap is not None and size > cap:
            return size
    return size


Undo = Callable[[], None]


class PatchedDocument:
    """A JSON document changed in place by patches, atomically; `value` is the document as it stands.

    Built `owned`, the value is this document's to change (a copy its caller made); otherwise it is shared,
    and the first change copies it, charged to `work`. Its size is measured once, at the first patch, and
    then kept from what each operation adds and removes.
    """

    def __init__(
        self, value: Any, *, max_bytes: int = MAX_PATCHED_BYTES, work: StateWork | None = None, owned: bool = False
    ) -> None:
        self.value = value
        self.max_bytes = max_bytes
        self.work = work if work is not None else StateWork(WORK_FACTOR * max_bytes)
        self._owned = owned
        self._size: int | None = None
        self.changed = False
        """True once a patch applied or the document was reset: `value` is then this document's own."""

    @property
    def size(self) -> int:
        """The document's size as `_measure` counts it (measured at most once, up to just past `max_bytes`)."""
        if self._size is None:
            self._size = self.work.measure(self.value, self.max_bytes)
        return self._size

    def reset(self, value: Any, *, owned: bool) -> None:
        """Make `value` the whole document, as a STATE_SNAPSHOT does."""
        self.value, self._owned, self._size = value, owned, None
        self.changed = True

    def apply(self, patch: Sequence[Any], *, max_depth: int | None = None) -> None:
        """Apply `patch` in place: all of it, or none of it (a refused patch leaves the value as it was).

        A member that a failed patch removed comes back at the end of its object (JSON objects have no order).
        With `max_depth`, a value put where the document would nest more than `max_depth` levels is refused.
        While a patch applies, what it removes still counts against `max_bytes` (it is measured only once the
        patch has applied, so that a patch that fails costs no more than itself).

        Raises:
            PatchTooLarge: The document would exceed `max_bytes`, or the copying would exceed `work`'s limit.
            PatchError: The patch does not apply.
        """
        if self.size > self.max_bytes:
            raise PatchTooLarge(f"the patched state would exceed {self.max_bytes} bytes")
        if not patch:
            return
        if not self._owned:
            self.work.charge(self.size)
            self.value, self._owned = self.work.copy(self.value, self.size), True
        before, applying = self.size, _Applying(max_depth)
        try:
            for operation in patch:
                if not isinstance(operation, dict) or not isinstance(operation.get("path"), str):
                    raise PatchError(f"not a patch operation: {operation!r}")
                self._operation(operation, applying)
        except PatchError:
            for step in reversed(applying.undo):
                step()
            self._size = before
            raise
        self._size = self.size - sum(self.work.measure(value) for value in applying.removed)
        self.changed = True

    def _operation(self, operation: dict[str, Any], applying: _Applying) -> None:
        op, path = operation.get("op"), operation["path"]
        if op == "test":
            if _get(self.value, path) != operation.get("value"):
                raise PatchError(f"test failed at {path}")
        elif op == "remove":
            if path == "":
                raise PatchError("cannot remove the whole document")
            value, place = self._take(path, applying)
            applying.removed.append(value)
            self._size = self.size - place
        elif op in ("move", "copy"):
            source = operation.get("from")
            if not isinstance(source, str):
                raise PatchError(f"{op} needs 'from'")
            if op == "move":
                self._move(source, path, applying)
            else:
                self._add(path, applying.fits(path, _get(self.value, source)), applying, charged=True)
        elif op in ("add", "replace"):
            if "value" not in operation:
                raise PatchError(f"{op} needs 'value'")
            if op == "replace":
                _get(self.value, path)  # must exist
            value = applying.fits(path, operation["value"])
            self._add(path, value, applying, charged=False, replace=op == "replace")
        else:
            raise PatchError(f"unknown op {op!r}")

    def _resize(self, size: int) -> None:
        self._size = size
        if size > self.max_bytes:
            raise PatchTooLarge(f"the patched state would exceed {self.max_bytes} bytes")

    def _add(self, path: str, value: Any, applying: _Applying, *, charged: bool, replace: bool = False) -> None:
        """Put a copy of `value` at `path`, measured first: one that would not fit is refused before it is copied."""
        room = self.max_bytes - (0 if path == "" else self.size)
        size = self.work.measure(value, max(room, 0))
        if size > room:
            raise PatchTooLarge(f"the patched state would exceed {self.max_bytes} bytes")
        if charged:
            self.work.charge(size)
        place = self._put(path, self.work.copy(value, size), applying, replace=replace)
        self._resize(size if place is None else self.size + size + place)

    def _move(self, source: str, path: str, applying: _Applying) -> None:
        """Move the value at `source` to `path`: it is neither copied nor measured, only its place is counted."""
        if source == "":
            raise PatchError("cannot move the whole document")
        if path == source:
            _get(self.value, source)
            return
        if path.startswith(source + "/"):
            raise PatchError(f"cannot move {source!r} into itself ({path!r})")
        value, taken = self._take(source, applying)
        place = self._put(path, applying.fits(path, value), applying)
        if place is None:  # the value is the whole document now: measured, as what is not in the patch
            size = self.work.measure(value)
            self.work.charge(size)
            self._resize(size)
        else:
            self._resize(self.size - taken + place)

    def _put(self, path: str, value: Any, applying: _Applying, *, replace: bool = False) -> int | None:
        """Put `value` at `path`; what its place adds to the size (None: it is the whole document now).

        A member it replaces (any value at `path`, with `replace`) is removed, measured once the patch has applied.
        """
        if path == "":
            old_root = self.value
            self.value = value

            def restore() -> None:
                self.value = old_root

            applying.undo.append(restore)
            applying.removed.clear()  # whatever the patch removed was part of the old document
            return None
        parent, token = _parent(self.value, path)
        if isinstance(parent, dict):
            if token in parent:
                old = parent[token]
                parent[token] = value
                applying.undo.append(lambda: parent.__setitem__(token, old))
                applying.removed.append(old)
                return 0
            parent[token] = value
            applying.undo.append(lambda: parent.__delitem__(token))
            return len(token) + _VALUE_COST
        if isinstance(parent, list) and replace:
            index = _index(parent, token)
            old = parent[index]
            parent[index] = value
            applying.undo.append(lambda: parent.__setitem__(index, old))
            applying.removed.append(old)
            return 0
        if isinstance(parent, list):
            index = _index(parent, token, append=True)
            parent.insert(index, value)
            applying.undo.append(lambda: parent.__delitem__(index))
            return 0
        raise PatchError(f"cannot add at {path}")

    def _take(self, path: str, applying: _Applying) -> tuple[Any, int]:
        """Take the value at `path` out; return it and what its place (an object member's key) counted."""
        parent, token = _parent(self.value, path)
        if isinstance(parent, dict) and token in parent:
            value = parent.pop(token)
            applying.undo.append(lambda: parent.__setitem__(token, value))
            return value, len(token) + _VALUE_COST
        if isinstance(parent, list):
            index = _index(parent, token)
            value = parent.pop(index)
            applying.undo.append(lambda: parent.insert(index, value))
            return value, 0
        raise PatchError(f"no value at {path}")


class _Applying:
    """One patch as it applies: how to undo each change, and the values it removed."""

    def __init__(self, max_depth: int | None) -> None:
        self.max_depth = max_depth
        self.undo: list[Undo] = []
        self.removed: list[Any] = []

    def fits(self, path: str, value: Any) -> Any:
        """`value`, once it is known to fit at `path` within `max_depth` levels (the root is level 1)."""
        if self.max_depth is not None and depth_exceeds(value, self.max_depth - len(_tokens(path))):
            raise PatchError(f"the document would nest more than {self.max_depth} levels deep at {path!r}")
        return value


def apply_patch(
    document: Any, patch: Sequence[Any], *, max_depth: int | None = None, max_bytes: int = MAX_PATCHED_BYTES
) -> Any:
    """Return `document` with `patch` applied; the input is never changed. Atomic: all or nothing.

    With `max_depth`, a value an operation puts at a place where the document would nest more than
    `max_depth` levels is refused. Only what is put is measured: removing never deepens a document,
    so one that starts within the limit stays within it.

    Raises:
        PatchTooLarge: The patched document would exceed `max_bytes`, or the patch would copy more than that.
        PatchError: The patch does not apply.
    """
    target = PatchedDocument(document, max_bytes=max_bytes, work=StateWork(max_bytes))
    target.apply(patch, max_depth=max_depth)
    return target.value if patch else copy.deepcopy(document)


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
    return _get(document, pointer(tokens[:-1])), tokens[-1]
