"""What is imported the first time it is used: a door's names (PEP 562), and a module a plain run never executes.

A door keeps a process that never names them from importing what they need (a database driver, an HTTP client):
`__getattr__, __dir__ = deferred(globals(), {"Name": "package.module", ...})`. A module that imports the whole of
another which a plain run never needs (the thread API, reattaching, the inspector) holds it as
`name = on_first_use("package.module")`: its attribute, resolved once, whose first use executes the module.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable, Mapping, MutableMapping
from types import ModuleType
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


def on_first_use(name: str) -> ModuleType:
    """The module `name`, executed when one of its attributes is first read (`importlib.util.LazyLoader`).

    It is in `sys.modules` from now on, so an `import` of it elsewhere gets the same module (and executes it, if
    it was not yet). A module already imported is returned as it is.
    """
    module = sys.modules.get(name)
    if module is not None:
        return module
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module
