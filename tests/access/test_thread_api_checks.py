"""Every door asks the policy the same question for the same act; an outsider gets one refusal, on the head alone.

The doors are `Adapter.run` (a resume entry per answer), `Adapter.resume` (entries by action id or interrupt
id) and `cancel_turn` (every waiting call cancelled). The acts answer a turn that
waits on an approval and a client tool, or name a request that does not exist. The policies are every
table of (is the owner, action) -> bool.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from ag_ui.core import BaseEvent, RunAgentInput, RunErrorEvent, Tool, UserMessage
from hypothesis import given
from hypothesis import strategies as st

from adapter import Action, Adapter, AdapterError, Forbidden, tool
from adapter.backends import Call, Rule, ScriptedBackend
from adapter.stores import MemoryStore, StoredThread, TurnStore

ACTIONS: tuple[Action, ...] = ("read", "run", "resume", "approve")
Policy = dict[tuple[bool, Action], bool]
policies = st.fixed_dictionaries({(owner, action): st.booleans() for owner in (True, False) for action in ACTIONS})
NAVIGATE = Tool(name="navigate", description="Go to a page.", parameters={"type": "object", "properties": {}})
RULES = [Rule(r"pay", steps=[[Call("pay", {"amount": "10"}), Call("navigate", {"path": "/x"})]], reply="Done.")]


@tool(requires_approval=True)
async def pay(amount: str) -> str:
    """Pay an amount."""
    return f"paid {amount}"


def adapter(store: TurnStore, authorize: Callable[[str | None, str | None, Action], bool]) -> Adapter:
    return Adapter(ScriptedBackend(RULES), tools=[pay], store=store, frontend_outcome="interrupt", authorize=authorize)


async def waiting(store: TurnStore) -> dict[str, dict[str, Any]]:
    """Alice's thread t1, waiting on `pay`'s approval and a `navigate` call; its interrupts by tool name."""
    opening = RunAgentInput(
        thread_id="t1",
        run_id="r0",
        messages=[UserMessage(id="u1", content="pay")],
        tools=[NAVIGATE],
        context=[],
    )
    events = [event async for event in adapter(store, lambda *_: True).run(opening, principal="alice")]
    assert events[-1].type == "RUN_FINISHED"
    stored = await store.load("t1", since=None)
    assert stored is not None
    pending = stored.head.open_turn["pending"]
    return {call["tool_name"]: {"id": call["interrupt_id"], "toolCallId": call["tool_call_id"]} for call in pending}


APPROVAL = {"approve": {"approved": True}, "deny": {"approved": False}}
Act = tuple[str | None, str | None, bool]
"""The approval's answer (approve, deny, cancel or none), the client tool's (resolve, cancel or none), and
whether an entry names a request that does not exist."""
acts = st.tuples(
    st.sampled_from([None, "approve", "deny", "cancel"]), st.sampled_from([None, "resolve", "cancel"]), st.booleans()
).filter(lambda act: act != (None, None, False))


def entries(act: Act, interrupts: dict[str, dict[str, Any]], *, by_action: bool) -> list[dict[str, Any]]:
    """The act's resume entries, each naming its interrupt by id, or by its tool call's id (`actionId`)."""
    approval, answer, unknown = act
    made: list[dict[str, Any]] = []
    for name, said in (("pay", approval), ("navigate", answer)):
        if said is None:
            continue
        interrupt = interrupts[name]
        entry: dict[str, Any] = {"status": "cancelled" if said == "cancel" else "resolved"}
        if said in APPROVAL:
            entry["payload"] = APPROVAL[said]
        elif said == "resolve":
            entry["payload"] = "done"
        if by_action:
            entry["actionId"] = interrupt["toolCallId"]
        else:
            entry["interruptId"] = interrupt["id"]
        made.append(entry)
    if unknown:
        made.append({"actionId" if by_action else "interruptId": "call_made_up", "status": "cancelled"})
    return made


async def decision_of(door: Callable[[], Awaitable[Any]]) -> str:
    """The code of the refusal (raised, or the RUN_ERROR of a run its gate refused), or "allowed"."""
    try:
        said = await door()
    except (Forbidden, AdapterError) as refused:
        return refused.code
    if isinstance(said, list):
        errors = [event for event in said if event.type == "RUN_ERROR"]
        if errors and errors[0].code.startswith(("RESUME_", "THREAD_FORBIDDEN", "APPROVAL_FORBIDDEN")):
            return str(errors[0].code)
    return "allowed"


async def events_of(stream: AsyncIterator[BaseEvent]) -> list[BaseEvent]:
    return [event async for event in stream]


async def decisions(policy: Policy, principal: str, act: Act) -> dict[str, str]:
    """What each door decides for `principal` doing `act` on a fresh copy of alice's waiting thread."""

    def authorize(who: str | None, owner: str | None, action: Action) -> bool:
        return policy[(who == owner, action)]

    doors: dict[str, Callable[[Adapter, dict[str, dict[str, Any]]], Awaitable[Any]]] = {
        "run": lambda door, interrupts: events_of(
            door.run(
                RunAgentInput(
                    thread_id="t1",
                    run_id="r1",
                    messages=[],
                    tools=[],
                    context=[],
                    resume=entries(act, interrupts, by_action=False),
                ),
                principal=principal,
            )
        ),
        "resume by action id": lambda door, interrupts: events_of(
            door.resume("t1", entries(act, interrupts, by_action=True), principal=principal)
        ),
        "resume by interrupt id": lambda door, interrupts: events_of(
            door.resume("t1", entries(act, interrupts, by_action=False), principal=principal)
        ),
    }
    if act == ("cancel", "cancel", False):
        doors["cancel_turn"] = lambda door, interrupts: door.cancel_turn("t1", principal=principal)
    decided = {}
    for name, door in doors.items():
        store = MemoryStore()
        interrupts = await waiting(store)
        tested = adapter(store, authorize)
        decided[name] = await decision_of(lambda: door(tested, interrupts))  # noqa: B023 - awaited at once
    return decided


