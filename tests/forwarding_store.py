"""A store that forwards every call to an inner store: a test's store wrapper overrides only what it watches.

Each method of the `TurnStore` protocol (and `save_and_append` and `load_or_create`, which the stores that ship
have beside it) is one line here, `forwarded(...)` of the protocol's own function: it takes that function's
signature, so a wrapper's `super().save(...)` is checked against the protocol, and it calls the inner store's
method of that name. A method the protocol gains is one more line; `tests/stores/test_forwarding_store.py` fails
until it is there. What the protocol does not name (`watch_journal`, a PostgreSQL store's) is forwarded as the
inner store has it, or not.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar

from adapter.stores import TurnStore
from adapter.stores._protocol import (  # private on purpose: the signatures of the merged calls
    load_or_create,
    save_and_append,
)

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S", bound=TurnStore)


def forwarded(
    method: Callable[Concatenate[Any, P], Coroutine[Any, Any, R]],
) -> Callable[Concatenate[ForwardingStore[Any], P], Coroutine[Any, Any, R]]:
    """A method with `method`'s signature that calls the inner store's method of the same name."""
    name = method.__name__

    async def forward(self: ForwardingStore[Any], /, *args: P.args, **kwargs: P.kwargs) -> R:
        inner: Callable[P, Coroutine[Any, Any, R]] = getattr(self.inner, name)
        return await inner(*args, **kwargs)

    forward.__name__ = forward.__qualname__ = name
    return forward


class ForwardingStore(Generic[S]):
    """Every store call forwarded to `inner`, unchanged."""

    def __init__(self, inner: S) -> None:
        self.inner = inner

    load = forwarded(TurnStore.load)
    find_message = forwarded(TurnStore.find_message)
    save = forwarded(TurnStore.save)
    save_and_append = forwarded(save_and_append)
    load_or_create = forwarded(load_or_create)
    purge = forwarded(TurnStore.purge)
    append_events = forwarded(TurnStore.append_events)
    read_events = forwarded(TurnStore.read_events)
    request_stop = forwarded(TurnStore.request_stop)
    list_threads = forwarded(TurnStore.list_threads)
    delete_thread = forwarded(TurnStore.delete_thread)
    ping = forwarded(TurnStore.ping)
    close = forwarded(TurnStore.close)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
