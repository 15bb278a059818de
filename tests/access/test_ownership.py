"""Thread ownership and the `authorize` policy: who may read, run, resume and approve on a thread."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx
import pytest
from ag_ui.core import RunAgentInput, UserMessage
from agui import FRONTEND_TOOLS, Reply, resolved, run_input, tool_answer, user
from offices import Office, OpenOffice, by_header, four_eyes, manager_may_read_and_approve
from starlette.applications import Starlette
from starlette.authentication import AuthCredentials, AuthenticationBackend, BaseUser, SimpleUser
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import HTTPConnection, Request
from starlette.routing import Mount

from adapter import Action, Adapter, Forbidden, create_app
from adapter.stores import MemoryStore

if TYPE_CHECKING:
    from conftest import Kit, MakeAdapter, Serve


def wire(body: dict[str, Any]) -> RunAgentInput:
    return RunAgentInput.model_validate(body)


def refused(reply: Reply, code: str) -> None:
    assert (reply.status, reply.events) == (403, [])
    assert httpx.Response(403, content=reply.body).json()["error"]["code"] == code


async def test_a_thread_belongs_to_the_principal_that_created_it(office: OpenOffice) -> None:
    place = await office()
    alice = place.thread("alice")
    await alice.say("hello")
    before = await place.stored(alice.id)

    refused(await place.thread("bob", alice.id).say("hello"), "THREAD_FORBIDDEN")
    refused(await place.thread(None, alice.id).say("hello"), "THREAD_FORBIDDEN")

    assert await place.stored(alice.id) == before
    assert before.head.owner == "alice"
    assert (await alice.say("hello again")).outcome == {"type": "success"}


async def test_a_stranger_reads_a_thread_as_if_it_did_not_exist(office: OpenOffice) -> None:
    place = await office()
    alice = place.thread("alice")
    await alice.say("hello")

    theirs = await place.client("bob").get(f"/threads/{alice.id}")
    nobodys = await place.client("bob").get("/threads/no-such-thread")
    mine = await place.client("alice").get(f"/threads/{alice.id}")

    assert (theirs.status_code, theirs.json()) == (nobodys.status_code, nobodys.json())
    assert theirs.status_code == 404
    assert mine.status_code == 200


async def test_only_the_owner_approves_by_default(office: OpenOffice, kit: Kit) -> None:
    place = await office()
    alice = place.thread("alice")
    (interrupt,) = (await alice.say("email ceo@x.io")).interrupts
    before = await place.stored(alice.id)

    bob = place.thread("bob", alice.id)
    refused(await bob.resume(resolved(interrupt["id"], {"approved": True})), "THREAD_FORBIDDEN")
    refused(await bob.resume(resolved(interrupt["id"], {"approved": False})), "THREAD_FORBIDDEN")

    assert kit.count("send_email") == 0
    assert await place.stored(alice.id) == before
    reply = await alice.resume(resolved(interrupt["id"], {"approved": True}))
    assert reply.outcome == {"type": "success"}
    assert [ctx.principal for ctx in kit.contexts["send_email"]] == ["alice"]


async def test_a_stranger_cannot_answer_a_client_tool(office: OpenOffice) -> None:
    place = await office(frontend_outcome="interrupt")
    alice = place.thread("alice")
    (interrupt,) = (await alice.say("go to settings")).interrupts
    before = await place.stored(alice.id)

    bob = place.thread("bob", alice.id)
    refused(await bob.resume(resolved(interrupt["id"], {"ok": True})), "THREAD_FORBIDDEN")
    refused(await bob.answer(interrupt["toolCallId"], {"ok": True}), "THREAD_FORBIDDEN")

    assert await place.stored(alice.id) == before


async def test_a_thread_created_without_a_principal_stays_open_to_all(office: OpenOffice) -> None:
    place = await office()
    anonymous = place.thread(None)
    await anonymous.say("hello")

    bob = place.thread("bob", anonymous.id)

    assert (await bob.say("hello")).outcome == {"type": "success"}
    assert (await place.client("bob").get(f"/threads/{anonymous.id}")).status_code == 200
    assert (await place.stored(anonymous.id)).head.owner is None


async def test_a_manager_may_read_and_approve_others_threads(office: OpenOffice, kit: Kit) -> None:
    place = await office(authorize=manager_may_read_and_approve)
    alice = place.thread("alice")
    (interrupt,) = (await alice.say("email ceo@x.io")).interrupts
    manager = place.thread("manager", alice.id)

    assert (await place.client("manager").get(f"/threads/{alice.id}")).status_code == 200
    refused(await manager.say("hello"), "THREAD_FORBIDDEN")
    reply = await manager.resume(resolved(interrupt["id"], {"approved": True}))

    assert reply.outcome == {"type": "success"}
    assert [ctx.principal for ctx in kit.contexts["send_email"]] == ["manager"]
    assert (await place.client("bob").get(f"/threads/{alice.id}")).status_code == 404


async def test_four_eyes_the_owner_may_not_approve_their_own_request(office: OpenOffice, kit: Kit) -> None:
    place = await office(authorize=four_eyes)
    alice = place.thread("alice")
    (interrupt,) = (await alice.say("email ceo@x.io")).interrupts

    refused(await alice.resume(resolved(interrupt["id"], {"approved": True})), "APPROVAL_FORBIDDEN")
    assert kit.count("send_email") == 0
    reply = await place.thread("bob", alice.id).resume(resolved(interrupt["id"], {"approved": True}))

    assert reply.outcome == {"type": "success"}
    assert [ctx.principal for ctx in kit.contexts["send_email"]] == ["bob"]
    replayed = await place.thread("bob", alice.id).resume(resolved(interrupt["id"], {"approved": True}))
    assert replayed.outcome == {"type": "success"}
    assert kit.count("send_email") == 1


async def test_principal_and_policy_may_be_async(
    serve: Serve, make_adapter: MakeAdapter, offices: list[Office]
) -> None:
    asked: list[tuple[str | None, str | None, str]] = []

    async def principal(request: Request) -> str | None:
        return request.headers.get("x-user")

    async def authorize(principal: str | None, owner: str | None, action: Action) -> bool:
        asked.append((principal, owner, action))
        return owner is None or principal == owner

    place = Office(await serve(make_adapter(authorize=authorize), principal=principal))
    offices.append(place)
    alice = place.thread("alice")
    await alice.say("hello")

    refused(await place.thread("bob", alice.id).say("hello"), "THREAD_FORBIDDEN")
    assert ("bob", "alice", "run") in asked


class HeaderAuth(AuthenticationBackend):
    async def authenticate(self, conn: HTTPConnection) -> tuple[AuthCredentials, BaseUser] | None:
        name = conn.headers.get("x-user")
        return (AuthCredentials(["authenticated"]), SimpleUser(name)) if name else None


async def test_the_default_principal_is_starlettes_authenticated_user(
    serve: Serve, make_adapter: MakeAdapter, offices: list[Office]
) -> None:
    adapter = make_adapter()
    host = Starlette(
        routes=[Mount("/agui", app=create_app(adapter))],
        middleware=[Middleware(AuthenticationMiddleware, backend=HeaderAuth())],
    )
    served = await serve(host)
    served.adapter = adapter
    place = Office(served, served.url + "/agui")
    offices.append(place)
    alice = place.thread("alice")
    await alice.say("hello")

    refused(await place.thread("bob", alice.id).say("hello"), "THREAD_FORBIDDEN")
    assert (await place.stored(alice.id)).head.owner == "alice"


async def test_the_python_api_applies_the_same_policy(make_adapter: MakeAdapter, kit: Kit) -> None:
    adapter: Adapter = make_adapter()
    opening = RunAgentInput(
        thread_id="t1", run_id="r1", messages=[UserMessage(id="u1", content="email ceo@x.io")], tools=[], context=[]
    )
    events = [event async for event in adapter.run(opening, principal="alice")]
    (interrupt,) = events[-1].outcome.interrupts  # type: ignore[attr-defined]
    before = await adapter.store.load("t1")
    answer = [{"interruptId": interrupt.id, "status": "resolved", "payload": {"approved": True}}]

    assert await adapter.thread("t1", principal="bob") is None
    with pytest.raises(Forbidden) as resumed:
        [event async for event in adapter.resume("t1", answer, principal="bob")]
    with pytest.raises(Forbidden) as cancelled:
        await adapter.cancel_turn("t1", principal="bob")

    assert (resumed.value.code, cancelled.value.code) == ("THREAD_FORBIDDEN",) * 2
    assert await adapter.store.load("t1") == before
    assert kit.count("send_email") == 0
    assert await adapter.thread("t1", principal="alice") is not None
    done = [event async for event in adapter.resume("t1", answer, principal="alice")]
    assert done[-1].type == "RUN_FINISHED"
    assert kit.count("send_email") == 1


async def test_a_stranger_gets_one_refusal_whatever_ids_it_tries(office: OpenOffice) -> None:
    """Which interrupt ids are open or applied approvals on a thread one may not read is not told."""
    place = await office()
    alice = place.thread("alice")
    (first,) = (await alice.say("email ceo@x.io")).interrupts
    await alice.resume(resolved(first["id"], {"approved": True}))
    (second,) = (await alice.say("email cfo@x.io")).interrupts
    bob = place.thread("bob", alice.id)

    replies = [
        await bob.resume(resolved(second["id"], {"approved": True})),
        await bob.resume(resolved(first["id"], {"approved": True})),
        await bob.resume(resolved("int_random", {"approved": True})),
        await bob.resume(resolved(second["id"], {"ok": True})),
        await bob.say("hello"),
    ]

    assert {(reply.status, reply.body) for reply in replies} == {(403, replies[0].body)}
    refused(replies[0], "THREAD_FORBIDDEN")


async def test_the_owner_who_may_read_is_told_an_approval_is_not_theirs(office: OpenOffice) -> None:
    place = await office(authorize=four_eyes)
    alice = place.thread("alice")
    (interrupt,) = (await alice.say("email ceo@x.io")).interrupts

    refused(await alice.resume(resolved(interrupt["id"], {"approved": False})), "APPROVAL_FORBIDDEN")


async def test_reading_a_foreign_thread_reads_no_message(serve: Serve, make_adapter: MakeAdapter) -> None:
    """The policy is asked on the head: a foreign thread costs what an unknown one does, whatever its length."""
    store = ReadSpy()
    place = Office(await serve(make_adapter(store=store), principal=by_header))
    try:
        alice = place.thread("alice")
        for text in ("hello", "where is order A17", "hello"):
            await alice.say(text)
        store.reads.clear()

        assert (await place.client("bob").get(f"/threads/{alice.id}")).status_code == 404
        assert (await place.client("bob").get("/threads/no-such-thread")).status_code == 404
        assert store.reads == [(alice.id, None), ("no-such-thread", None)]
        assert (await place.client("alice").get(f"/threads/{alice.id}")).status_code == 200
    finally:
        await place.close()


class ReadSpy(MemoryStore):
    """A memory store that records what each load asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[tuple[str, int | None]] = []

    async def load(self, thread_id: str, *, since: int | None = 0, until: int | None = None) -> Any:
        self.reads.append((thread_id, since))
        return await super().load(thread_id, since=since, until=until)