@given(policies, st.sampled_from(["alice", "bob"]), acts)
def test_every_door_decides_the_same_act_the_same_way(policy: Policy, principal: str, act: Act) -> None:
    decided = asyncio.run(decisions(policy, principal, act))

    assert len(set(decided.values())) == 1, decided
    if not any(policy[(principal == "alice", action)] for action in ("read", "resume", "approve")):
        assert set(decided.values()) == {"THREAD_FORBIDDEN"}  # an outsider: one refusal, whatever it asked


def four_eyes(principal: str | None, owner: str | None, action: Action) -> bool:
    """Someone other than the owner decides an approval; everything else is the owner's."""
    if action == "approve":
        return principal is not None and principal != owner
    return owner is None or principal == owner


async def test_under_four_eyes_the_owner_cannot_cancel_their_own_approval_through_cancel_turn() -> None:
    """The issue's case: `cancel_turn` returned True and recorded "cancelled" where `run` said APPROVAL_FORBIDDEN."""
    store = MemoryStore()
    await waiting(store)
    before = await store.load("t1")

    with pytest.raises(Forbidden) as refused:
        await adapter(store, four_eyes).cancel_turn("t1", principal="alice")

    assert refused.value.code == "APPROVAL_FORBIDDEN"
    assert await store.load("t1") == before


class Reads(MemoryStore):
    """Remembers what each load read: the head alone (`since=None`), or messages."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[int | None] = []

    async def load(self, thread_id: str, *, since: int | None = 0, until: int | None = None) -> StoredThread | None:
        self.reads.append(since)
        return await super().load(thread_id, since=since, until=until)


async def test_an_outsider_gets_one_refusal_from_every_door_having_read_the_head_alone() -> None:
    """A made-up action id or a real one: one THREAD_FORBIDDEN, before any message is read."""
    store = Reads()
    interrupts = await waiting(store)
    outsider = adapter(store, lambda who, owner, action: who == owner)
    real = {"actionId": interrupts["navigate"]["toolCallId"], "status": "resolved", "payload": "done"}
    made_up = {"actionId": "call_made_up", "status": "resolved", "payload": "done"}
    doors: dict[str, Callable[[], Awaitable[Any]]] = {
        "resume a real action id": lambda: events_of(outsider.resume("t1", [real], principal="bob")),
        "resume a made-up action id": lambda: events_of(outsider.resume("t1", [made_up], principal="bob")),
        "cancel_turn": lambda: outsider.cancel_turn("t1", principal="bob"),
    }
    refusals = {}
    for name, door in doors.items():
        store.reads.clear()
        with pytest.raises(Forbidden) as refused:
            await door()
        refusals[name] = (refused.value.code, refused.value.message, list(store.reads))

    one = ("THREAD_FORBIDDEN", "this caller may not use this thread", [None])
    assert refusals == dict.fromkeys(doors, one)
    assert await outsider.thread("t1", principal="bob") is None


async def test_a_made_up_action_id_is_refused_by_name_after_the_policy() -> None:
    store = MemoryStore()
    await waiting(store)
    owner = adapter(store, lambda *_: True)

    made_up = [{"actionId": "call_made_up", "status": "cancelled"}]
    refused = (await events_of(owner.resume("t1", made_up, principal="alice")))[-1]

    assert isinstance(refused, RunErrorEvent)
    assert refused.code == "RESUME_UNKNOWN_INTERRUPT"
    assert "action call_made_up" in refused.message
