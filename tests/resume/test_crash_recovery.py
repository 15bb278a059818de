"""A resume whose replica dies mid-tool or mid-forward is finished by another after the lease, once in the store."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from ag_ui.core import BaseEvent, RunAgentInput, UserMessage
from agui import Client, Reply, resolved
from clock import clocked
from replica_process import BOUND as _BOUND
from replica_process import Replica, journaled, until

from adapter import Adapter, Limits, ResumeError, ToolContext, tool
from adapter.backends import Call, Rule, ScriptedBackend
from adapter.stores import MemoryStore

if TYPE_CHECKING:
    from clock import Clock

LEASE = timedelta(minutes=5)


class Payments:
    """A `pay` tool that needs approval; its first execution stalls until released, as a hung replica would."""

    def __init__(self) -> None:
        self.contexts: list[ToolContext] = []
        self.started = asyncio.Event()
        self.release = asyncio.Event()

        @tool(requires_approval=True)
        async def pay(amount: str, ctx: ToolContext) -> str:
            """Pay an amount."""
            self.contexts.append(ctx)
            self.started.set()
            if len(self.contexts) == 1:
                await self.release.wait()
            return f"paid {amount}"

        self.tool = pay


@pytest.fixture
def payments() -> Payments:
    return Payments()


@pytest.fixture
def replicas(payments: Payments, clock: Clock) -> tuple[Adapter, Adapter]:
    """Two replicas of one app: one store, one clock."""
    store = MemoryStore()
    rules = [Rule(r"pay (?P<amount>\d+)", steps=[[Call("pay", {"amount": "{amount}"})]], reply="Done.")]
    return tuple(  # type: ignore[return-value]
        clocked(
            Adapter(ScriptedBackend(rules), tools=[payments.tool], store=store, limits=Limits(claim_lease=LEASE)), clock
        )
        for _ in range(2)
    )


async def events_of(stream: AsyncIterator[BaseEvent]) -> list[Any]:
    return [event async for event in stream]


async def suspended(adapter: Adapter) -> dict[str, Any]:
    """Ask for a payment on thread t1; return the resume entry that approves it."""
    opening = RunAgentInput(
        thread_id="t1", run_id="r0", messages=[UserMessage(id="u1", content="pay 10")], tools=[], context=[]
    )
    (interrupt,) = (await events_of(adapter.run(opening)))[-1].outcome.interrupts
    return {"interruptId": interrupt.id, "status": "resolved", "payload": {"approved": True}}


async def stall(replica: Adapter, payments: Payments) -> tuple[dict[str, Any], asyncio.Future[list[Any]]]:
    """Approve the payment on `replica` and wait until its tool runs (and stalls): a replica about to die."""
    approval = await suspended(replica)
    stalled = asyncio.ensure_future(events_of(replica.resume("t1", [approval], run_id="r1")))
    await payments.started.wait()
    return approval, stalled


async def test_after_the_lease_the_same_resume_finishes_the_turn(
    replicas: tuple[Adapter, Adapter], payments: Payments, clock: Clock
) -> None:
    first, second = replicas
    approval, stalled = await stall(first, payments)

    early = await events_of(second.resume("t1", [approval], run_id="r1"))
    clock.advance(LEASE)
    taken_over = await events_of(second.resume("t1", [approval], run_id="r1"))

    assert (early[-1].type, early[-1].code) == ("RUN_ERROR", "RESUME_CONFLICT")
    assert taken_over[-1].type == "RUN_FINISHED"
    assert taken_over[-1].outcome.type == "success"
    assert [ctx.idempotency_key for ctx in payments.contexts] == [payments.contexts[0].idempotency_key] * 2
    after_takeover = await second.store.load("t1")
    payments.release.set()
    late = await stalled

    assert (late[-1].type, late[-1].code) == ("RUN_ERROR", "THREAD_CONFLICT")
    await first.aclose()  # the stalled replica's shielded work is done
    assert await second.store.load("t1") == after_takeover  # its late writes were fenced off
    replayed = await events_of(second.resume("t1", [approval], run_id="r1"))
    assert replayed[-1].type == "RUN_FINISHED"
    assert len(payments.contexts) == 2


async def test_after_the_lease_a_different_answer_to_a_started_tool_is_refused(
    replicas: tuple[Adapter, Adapter], payments: Payments, clock: Clock
) -> None:
    """A denial, a cancel or other edits after a takeover would contradict the execution the first attempt began."""
    first, second = replicas
    approval, stalled = await stall(first, payments)
    before = await second.store.load("t1")
    clock.advance(LEASE)
    interrupt_id = approval["interruptId"]

    denied = await events_of(second.resume("t1", [{**approval, "payload": {"approved": False}}], run_id="r2"))
    cancelled = await events_of(second.resume("t1", [{"interruptId": interrupt_id, "status": "cancelled"}]))
    edited = {**approval, "payload": {"approved": True, "editedArgs": {"amount": "99"}}}
    other_edits = await events_of(second.resume("t1", [edited], run_id="r3"))
    with pytest.raises(ResumeError) as cancel_turn:
        await second.cancel_turn("t1")

    for refused in (denied, cancelled, other_edits):
        assert (refused[-1].type, refused[-1].code) == ("RUN_ERROR", "RESUME_CONFLICT")
        assert "may have run" in refused[-1].message
    assert cancel_turn.value.code == "RESUME_CONFLICT"
    assert "may have run" in cancel_turn.value.message
    assert await second.store.load("t1") == before
    assert len(payments.contexts) == 1
    finished = await events_of(second.resume("t1", [approval], run_id="r4"))
    assert finished[-1].type == "RUN_FINISHED"
    assert len(payments.contexts) == 2
    payments.release.set()
    assert (await stalled)[-1].code == "THREAD_CONFLICT"
    stored = (await second.thread("t1") or {})["messages"]
    assert [m["content"] for m in stored if m["role"] == "tool"] == ["paid 10"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("mid", "say"),
    [
        pytest.param("tool", "pay 10", id="mid-tool"),  # while the approved tool runs
        pytest.param("forward", "confirm", id="mid-forward"),  # while it forwards an answer to the upstream's own
    ],
)
async def test_a_replica_killed_mid_resume_is_finished_by_the_next(tmp_path: Path, mid: str, say: str) -> None:
    """Killed mid-tool or mid-forward: the same answer, sent to the next replica, finishes the turn, once."""
    db, journal = tmp_path / "turns.db", tmp_path / "journal"
    hold = tmp_path / "journal.hold"
    first = Replica("tests/crash_server.py", db, journal, 0.5)
    replicas = [first]
    try:
        async with httpx.AsyncClient(timeout=_BOUND) as http:
            await first.ready(http)
            thread = Client(http, first.url).thread()
            (interrupt,) = (await thread.say(say)).interrupts
            answer = resolved(interrupt["id"], {"approved": True})
            hold.touch()
            resuming = asyncio.ensure_future(thread.resume(answer))

            async def journaled_once() -> bool | None:
                return len(journaled(journal)) == 1 or None

            await until(journaled_once, f"the {mid} to start")
            first.kill()
            with contextlib.suppress(httpx.TransportError):
                await resuming
            hold.unlink()
            second = Replica("tests/crash_server.py", db, journal, 0.5)
            replicas.append(second)
            await second.ready(http)
            again = Client(http, second.url).thread(thread_id=thread.id)

            async def finished() -> Reply | None:
                reply = await again.resume(answer, clean=False)
                return None if reply.of("RUN_ERROR") and reply.error["code"] == "RESUME_CONFLICT" else reply

            reply = await until(finished, "the lease to lapse")
            replayed = await again.resume(answer)
            stored = (await again.client.get(f"/threads/{thread.id}")).json()
    finally:
        for replica in replicas:
            if replica.process.poll() is None:
                replica.kill()

    assert reply.outcome == {"type": "success"}
    runs = journaled(journal)
    assert [run.pop("pid") for run in runs] == [first.process.pid, second.process.pid]
    # At least once, and the same work both times: the tool with one idempotency key, or the one answer forwarded.
    assert runs[0] == runs[1] == ({"forward": {"approved": True}} if mid == "forward" else {"key": runs[0]["key"]})
    assert replayed.outcome == {"type": "success"}
    assert len(journaled(journal)) == 2
    assert stored["interrupts"] == []
    if mid == "tool":
        assert "paid 10" in reply.results()[interrupt["toolCallId"]]["content"]
    else:
        said = [m.get("content") for m in stored["messages"] if m["role"] == "assistant"]
        assert said.count("confirmed") == 1
