"""`GET /threads/{id}?after=<message id>&limit=N`: a long thread read a page at a time, over real HTTP."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from agui import run_input, user

from adapter import Adapter
from adapter.backends import ScriptedBackend
from adapter.stores import SQLiteStore, StoredMessage, StoredThread, ThreadChange

if TYPE_CHECKING:
    from conftest import Serve, Served


def earlier_turns(count: int) -> list[dict[str, Any]]:
    turns: list[dict[str, Any]] = []
    for k in range(count):
        turns += [user(f"note {k}"), {"id": f"r-{k}", "role": "assistant", "content": f"noted {k}"}]
    return turns


@pytest.fixture
async def long_thread(serve: Serve, backend: ScriptedBackend) -> tuple[Served, str, list[dict[str, Any]]]:
    """A served adapter and a thread of 24 earlier messages plus one run: the whole stored thread."""
    served = await serve(Adapter(backend))
    thread_id = "thread-long"
    reply = await served.client.post(run_input(thread_id, [*earlier_turns(12), user("hello")]))
    assert reply.outcome == {"type": "success"}
    whole = (await served.client.get(f"/threads/{thread_id}")).json()
    assert "next" not in whole  # an unpaged read is what it always was
    return served, thread_id, whole["messages"]


async def read_pages(served: Served, thread_id: str, limit: int) -> list[list[dict[str, Any]]]:
    pages, after = [], ""
    while True:
        query = f"limit={limit}" + (f"&after={after}" if after else "")
        response = await served.client.get(f"/threads/{thread_id}?{query}")
        assert response.status_code == 200, response.text
        body = response.json()
        pages.append(body["messages"])
        if body["next"] is None:
            return pages
        assert body["next"] == body["messages"][-1]["id"]
        after = body["next"]


@pytest.mark.parametrize("limit", [1, 7, 26, 27, 1000])
async def test_pages_walk_the_whole_thread_once_in_order(long_thread: Any, limit: int) -> None:
    served, thread_id, whole = long_thread

    pages = await read_pages(served, thread_id, limit)

    assert [m for page in pages for m in page] == whole
    assert all(1 <= len(page) <= limit for page in pages)


async def test_a_page_after_the_last_message_is_empty_and_final(long_thread: Any) -> None:
    served, thread_id, whole = long_thread
    body = (await served.client.get(f"/threads/{thread_id}?after={whole[-1]['id']}")).json()
    assert (body["messages"], body["next"], body["interrupts"]) == ([], None, [])


async def test_after_alone_reads_a_page_of_the_default_size(long_thread: Any) -> None:
    served, thread_id, whole = long_thread
    body = (await served.client.get(f"/threads/{thread_id}?after={whole[0]['id']}")).json()
    assert body["messages"] == whole[1:]
    assert body["next"] is None


@pytest.mark.parametrize(
    "query",
    ["limit=0", "limit=1001", "limit=-1", "limit=1.5", "limit=abc", "limit=", "limit=１", "after=", "after=nope"],
)
async def test_a_bad_page_is_refused_with_a_code(long_thread: Any, query: str) -> None:
    served, thread_id, _ = long_thread
    response = await served.client.get(f"/threads/{thread_id}?{query}")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "INVALID_PAGE"


async def test_a_thread_the_caller_may_not_read_is_a_404_whatever_the_page(
    serve: Serve, backend: ScriptedBackend
) -> None:
    served = await serve(Adapter(backend, authorize=lambda principal, owner, action: action != "read"))
    await served.client.post(run_input("thread-closed", [user("hello")]))

    for query in ("", "?after=nope", "?limit=5"):
        response = await served.client.get(f"/threads/thread-closed{query}")
        assert (response.status_code, response.json()["error"]["code"]) == (404, "THREAD_NOT_FOUND")


async def test_the_python_api_pages_alike(long_thread: Any) -> None:
    served, thread_id, whole = long_thread
    adapter = served.adapter
    page = await served.call(adapter.thread(thread_id, after=whole[2]["id"], limit=3))
    assert page["messages"] == whole[3:6]
    assert page["next"] == whole[5]["id"]
    with pytest.raises(ValueError, match="1 to 1000"):
        await served.call(adapter.thread(thread_id, limit=0))


class CountingStore(SQLiteStore):
    """A real SQLite store that counts the messages its loads returned and the ids it was asked to find."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.returned = 0
        self.finds = 0

    async def load(self, thread_id: str, *, since: int | None = 0, until: int | None = None) -> StoredThread | None:
        stored = await super().load(thread_id, since=since, until=until)
        self.returned += len(stored.messages) if stored is not None else 0
        return stored

    async def find_message(self, thread_id: str, message_id: str) -> int | None:
        self.finds += 1
        return await super().find_message(thread_id, message_id)


async def test_a_page_of_a_long_thread_reads_only_that_page_from_the_store(
    serve: Serve, backend: ScriptedBackend, tmp_path: Path
) -> None:
    store = CountingStore(tmp_path / "turns.db")
    served = await serve(Adapter(backend, store=store))
    reply = await served.client.post(run_input("thread-huge", [*earlier_turns(1500), user("hello")]))
    assert reply.outcome == {"type": "success"}

    store.returned = 0
    first = (await served.client.get("/threads/thread-huge?limit=10")).json()
    middle = (await served.client.get("/threads/thread-huge?after=r-700&limit=20")).json()
    last = (await served.client.get(f"/threads/thread-huge?after={first['messages'][0]['id']}&limit=1000")).json()

    assert [m["content"] for m in middle["messages"][:2]] == ["note 701", "noted 701"]
    assert (len(first["messages"]), len(middle["messages"]), len(last["messages"])) == (10, 20, 1000)
    assert store.returned == 10 + 20 + 1000  # the head reads carry no message; nothing else is read
    assert store.finds == 2 + 3  # each `after`, and each page's cursor checked to name its own position


async def test_a_thread_stored_with_a_repeated_id_is_paged_through_once(tmp_path: Path, serve: Serve) -> None:
    """A thread written before ids were unique in a thread may repeat one: paging still ends, each message once."""
    store = SQLiteStore(tmp_path / "legacy.db")
    said = [user("one"), {"id": "r-1", "role": "assistant", "content": "a"}, user("two")]
    repeated = {"id": said[0]["id"], "role": "user", "content": "one, again"}
    messages = [*said, repeated, {"id": "r-2", "role": "assistant", "content": "b"}]
    stored = [StoredMessage(m["id"], m["role"], json.dumps(m, separators=(",", ":"))) for m in messages]
    await store.save("legacy", ThreadChange(append=stored), expected_version=0)
    served = await serve(Adapter(ScriptedBackend(), store=store))

    for limit in (2, 3, 4):
        pages = await read_pages_ending(served, "legacy", limit)
        assert [m["content"] for page in pages for m in page] == [m["content"] for m in messages], limit
    # A page of one repeated id has no cursor of its own: paging ends there, and never loops.
    assert len(await read_pages_ending(served, "legacy", 1)) <= len(messages)


async def read_pages_ending(served: Served, thread_id: str, limit: int) -> list[list[dict[str, Any]]]:
    """Follow `next` until it ends (at most as many pages as messages, or the walk loops)."""
    pages: list[list[dict[str, Any]]] = []
    after = ""
    for _ in range(20):
        query = f"limit={limit}" + (f"&after={after}" if after else "")
        body = (await served.client.get(f"/threads/{thread_id}?{query}")).json()
        pages.append(body["messages"])
        if body["next"] is None:
            return pages
        after = body["next"]
    raise AssertionError(f"paging did not end: {pages}")
