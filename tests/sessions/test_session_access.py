"""Who may reattach, stop, list, rename and delete: a caller who may not read a thread gets, from every route,
the very answer an unknown thread (or run) gets; one who may read but not run is refused what changes it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx
import pytest
from agui import Thread, new_id, resolved
from offices import manager_may_read_and_approve

from adapter import Action

if TYPE_CHECKING:
    from offices import Office, OpenOffice


async def call(office: Office, who: str | None, method: str, path: str, **options: Any) -> httpx.Response:
    return await office.client(who).http.request(method, office.url + path, **options)


def answer(response: httpx.Response) -> tuple[int, Any]:
    """What a caller learns from a response: its status and its body."""
    return response.status_code, response.json() if response.content else None


EVENTS = "/threads/{thread}/runs/{run}/events"
ROUTES = [
    pytest.param("GET", EVENTS, {}, id="reattach"),
    pytest.param("GET", EVENTS, {"headers": {"last-event-id": "1"}}, id="reattach-after"),
    pytest.param("POST", "/threads/{thread}/runs/{run}/stop", {}, id="stop"),
    pytest.param("PATCH", "/threads/{thread}", {"json": {"title": "mine now"}}, id="rename"),
    pytest.param("DELETE", "/threads/{thread}", {}, id="delete"),
    pytest.param("GET", "/threads/{thread}", {}, id="read"),
    pytest.param("DELETE", "/threads/{thread}/grants/send_email", {}, id="revoke-grant"),
]


async def opened(office: Office, who: str) -> tuple[Thread, str]:
    """A thread of `who` with one finished run, and that run's id."""
    thread = office.thread(who)
    reply = await thread.say("hello")
    return thread, str(reply.started["runId"])


@pytest.mark.parametrize(("method", "path", "options"), ROUTES)
async def test_an_outsider_gets_what_an_unknown_thread_gets(
    office: OpenOffice, method: str, path: str, options: dict[str, Any]
) -> None:
    place = await office()
    thread, run_id = await opened(place, "alice")

    theirs = await call(place, "bob", method, path.format(thread=thread.id, run=run_id), **options)
    unknown_run = await call(place, "bob", method, path.format(thread=thread.id, run=new_id("run")), **options)
    unknown_thread = await call(place, "bob", method, path.format(thread=new_id("thread"), run=run_id), **options)
    anonymous = await call(place, None, method, path.format(thread=thread.id, run=run_id), **options)

    assert answer(theirs)[0] == 404
    assert answer(theirs) == answer(unknown_thread) == answer(anonymous)
    if "/runs/" in path:
        assert answer(theirs) == answer(unknown_run)
    owner = await call(place, "alice", "GET", f"/threads/{thread.id}")
    assert owner.status_code == 200
    assert [m["content"] for m in owner.json()["messages"]][0] == "hello"


async def test_an_outsider_lists_none_of_the_owners_threads(office: OpenOffice) -> None:
    place = await office()
    mine, _ = await opened(place, "alice")
    await opened(place, "bob")

    listed = {
        who: [t["threadId"] for t in (await call(place, who, "GET", "/threads")).json()["threads"]]
        for who in ("alice", "bob", None)
    }

    assert listed["alice"] == [mine.id]
    assert mine.id not in listed["bob"]
    assert len(listed["bob"]) == 1
    assert listed[None] == []  # an anonymous caller lists the unowned threads: none here


async def test_a_reader_who_may_not_run_may_reattach_but_not_stop_rename_or_delete(office: OpenOffice) -> None:
    place = await office(authorize=manager_may_read_and_approve)
    thread, run_id = await opened(place, "alice")
    base = f"/threads/{thread.id}"

    events = await call(place, "manager", "GET", f"{base}/runs/{run_id}/events")
    refused = [
        await call(place, "manager", "POST", f"{base}/runs/{run_id}/stop"),
        await call(place, "manager", "PATCH", base, json={"title": "managed"}),
        await call(place, "manager", "DELETE", base),
    ]

    assert events.status_code == 200
    assert "RUN_FINISHED" in events.text
    assert {answer(r)[0] for r in refused} == {403}
    assert {r.json()["error"]["code"] for r in refused} == {"THREAD_FORBIDDEN"}
    kept = await call(place, "alice", "GET", "/threads")
    assert [t["title"] for t in kept.json()["threads"]] == ["hello"]


async def test_a_grant_is_revoked_by_who_may_approve_and_refused_to_a_reader_who_may_not(office: OpenOffice) -> None:
    place = await office(authorize=four_eyes_with_reader)
    thread = place.thread("alice")
    (interrupt,) = (await thread.say("email ceo@x.io")).interrupts
    approver = place.thread("manager", thread.id)
    approver.messages = list(thread.messages)
    await approver.resume(resolved(interrupt["id"], {"approved": True, "remember": "thread"}))
    path = f"/threads/{thread.id}/grants/send_email"

    read = (await call(place, "alice", "GET", f"/threads/{thread.id}")).json()
    by_owner = await call(place, "alice", "DELETE", path)
    by_approver, again = (
        await call(place, "manager", "DELETE", path),
        await call(place, "manager", "DELETE", path + "/"),
    )

    assert [(g["tool"], g["grantedBy"]) for g in read["grants"]] == [("send_email", "manager")]
    assert answer(by_owner)[0] == 403
    assert by_owner.json()["error"]["code"] == "APPROVAL_FORBIDDEN"
    assert (answer(by_approver), answer(again)) == ((204, None), (204, None))
    after = (await call(place, "alice", "GET", f"/threads/{thread.id}")).json()
    assert after["grants"] == []
    assert len((await thread.say("email ceo@x.io")).interrupts) == 1


def four_eyes_with_reader(principal: str | None, owner: str | None, action: Action) -> bool:
    """Alice owns and reads, the manager only approves; nobody approves their own calls."""
    if action == "approve":
        return principal == "manager"
    return owner is None or principal == owner


async def test_the_python_api_refuses_alike(office: OpenOffice) -> None:
    place = await office()
    thread, run_id = await opened(place, "alice")
    adapter = place.served.adapter
    assert adapter is not None

    async def as_bob() -> list[Any]:
        assert adapter is not None
        return [
            await adapter.run_events(thread.id, run_id, principal="bob"),
            await adapter.stop_run(thread.id, run_id, principal="bob"),
            await adapter.rename_thread(thread.id, "mine now", principal="bob"),
            await adapter.delete_thread(thread.id, principal="bob"),
            await adapter.thread(thread.id, principal="bob"),
            [t["threadId"] for t in (await adapter.threads(principal="bob"))["threads"]],
        ]

    assert await place.served.call(as_bob()) == [None, None, False, False, None, []]
