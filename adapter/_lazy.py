"""What is imported the first time it is used: a door's names (PEP 562), and a module a plain run never executes.

A door keeps a process that never names them from importing what they need (a database driver, an HTTP client):
`__getattr__, __dir__ = deferred(globals(), {"Name": "package.module", ...})`. A module that imports the whole of
another which a plain run never needs (the thread API, reattaching, the inspector) holds it as
`module = on_first_use(globals(), "package.module")`: a stand-in whose first use imports the module and puts it in
its place, so that the module is a global resolved once.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any


def deferred(
    namespace: MutableMapping[str, Any], lazy: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A module's `__getattr__` and `__dir__` for the names in `lazy`, each imported from its module when first named.

    Once imported, a name is kept in `namespace` (the door's globals), so the next use does not come here.
    """
    door = namespace["__name__"]

    def __getattr__(name: str) -> Any:
        module = lazy.get(name)
        if module is None:
            raise AttributeError(f"module {door!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *lazy})

    return __getattr__, __dir__


def on_first_use(namespace: MutableMapping[str, Any], name: str) -> Any:
    """Stand for the module `name` in `namespace` (a module's globals) until one of its attributes is first read.

    The stand-in is meant to be bound to the module's own last name (`_thread_api = on_first_use(globals(),
    "adapter._sessions._thread_api")`). Its first attribute read imports the module (under the import system's lock,
    so from any thread) and binds the module there in its place: every later read is a plain global's.
    """
    return _StandIn(namespace, name)


class _StandIn:
    """A module not yet imported, in the namespace that names it (`on_first_use`)."""

    __slots__ = ("_namespace", "_name")

    def __init__(self, namespace: MutableMapping[str, Any], name: str) -> None:
        self._namespace = namespace
        self._name = name

    def __getattr__(self, attribute: str) -> Any:
        module = importlib.import_module(self._name)
        self._namespace[self._name.rpartition(".")[2]] = module
        return getattr(module, attribute)

    def __repr__(self) -> str:
        return f"<module {self._name!r}, imported on first use>"
