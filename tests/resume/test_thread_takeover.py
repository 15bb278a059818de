"""A run never rewrites a thread it did not load: a thread created under a slow run keeps its creator's conversation."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from agui import Client, Reply
from gate import BOUND, Gate
from offices import by_header
from pg import every_store

from adapter.backends import ScriptedBackend
from adapter.stores import TurnStore

if TYPE_CHECKING:
    from conftest import MakeAdapter, Serve, Served

STORES = every_store()


@pytest.fixture(params=STORES)
def store_of(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], TurnStore]:
    return lambda: request.param(tmp_path)


class Two:
    """One server, and a client for each person naming itself in `x-user`."""

    def __init__(self, served: Served) -> None:
        self.served = served
        self.http: list[httpx.AsyncClient] = []

    def client(self, name: str) -> Client:
        self.http.append(httpx.AsyncClient(headers={"x-user": name}, timeout=BOUND))
        return Client(self.http[-1], self.served.url)

    async def stored(self, thread_id: str) -> Any:
        assert self.served.adapter is not None
        return await self.served.call(self.served.adapter.store.load(thread_id))

    async def close(self) -> None:
        for client in self.http:
            await client.aclose()


@pytest.fixture
async def two(
    serve: Serve, make_adapter: MakeAdapter, backend: ScriptedBackend, store_of: Callable[[], TurnStore]
) -> AsyncIterator[tuple[Two, Gate]]:
    gate = Gate(backend)
    served = await serve(make_adapter(backend=gate, store=store_of()), principal=by_header)
    place = Two(served)
    yield place, gate
    gate.release.set()
    await place.close()


def texts(stored: Any) -> list[str]:
    return [message.json for message in stored.messages]


async def test_a_run_on_a_new_thread_owns_it_from_its_start(two: tuple[Two, Gate]) -> None:
    """A new thread is stored as its first run starts: another principal's run under its id is refused meanwhile."""
    place, gate = two
    mallory = place.client("mallory").thread(thread_id="thread-x")
    slow = asyncio.ensure_future(mallory.say("slow: overwrite this thread"))
    await asyncio.to_thread(gate.entered.wait, BOUND)

    victim = place.client("alice").thread(thread_id="thread-x")
    refused = await victim.say("hello", clean=False)
    created = await place.stored("thread-x")
    gate.release.set()
    finished: Reply = await slow

    assert refused.refusal(403)["code"] == "THREAD_FORBIDDEN"
    assert (created.head.owner, texts(created)) == ("mallory", [])
    assert finished.outcome == {"type": "success"}
    after = await place.stored("thread-x")
    assert after.head.owner == "mallory"
    assert "hello" not in "".join(texts(after))


async def test_two_runs_of_one_owner_racing_to_create_a_thread_both_keep_their_messages(
    two: tuple[Two, Gate],
) -> None:
    place, gate = two
    first = place.client("alice").thread(thread_id="thread-y")
    slow = asyncio.ensure_future(first.say("slow: first tab"))
    await asyncio.to_thread(gate.entered.wait, BOUND)
    second = place.client("alice").thread(thread_id="thread-y")
    assert (await second.say("hello")).outcome == {"type": "success"}
    created = await place.stored("thread-y")
    gate.release.set()

    assert (await slow).outcome == {"type": "success"}
    after = await place.stored("thread-y")
    assert after.head.owner == "alice"
    assert texts(after)[: len(created.messages)] == texts(created)
    assert len(after.messages) > len(created.messages)
