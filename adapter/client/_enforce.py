"""AG-UI 1.1's processing model for the events the client hands on: unrecognised material is not an error.

A malformed known value is. An event of a type the protocol's models do not describe is dropped, with a warning
naming the type. A member of a union the models do not describe (an outcome named after them, a content part of
a new kind) is stripped where it stands, with a warning naming its path: from its field, or from its list. A
property the models do not describe is stripped from the event handed on, with a warning naming its path; the
open objects (`metadata`, `state`, `value`, a patch's operations) are not models, so what they carry is kept. A
known field with a value the models reject is fatal (EVT-2). The raw event stays in `Run.wire`, as it was sent.
"""

from __future__ import annotations

import copy
import re
from typing import Any, Final

from ag_ui.core import BaseEvent, Event, EventType
from pydantic import BaseModel, TypeAdapter, ValidationError

_EVENT: Final[TypeAdapter[Any]] = TypeAdapter(Event)
KNOWN_TYPES: Final = frozenset(kind.value for kind in EventType)
READS: Final = (1, 1)
"""The protocol version whose processing model the client follows; a producer declaring a newer one is read under
it, with a warning (AG-UI 1.1, Versioning)."""
_VERSION = re.compile(r"(\d{1,9})\.(\d{1,9})(?:\.\d{1,9})?")
_ADDED_IN_1_1: Final = frozenset({"encryptedValueType"})
"""What AG-UI 1.1 adds beside every `encryptedValue` (the event, a message, a tool call), which the 1.0 models this
client is written in do not describe: kept, since 1.1 has a consumer store and return it with the value."""
_PATCHES: Final = {"STATE_DELTA": "delta", "ACTIVITY_DELTA": "patch"}
"""The events that carry a JSON Patch, and its field: a patch operation is an open object (RFC 6902 section 4 has
it ignore members it does not define), so what it carries besides is kept; an unknown `op` is still stripped."""
_MAX_STRIPS = 32  # union members stripped from one event before it is judged malformed


class Enforced:
    """One event as the client hands it on: its model (None when dropped or malformed), warnings, the problem."""

    __slots__ = ("model", "problem", "warnings")

    def __init__(self, model: BaseEvent | None, warnings: list[str], problem: str | None = None) -> None:
        self.model = model
        self.warnings = warnings
        self.problem = problem


def enforce(event: dict[str, Any]) -> Enforced:
    """The event as application code may see it (see the module docstring)."""
    kind = event.get("type")
    if isinstance(kind, str) and kind not in KNOWN_TYPES:
        return Enforced(None, [f"dropped an event of unrecognised type {kind!r}"])
    value, warnings = event, list[str]()
    for _ in range(_MAX_STRIPS):
        try:
            model: BaseEvent = _EVENT.validate_python(value)
        except ValidationError as error:
            members = [e["loc"][1:] for e in error.errors() if e["type"] == "union_tag_invalid" and len(e["loc"]) > 1]
            if not members:
                where = "; ".join(f"{'/'.join(map(str, e['loc'][1:]))}: {e['msg']}" for e in error.errors()[:2])
                return Enforced(None, warnings, where)
            value = copy.deepcopy(value) if value is event else value
            for loc in members:
                path = _strip(value, loc)
                warnings.append(f"stripped {path}: an unrecognised union member")
            continue
        open_field = _PATCHES.get(str(getattr(model.type, "value", model.type)))
        stripped = _strip_extras(model, "", open_field=open_field)
        warnings += [f"stripped {path}: an undescribed property" for path in stripped]
        return Enforced(model, warnings)
    return Enforced(None, warnings, "too many unrecognised union members")


PATCH_OPS: Final = frozenset({"add", "remove", "replace", "move", "copy", "test"})
"""The operations RFC 6902 defines; another `op` is an unrecognised union member of the patch."""


def known_operations(delta: Any) -> tuple[list[Any], list[int]]:
    """A raw JSON Patch's operations RFC 6902 defines, and the positions of those left out.

    An operation whose `op` names no operation is dropped, and the rest of the patch applies (AG-UI 1.1,
    snapshots); `enforce` strips it from the event it hands on, as the unrecognised union member it is.
    """
    if not isinstance(delta, list):
        return delta, []
    dropped = [i for i, op in enumerate(delta) if isinstance(op, dict) and op.get("op") not in PATCH_OPS]
    return [op for i, op in enumerate(delta) if i not in dropped], dropped


def version_warning(declared: object) -> str | None:
    """What to say of a producer's `RUN_STARTED.protocolVersion`: nothing for 1.1 or older, else how it is read."""
    if not isinstance(declared, str):
        return None  # absent: a pre-versioning peer, read as it is
    found = _VERSION.fullmatch(declared)
    reads = ".".join(map(str, READS))
    if found is None:
        return f"cannot interpret the producer's protocolVersion {declared[:40]!r}: read as newer than {reads}"
    if (int(found[1]), int(found[2])) > READS:
        return f"the producer declares protocolVersion {declared}, newer than {reads}: read under {reads}'s rules"
    return None


def _strip(value: Any, loc: tuple[Any, ...]) -> str:
    """Remove what `loc` (a pydantic location, union branch labels among its keys) names; its JSON path."""
    parent: Any = None
    key: Any = None
    path, here = "", value
    for part in loc:
        if isinstance(here, dict) and part in here:
            parent, key, here = here, part, here[part]
        elif isinstance(here, list) and isinstance(part, int) and 0 <= part < len(here):
            parent, key, here = here, part, here[part]
        else:
            continue  # a union branch's label, not a key of the JSON
        path += f"/{key}"
    if isinstance(parent, dict):
        parent.pop(key, None)
    elif isinstance(parent, list) and isinstance(key, int):
        del parent[key]
    return path or "/"


def _strip_extras(model: BaseModel, path: str, *, open_field: str | None = None) -> list[str]:
    """Remove the properties no model describes, everywhere in `model` but its `open_field`; their paths."""
    found: list[str] = []
    extra = model.__pydantic_extra__
    if extra:
        described = _ADDED_IN_1_1 if "encrypted_value" in type(model).model_fields else frozenset()
        for name in [name for name in extra if name not in described]:
            found.append(f"{path}/{name}")
            del extra[name]
    for name, field in type(model).model_fields.items():
        if name != open_field:
            found += _in_value(getattr(model, name), f"{path}/{field.alias or name}")
    return found


def _in_value(value: Any, path: str) -> list[str]:
    if isinstance(value, BaseModel):
        return _strip_extras(value, path)
    if isinstance(value, list):
        return [found for index, item in enumerate(value) for found in _in_value(item, f"{path}/{index}")]
    return []