@pytest.mark.parametrize("verdict", ["no", 1, "yes"], ids=["string-no", "one", "string-yes"])
async def test_a_verdict_that_is_not_a_bool_refuses(
    verdict: object, office: OpenOffice, make_adapter: MakeAdapter, caplog: pytest.LogCaptureFixture
) -> None:
    """Only a real `True` allows: a misconfigured policy's truthy answer opens nothing, and is logged once."""

    def misconfigured(principal: str | None, owner: str | None, action: Action) -> Any:
        return True if owner is None or principal == owner else verdict

    place = await office(authorize=misconfigured)
    alice = place.thread("alice")
    await alice.say("hello")
    before = await place.stored(alice.id)
    refused(await place.thread("bob", alice.id).say("hello"), "THREAD_FORBIDDEN")
    refused(await place.thread("bob", alice.id).say("hello"), "THREAD_FORBIDDEN")
    assert (await place.client("bob").get(f"/threads/{alice.id}")).status_code == 404

    adapter: Adapter = make_adapter(authorize=misconfigured)
    [event async for event in adapter.run(wire(run_input("t1", [user("hello")])), principal="alice")]
    with pytest.raises(Forbidden) as caught:
        [event async for event in adapter.run(wire(run_input("t1", [user("hello")])), principal="bob")]

    assert caught.value.code == "THREAD_FORBIDDEN"
    assert await adapter.thread("t1", principal="bob") is None
    assert await place.stored(alice.id) == before
    warned = [r for r in caplog.records if r.name == "adapter.access" and "not a bool" in r.getMessage()]
    assert len(warned) == 2  # once per adapter, however often its policy answers so


