"""GET /health asks the store once for all the checks that come together, and keeps the answer a second.

A balancer checks each replica every second or so; under load, a check that writes to the store adds load and
queues behind the runs. The rule: however many checks arrive, the store is asked at most once per freshness
window, and every check gets the answer of an ask that began after the previous window ended.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from hypothesis import given
from hypothesis import strategies as st

from adapter import Adapter, create_app
from adapter.backends import ScriptedBackend
from adapter.stores import MemoryStore

# Private on purpose: the probe's freshness is driven by a fake clock here.
from adapter.stores._health import Probe


class CountingStore(MemoryStore):
    """A store that counts its pings, and answers them only when the test lets it."""

    def __init__(self) -> None:
        super().__init__()
        self.pings = 0
        self.answer = asyncio.Event()

    async def ping(self, *, write: bool = False) -> None:
        self.pings += 1
        await self.answer.wait()


async def test_checks_that_come_together_share_one_ask_of_the_store() -> None:
    store = CountingStore()
    app = create_app(Adapter(ScriptedBackend([]), store=store))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://agui") as http:
        checks = [asyncio.ensure_future(http.get("/health")) for _ in range(20)]
        while store.pings == 0:
            await asyncio.sleep(0)
        store.answer.set()
        answers = await asyncio.gather(*checks)

    assert [a.status_code for a in answers] == [200] * 20
    assert store.pings == 1


@given(st.lists(st.floats(min_value=0, max_value=3), min_size=1, max_size=30))
def test_the_store_is_asked_at_most_once_a_window(gaps: list[float]) -> None:
    """Checks at any times (gaps between them, in seconds): an ask each time the last answer is a window old."""
    store = CountingStore()
    store.answer.set()
    now = [0.0]
    probe = Probe(store, timeout=5.0, fresh=1.0, clock=lambda: now[0])
    answered_at: list[float] = []

    async def checks() -> None:
        for gap in gaps:
            now[0] += gap
            before = store.pings
            assert await probe() == "ok"
            if store.pings > before:
                answered_at.append(now[0])

    asyncio.run(checks())

    expected: list[float] = []
    at = 0.0
    for gap in gaps:
        at += gap
        if not expected or at - expected[-1] >= 1.0:
            expected.append(at)
    assert answered_at == expected


def test_a_check_that_leaves_does_not_cancel_the_others_ask() -> None:
    store = CountingStore()
    probe = Probe(store, timeout=5.0)

    async def scenario() -> list[Any]:
        leaving = asyncio.ensure_future(probe())
        staying = asyncio.ensure_future(probe())
        while store.pings == 0:
            await asyncio.sleep(0)
        leaving.cancel()
        store.answer.set()
        return [await staying, leaving.cancelled()]

    assert asyncio.run(scenario()) == ["ok", True]
    assert store.pings == 1
