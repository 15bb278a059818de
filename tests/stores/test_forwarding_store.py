"""The forwarding base of the tests' store wrappers forwards every method of the store protocol."""

from __future__ import annotations

import inspect

from forwarding_store import ForwardingStore

from adapter.stores import MemoryStore, ThreadChange, TurnStore


def test_every_method_of_the_protocol_is_forwarded() -> None:
    protocol = {name for name, value in vars(TurnStore).items() if inspect.iscoroutinefunction(value)}

    missing = sorted(name for name in protocol if name not in vars(ForwardingStore))

    assert protocol
    assert missing == []


async def test_a_forwarded_call_reaches_the_inner_store_with_its_arguments() -> None:
    inner = MemoryStore()
    store = ForwardingStore(inner)

    version = await store.save("t", ThreadChange(title="Kept"), expected_version=0)
    loaded = await inner.load("t")

    assert loaded is not None
    assert (version, loaded.head.title) == (1, "Kept")
    assert await store.load("t") == loaded