async def test_a_policy_may_let_strangers_run_but_not_answer_a_client_tool(
    office: OpenOffice, make_adapter: MakeAdapter
) -> None:
    """A ToolMessage that answers a pending client tool is a "resume", whoever sends it and however."""

    def anyone_may_talk(principal: str | None, owner: str | None, action: Action) -> bool:
        return owner is None or principal == owner or action == "run"

    place = await office(authorize=anyone_may_talk, frontend_outcome="interrupt")
    alice = place.thread("alice")
    (interrupt,) = (await alice.say("go to settings")).interrupts
    before = await place.stored(alice.id)

    bob = place.thread("bob", alice.id)
    refused(await bob.answer(interrupt["toolCallId"], {"ok": True}), "THREAD_FORBIDDEN")
    refused(await bob.resume(resolved(interrupt["id"], {"ok": True})), "THREAD_FORBIDDEN")
    assert await place.stored(alice.id) == before

    adapter: Adapter = make_adapter(authorize=anyone_may_talk, frontend_outcome="interrupt")
    opening = wire(run_input("t1", [user("go to settings")], tools=FRONTEND_TOOLS))
    events = [event async for event in adapter.run(opening, principal="alice")]
    (call,) = events[-1].outcome.interrupts  # type: ignore[attr-defined]
    answer = wire(run_input("t1", [tool_answer(call.tool_call_id, '{"ok": true}')], tools=FRONTEND_TOOLS))
    with pytest.raises(Forbidden) as caught:
        [event async for event in adapter.run(answer, principal="bob")]
    assert caught.value.code == "THREAD_FORBIDDEN"
    assert (await adapter.thread("t1", principal="alice") or {})["interrupts"] != []
