"""Threads as a resource: listed newest first and paged, with titles and open interrupts; renamed; deleted."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from agui import FRONTEND_TOOLS, Client, new_id, resolved
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sessions_kit import BOUND

from adapter import Adapter, ToolContext, tool
from adapter.backends import Call, Rule, ScriptedBackend
from adapter.stores import SQLiteStore

if TYPE_CHECKING:
    from conftest import Kit, MakeAdapter, Serve, Served


@pytest.fixture
async def served(serve: Serve, make_adapter: MakeAdapter, tmp_path: Path) -> Served:
    return await serve(make_adapter(store=SQLiteStore(tmp_path / "turns.db")))


async def listing(client: Client, **params: Any) -> dict[str, Any]:
    response = await client.http.get(f"{client.base_url}/threads", params=params)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(count=st.integers(min_value=1, max_value=7), limit=st.integers(min_value=1, max_value=4))
async def test_pages_list_every_thread_once_newest_first(served: Served, count: int, limit: int) -> None:
    client = served.client
    prefix = new_id("p")
    made = []
    for index in range(count):
        thread = client.thread(thread_id=f"{prefix}-{index}")
        await thread.say(f"hello {index}")
        made.append(thread.id)

    pages, cursor = [], None
    while True:
        page = await listing(client, limit=limit, **({"before": cursor} if cursor else {}))
        assert len(page["threads"]) <= limit
        pages.append(page["threads"])
        cursor = page["next"]
        if cursor is None:
            break

    listed = [t for page in pages for t in page if t["threadId"].startswith(prefix)]
    assert [t["threadId"] for t in listed] == made[::-1]  # each once, newest first
    assert [t["updatedAt"] for t in listed] == sorted((t["updatedAt"] for t in listed), reverse=True)
    assert {t["title"] for t in listed} == {f"hello {index}" for index in range(count)}


async def test_a_title_is_the_start_of_the_first_user_message_on_one_line(served: Served) -> None:
    client = served.client
    long = client.thread()
    await long.say("first line\n\n   second   line " + "x" * 200)
    short = client.thread()
    await short.say("hello")

    titles = {t["threadId"]: t["title"] for t in (await listing(client))["threads"]}

    assert titles[short.id] == "hello"
    assert titles[long.id].startswith("first line second line xxx")
    assert titles[long.id].endswith("…")
    assert len(titles[long.id]) == 80
    assert "\n" not in titles[long.id]


async def test_an_open_interrupt_is_listed_as_a_thread_read_shows_it(served: Served) -> None:
    client = served.client
    thread = client.thread(tools=FRONTEND_TOOLS)
    (interrupt,) = (await thread.say("email ceo@x.io")).interrupts

    listed = next(t for t in (await listing(client))["threads"] if t["threadId"] == thread.id)
    read = (await client.get(f"/threads/{thread.id}")).json()

    assert listed["interrupts"] == read["interrupts"]
    assert listed["interrupts"][0]["id"] == interrupt["id"]


async def test_rename_sets_and_clears_the_title_and_refuses_what_is_no_title(served: Served) -> None:
    client = served.client
    thread = client.thread()
    await thread.say("hello")
    path = f"{client.base_url}/threads/{thread.id}"

    renamed = await client.http.patch(path, json={"title": "Trip to Lisbon"})
    titled = (await listing(client))["threads"][0]["title"]
    cleared = await client.http.patch(path, json={"title": None})
    untitled = (await listing(client))["threads"][0]["title"]
    bad = [await client.http.patch(path, json={"title": title}) for title in ("", "  ", "x" * 201, "a\nb", 7)]
    malformed = [
        await client.http.patch(path, content=b"{", headers={"content-type": "application/json"}),
        await client.http.patch(path, json={"name": "x"}),
        await client.http.patch(path, content=b'{"title": "x"}', headers={"content-type": "text/plain"}),
    ]

    assert (renamed.status_code, renamed.json()) == (200, {"threadId": thread.id, "title": "Trip to Lisbon"})
    assert (titled, cleared.status_code, untitled) == ("Trip to Lisbon", 200, None)
    assert {(r.status_code, r.json()["error"]["code"]) for r in bad} == {(422, "INVALID_TITLE")}
    assert [(r.status_code, r.json()["error"]["code"]) for r in malformed] == [
        (422, "INVALID_INPUT"),
        (422, "INVALID_INPUT"),
        (415, "UNSUPPORTED_MEDIA_TYPE"),
    ]


async def test_delete_removes_the_thread_its_turn_and_its_journals(served: Served) -> None:
    client = served.client
    thread = client.thread()
    reply = await thread.say("hello")
    run_id = reply.started["runId"]

    deleted = await client.http.delete(f"{client.base_url}/threads/{thread.id}")
    again = await client.http.delete(f"{client.base_url}/threads/{thread.id}")

    assert (deleted.status_code, deleted.content) == (204, b"")
    assert again.status_code == 404
    assert (await client.get(f"/threads/{thread.id}")).status_code == 404
    assert (await client.get(f"/threads/{thread.id}/runs/{run_id}/events")).status_code == 404
    assert thread.id not in [t["threadId"] for t in (await listing(client))["threads"]]


async def test_an_interrupt_open_when_its_thread_is_deleted_can_never_be_answered(served: Served, kit: Kit) -> None:
    client = served.client
    thread = client.thread(tools=FRONTEND_TOOLS)
    (interrupt,) = (await thread.say("email ceo@x.io")).interrupts

    await client.http.delete(f"{client.base_url}/threads/{thread.id}")
    answered = await thread.resume(resolved(interrupt["id"], {"approved": True}), clean=False)

    assert answered.error["code"] == "RESUME_UNKNOWN_INTERRUPT"
    assert kit.count("send_email") == 0
    assert (await client.get(f"/threads/{thread.id}")).status_code == 404  # the refused answer created nothing


async def test_the_python_api_mirrors_the_routes(served: Served) -> None:
    client = served.client
    thread = client.thread()
    await thread.say("hello")
    adapter = served.adapter
    assert adapter is not None

    async def mirror() -> list[Any]:
        assert adapter is not None
        return [
            await adapter.threads(),
            await adapter.rename_thread(thread.id, "Renamed"),
            (await adapter.threads())["threads"][0]["title"],
            await adapter.delete_thread(thread.id),
            await adapter.thread(thread.id),
        ]

    listed = await listing(client)
    via_api = await served.call(mirror())
    assert via_api[0] == listed
    assert via_api[1:] == [True, "Renamed", True, None]


async def test_a_rename_in_the_middle_of_a_resume_never_fails_it(serve: Serve, tmp_path: Path) -> None:
    """The run's saves build on the version they read; a rename between them is let pass, nothing else is."""
    entered, release = threading.Event(), threading.Event()

    @tool(requires_approval=True)
    async def pay(amount: str, ctx: ToolContext) -> str:
        """Pay an amount."""
        entered.set()
        await asyncio.to_thread(release.wait, BOUND)
        return f"paid {amount}"

    rules = [Rule(r"pay (?P<amount>\d+)", steps=[[Call("pay", {"amount": "{amount}"})]], reply="Done.")]
    served = await serve(Adapter(ScriptedBackend(rules), tools=[pay], store=SQLiteStore(tmp_path / "t.db")))
    client = served.client
    thread = client.thread()
    (interrupt,) = (await thread.say("pay 10")).interrupts
    resuming = asyncio.ensure_future(thread.resume(resolved(interrupt["id"], {"approved": True})))
    await asyncio.to_thread(entered.wait, BOUND)

    renamed = await client.http.patch(f"{client.base_url}/threads/{thread.id}", json={"title": "Paying"})
    release.set()
    reply = await resuming

    assert renamed.status_code == 200
    assert reply.outcome == {"type": "success"}
    assert "paid 10" in [r["content"] for r in reply.results().values()]
    stored = (await client.get(f"/threads/{thread.id}")).json()
    assert stored["interrupts"] == []
    assert [t["title"] for t in (await listing(client))["threads"]] == ["Paying"]
