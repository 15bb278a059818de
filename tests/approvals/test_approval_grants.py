"""Grants, "always allow in this thread": made by an approval that remembers, stored with the thread, revocable."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from agui import resolved
from approvals_kit import Chat, approvals, interrupts, results
from pg import fresh_schema_dsn

from adapter import Adapter, Forbidden, ToolContext, tool
from adapter.backends import Call, Rule, ScriptedBackend
from adapter.stores import MemoryStore, PostgresStore, SQLiteStore, TurnStore

RULES = [
    Rule("email", steps=[[Call("send_email", {"to": "ceo@x.io"})]]),
    Rule("pay", steps=[[Call("pay", {"amount": 5})]]),
    Rule("twice", steps=[[Call("send_email", {"to": "a@x.io"}), Call("send_email", {"to": "b@x.io"})]]),
]


class Office:
    """The tools of one adapter, and what each ran."""

    def __init__(self) -> None:
        self.ran: list[str] = []

        @tool(requires_approval=True)
        def send_email(to: str) -> str:
            """Send an email."""
            self.ran.append(f"email {to}")
            return f"sent to {to}"

        @tool(requires_approval=True, grantable=False)
        def pay(amount: int) -> str:
            """Pay."""
            self.ran.append(f"pay {amount}")
            return f"paid {amount}"

        self.tools = [send_email, pay]

    def adapter(self, store: TurnStore | None = None, **options: Any) -> Adapter:
        return Adapter(ScriptedBackend(RULES), tools=self.tools, store=store or MemoryStore(), **options)


async def approve(chat: Chat, text: str, payload: dict[str, Any], principal: str | None = None) -> list[dict[str, Any]]:
    (interrupt,) = interrupts(await chat.say(text))
    return await chat.resume(resolved(interrupt["id"], payload), principal=principal)


REMEMBER = {"approved": True, "remember": "thread"}


async def test_an_approval_that_remembers_lets_later_calls_of_the_tool_run_with_a_record_naming_the_grant() -> None:
    office = Office()
    chat = Chat(office.adapter(), principal="alice")

    first = await approve(chat, "email", REMEMBER)
    later = await chat.say("email again")

    assert interrupts(later) == []
    assert [r["content"] for r in results(later)] == ["sent to ceo@x.io"]
    assert office.ran == ["email ceo@x.io"] * 2
    (made,) = approvals(first)
    assert (made["decision"], made["decidedBy"], made.get("grant")) == ("approved", "alice", None)
    (used,) = approvals(later)
    assert (used["decision"], used["decidedBy"], used["toolName"]) == ("approved", "alice", "send_email")
    assert used["grant"]["tool"] == "send_email"
    assert used["grant"]["grantedBy"] == "alice"
    assert datetime.fromisoformat(used["grant"]["grantedAt"]) <= datetime.fromisoformat(made["decidedAt"])


async def test_an_approval_without_remember_grants_nothing() -> None:
    office = Office()
    chat = Chat(office.adapter())

    await approve(chat, "email", {"approved": True})

    assert len(interrupts(await chat.say("email again"))) == 1
    thread = await chat.adapter.thread(chat.thread_id)
    assert thread is not None
    assert thread["grants"] == []


async def test_a_denial_that_says_remember_grants_nothing() -> None:
    office = Office()
    chat = Chat(office.adapter())

    await approve(chat, "email", {"approved": False, "remember": "thread"})

    assert len(interrupts(await chat.say("email again"))) == 1
    assert office.ran == []


async def test_the_thread_read_lists_grants_and_a_revoked_grant_asks_again() -> None:
    office = Office()
    adapter = office.adapter()
    chat = Chat(adapter, principal="alice")
    await approve(chat, "email", REMEMBER)

    read = await adapter.thread(chat.thread_id, principal="alice")
    paged = await adapter.thread(chat.thread_id, principal="alice", limit=1)
    revoked = await adapter.revoke_grant(chat.thread_id, "send_email", principal="alice")
    again = await adapter.revoke_grant(chat.thread_id, "send_email", principal="alice")

    assert read is not None
    assert paged is not None
    (grant,) = read["grants"]
    assert set(grant) == {"tool", "grantedBy", "grantedAt"}
    assert grant["tool"] == "send_email"
    assert grant["grantedBy"] == "alice"
    assert paged["grants"] == read["grants"]
    assert (revoked, again) == (True, False)
    assert len(interrupts(await chat.say("email again"))) == 1
    assert office.ran == ["email ceo@x.io"]
    after = await adapter.thread(chat.thread_id, principal="alice")
    assert after is not None
    assert after["grants"] == []


async def test_remember_on_a_tool_that_takes_no_grant_is_refused_and_the_approval_stays_open() -> None:
    office = Office()
    adapter = office.adapter()
    chat = Chat(adapter)
    (interrupt,) = interrupts(await chat.say("pay"))
    before = await adapter.store.load(chat.thread_id)

    refused = await chat.resume(resolved(interrupt["id"], REMEMBER))

    assert refused[-1]["type"] == "RUN_ERROR"
    assert refused[-1]["code"] == "RESUME_GRANT_REFUSED"
    assert await adapter.store.load(chat.thread_id) == before
    assert office.ran == []
    assert "remember" not in interrupt["responseSchema"]["properties"]
    approved = await chat.resume(resolved(interrupt["id"], {"approved": True}))
    assert [r["content"] for r in results(approved)] == ["paid 5"]


async def test_a_grant_never_lets_a_tool_through_that_takes_none_now() -> None:
    """A grant stored while the tool was grantable (an older deployment) is void once it is declared grantable=False."""
    office = Office()
    store = MemoryStore()
    chat = Chat(office.adapter(store))
    await approve(chat, "email", REMEMBER)

    stricter = Office()
    email, pay = stricter.tools
    tools = [dataclasses.replace(email, grantable=False), pay]
    chat.adapter = Adapter(ScriptedBackend(RULES), tools=tools, store=store)

    assert len(interrupts(await chat.say("email again"))) == 1
    assert stricter.ran == []


@pytest.mark.parametrize("remember", ["forever", True, 1], ids=["other-string", "true", "number"])
async def test_remember_is_only_thread(remember: Any) -> None:
    chat = Chat(Office().adapter())
    (interrupt,) = interrupts(await chat.say("email"))

    refused = await chat.resume(resolved(interrupt["id"], {"approved": True, "remember": remember}))

    assert refused[-1]["code"] == "RESUME_PAYLOAD_INVALID"
    assert {d["pointer"] for d in refused[-1]["metadata"]["details"]} == {"/remember"}


async def test_a_rule_that_says_no_needs_no_grant_and_one_that_asks_is_covered_by_one() -> None:
    asked: list[str] = []

    def over_a(ctx: ToolContext, arguments: dict[str, Any]) -> bool:
        asked.append(arguments["to"])
        return bool(arguments["to"] != "a@x.io")

    @tool(requires_approval=over_a)
    def send_email(to: str) -> str:
        """Send."""
        return f"sent to {to}"

    chat = Chat(Adapter(ScriptedBackend(RULES), tools=[send_email]))
    await approve(chat, "email", REMEMBER)

    both = await chat.say("twice")

    assert interrupts(both) == []
    assert sorted(asked) == ["a@x.io", "b@x.io", "ceo@x.io"]
    (record,) = approvals(both)  # the call the rule let through needs no record; the one the grant covered has one
    assert record["arguments"] == '{"to": "b@x.io"}'
    assert record["grant"]["tool"] == "send_email"


def four_eyes(principal: str | None, owner: str | None, action: str) -> bool:
    """Alice owns and runs; only Bob approves (and so grants and revokes); both read."""
    if action == "approve":
        return principal == "bob"
    return principal in ("alice", "bob") and (action == "read" or principal == owner or owner is None)


async def test_under_four_eyes_the_grant_is_the_approvers_and_the_owner_may_not_revoke_it() -> None:
    office = Office()
    adapter = office.adapter(authorize=four_eyes)
    chat = Chat(adapter, principal="alice")
    (interrupt,) = interrupts(await chat.say("email"))

    with pytest.raises(Forbidden) as owner_tries:
        await chat.resume(resolved(interrupt["id"], REMEMBER))
    await chat.resume(resolved(interrupt["id"], REMEMBER), principal="bob")
    later = await chat.say("email again")

    assert owner_tries.value.code == "APPROVAL_FORBIDDEN"
    assert interrupts(later) == []
    assert approvals(later)[0]["grant"]["grantedBy"] == "bob"
    with pytest.raises(Forbidden) as refused:
        await adapter.revoke_grant(chat.thread_id, "send_email", principal="alice")
    assert refused.value.code == "APPROVAL_FORBIDDEN"
    assert await adapter.revoke_grant(chat.thread_id, "send_email", principal="mallory") is None
    assert await adapter.revoke_grant(chat.thread_id, "send_email", principal="bob") is True


async def test_a_grant_whose_maker_may_no_longer_approve_lets_nothing_through() -> None:
    office = Office()
    approvers = {"bob"}

    def policy(principal: str | None, owner: str | None, action: str) -> bool:
        return principal in approvers if action == "approve" else True

    adapter = office.adapter(authorize=policy)
    chat = Chat(adapter, principal="alice")
    (interrupt,) = interrupts(await chat.say("email"))
    await chat.resume(resolved(interrupt["id"], REMEMBER), principal="bob")

    approvers.clear()

    assert len(interrupts(await chat.say("email again"))) == 1
    assert office.ran == ["email ceo@x.io"]


def anyone(principal: str | None, owner: str | None, action: str) -> bool:
    return True


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], TurnStore]:
    """Opens the same store again, as a restarted server or another replica does: a new store object on its data.

    A `MemoryStore` lives in its process: "again" is the same object there.
    """
    if request.param == "memory":
        memory = MemoryStore()
        return lambda: memory
    if request.param == "sqlite":
        return lambda: SQLiteStore(tmp_path / "turns.db")
    dsn = fresh_schema_dsn()
    return lambda: PostgresStore(dsn)


async def test_two_racing_approvals_on_two_replicas_that_both_remember_store_one_grant(
    make_store: Callable[[], TurnStore],
) -> None:
    office = Office()
    here, there = make_store(), make_store()
    try:
        chat = Chat(office.adapter(here, authorize=anyone), principal="alice")
        (interrupt,) = interrupts(await chat.say("email"))
        other = Chat(office.adapter(there, authorize=anyone), "bob", chat.thread_id, list(chat.messages))

        both = await asyncio.gather(  # answers that differ: the loser is refused whether it came during or after
            chat.resume(resolved(interrupt["id"], {**REMEMBER, "reason": "alice says"})),
            other.resume(resolved(interrupt["id"], {**REMEMBER, "reason": "bob says"})),
        )
        thread = await chat.adapter.thread(chat.thread_id)
    finally:
        await here.close()
        if there is not here:
            await there.close()

    assert sorted(events[-1]["type"] for events in both) == ["RUN_ERROR", "RUN_FINISHED"]
    assert thread is not None
    assert len(thread["grants"]) == 1
    assert office.ran == ["email ceo@x.io"]
    winner = "alice" if both[0][-1]["type"] == "RUN_FINISHED" else "bob"
    assert thread["grants"][0]["grantedBy"] == winner


async def test_a_grant_survives_a_restart_and_serves_another_replica(make_store: Callable[[], TurnStore]) -> None:
    office = Office()
    first, second = make_store(), make_store()
    try:
        chat = Chat(office.adapter(first), principal="alice")
        await approve(chat, "email", REMEMBER)
        chat.adapter = office.adapter(second)  # another process on the same store

        later = await chat.say("email again")
        thread = await chat.adapter.thread(chat.thread_id, principal="alice")

        assert interrupts(later) == []
        assert office.ran == ["email ceo@x.io"] * 2
        assert thread is not None
        assert [g["tool"] for g in thread["grants"]] == ["send_email"]
        assert await chat.adapter.revoke_grant(chat.thread_id, "send_email", principal="alice") is True
        chat.adapter = office.adapter(first)
        assert len(interrupts(await chat.say("email once more"))) == 1
    finally:
        await first.close()
        if second is not first:
            await second.close()


async def test_a_deleted_threads_grants_are_gone_with_it() -> None:
    office = Office()
    adapter = office.adapter()
    chat = Chat(adapter)
    await approve(chat, "email", REMEMBER)

    assert await adapter.delete_thread(chat.thread_id) is True
    fresh = Chat(adapter, thread_id=chat.thread_id)

    assert len(interrupts(await fresh.say("email"))) == 1


async def test_a_revocation_while_a_run_is_in_progress_does_not_fail_it_and_counts_from_then() -> None:
    holder: list[Adapter] = []
    thread: list[str] = []

    @tool(requires_approval=True)
    async def send_email(to: str) -> str:
        """Send an email; the second time, someone revokes the thread's grant of it meanwhile."""
        if to == "x@x.io":
            assert await holder[0].revoke_grant(thread[0], "send_email") is True
        return f"sent to {to}"

    @tool(requires_approval=True, grantable=False)
    def pay(amount: int) -> str:
        """Pay."""
        return f"paid {amount}"

    both = Rule("email and pay", steps=[[Call("send_email", {"to": "x@x.io"})], [Call("pay", {"amount": 1})]])
    adapter = Adapter(ScriptedBackend([both, *RULES]), tools=[send_email, pay])
    holder.append(adapter)
    chat = Chat(adapter)
    thread.append(chat.thread_id)
    (interrupt,) = interrupts(await chat.say("email"))
    await chat.resume(resolved(interrupt["id"], REMEMBER))

    events = await chat.say("email and pay")

    (waiting,) = interrupts(events)  # the run stored its turn after the revocation, not THREAD_CONFLICT
    assert waiting["metadata"] == {"toolName": "pay"}
    read = await adapter.thread(chat.thread_id)
    assert read is not None
    assert read["grants"] == []


async def test_answers_resumed_from_python_remember_as_the_principal_that_gives_them() -> None:
    office = Office()
    adapter = office.adapter(authorize=anyone)
    chat = Chat(adapter, principal="alice")
    (email,) = interrupts(await chat.say("email"))

    remembered = [resolved(email["id"], REMEMBER)]
    applied = [event async for event in adapter.resume(chat.thread_id, remembered, principal="worker")]
    (pay,) = interrupts(await Chat(adapter, "alice", chat.thread_id).say("pay"))
    refused = [event async for event in adapter.resume(chat.thread_id, [resolved(pay["id"], REMEMBER)])]

    assert applied[-1].type == "RUN_FINISHED"
    assert office.ran == ["email ceo@x.io"]
    thread = await adapter.thread(chat.thread_id, principal="alice")
    assert thread is not None
    assert [(g["tool"], g["grantedBy"]) for g in thread["grants"]] == [("send_email", "worker")]
    assert refused[-1].type == "RUN_ERROR" and refused[-1].code == "RESUME_GRANT_REFUSED"  # type: ignore[attr-defined]
