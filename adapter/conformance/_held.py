"""`held`: the bytes a value really takes in this process, for bounds that must hold whatever arrives.

A bound on JSON text lets the objects parsed from it grow several times larger: the reference agent kept about
250 MiB under two 64 MiB budgets of text. So the kit and the reference agent count what they keep with `held`,
the `sys.getsizeof` of the value and of everything it reaches (dicts, lists, tuples, sets, strings, bytes,
dataclasses with or without slots, pydantic models), each object once, in time linear in their number.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

_SHARED = (type(None), bool, type, type(sys))  # singletons, classes and modules: not the value's own


def held(value: Any) -> int:
    """The bytes `value` and what it reaches take, each object counted once."""
    seen: set[int] = set()
    total = 0
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, _SHARED) or id(item) in seen:
            continue
        seen.add(id(item))
        total += sys.getsizeof(item)
        if isinstance(item, str | bytes | bytearray | int | float):
            continue
        if isinstance(item, Mapping):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple | set | frozenset):
            stack.extend(item)
        else:
            stack.extend(_attributes(item))
    return total


def _attributes(item: Any) -> list[Any]:
    """An object's own state: its `__dict__` (counted as the dict it is) and its slots."""
    found: list[Any] = []
    own = getattr(item, "__dict__", None)
    if isinstance(own, dict):
        found.append(own)
    for cls in type(item).__mro__:
        slots = cls.__dict__.get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name not in ("__dict__", "__weakref__") and hasattr(item, name):
                found.append(getattr(item, name))
    return found
