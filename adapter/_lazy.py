"""Names a package's door imports the first time they are named (PEP 562), one rule for every door that defers.

A door keeps a process that never names them from importing what they need (a database driver, an HTTP client):
`__getattr__, __dir__ = deferred(globals(), {"Name": "package.module", ...})`.
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
