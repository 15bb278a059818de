"""A resume whose answers were stored but whose outcome never was: "still applying" until the lease, then final.

The run that applied the answers lost its store (PostgreSQL cut) or its process (kill -9) before it
could record how it ended. Sending the same resume again, as docs/resuming.md says, gets RESUME_CONFLICT
with the seconds to wait while the claim's lease holds; after it, an error outcome (RUN_INTERRUPTED) that
is recorded once and stands, never a conflict for ever. Both for an approval and a denial (whose answers
are stored with the claim, in one save).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import AsyncIterator, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from ag_ui.core import BaseEvent, RunAgentInput, ToolMessage, UserMessage
from agui import Client, resolved
from clock import Clock, clocked
from hypothesis import given
from hypothesis import strategies as st
from replica_process import BOUND, Replica, journaled, until

from adapter import Adapter, Limits, tool
from adapter.backends import BackendItem, Call, ModelRequest, Rule, ScriptedBackend
from adapter.stores import (
    ANY_INCARNATION,
    JournalEvent,
    MemoryStore,
    RunJournal,
    StoredThread,
    StoreUnavailable,
    ThreadChange,
    ThreadSummary,
    TurnStore,
)

LEASE = timedelta(minutes=5)
LIMITS = Limits(claim_lease=LEASE)
ANSWERS = {"approve": {"approved": True}, "deny": {"approved": False}}
INTERRUPTED = "RUN_INTERRUPTED"


@tool(requires_approval=True)
async def pay(amount: str) -> str:
    """Pay an amount."""
    return f"paid {amount}"


RULES = [Rule(r"pay (?P<amount>\d+)", steps=[[Call("pay", {"amount": "{amount}"})]], reply="Done.")]


class CutAfterClosing:
    """A replica's view of the store, cut off for good by the save that stores a resume's answers (closes the turn)."""

    def __init__(self, inner: TurnStore) -> None:
        self.inner = inner
        self.cut = False

    def _check(self) -> None:
        if self.cut:
            raise StoreUnavailable("PostgreSQL could not be reached (the test cut it)")

    async def load(self, thread_id: str, *, since: int | None = 0, until: int | None = None) -> StoredThread | None:
        self._check()
        return await self.inner.load(thread_id, since=since, until=until)

    async def find_message(self, thread_id: str, message_id: str) -> int | None:
        self._check()
        return await self.inner.find_message(thread_id, message_id)

    async def save(
        self,
        thread_id: str,
        change: ThreadChange,
        *,
        expected_version: int,
        fence: int | None = None,
        incarnation: object = ANY_INCARNATION,
    ) -> int:
        self._check()
        version = await self.inner.save(
            thread_id, change, expected_version=expected_version, fence=fence, incarnation=incarnation
        )
        self.cut = change.open_turn is None  # the answers are stored; the outcome will not be
        return version

    async def purge(
        self, older_than: timedelta, *, grace: timedelta = timedelta(0), now: datetime | None = None
    ) -> int:
        self._check()
        return await self.inner.purge(older_than, grace=grace, now=now)

    async def append_events(
        self, thread_id: str, run_id: str, events: Sequence[JournalEvent], *, ended: bool = False
    ) -> bool:
        self._check()
        return await self.inner.append_events(thread_id, run_id, events, ended=ended)

    async def read_events(self, thread_id: str, run_id: str, *, after: int = 0, limit: int = 1000) -> RunJournal | None:
        self._check()
        return await self.inner.read_events(thread_id, run_id, after=after, limit=limit)

    async def request_stop(self, thread_id: str, run_id: str) -> bool:
        self._check()
        return await self.inner.request_stop(thread_id, run_id)

    async def list_threads(
        self, owner: str | None, *, before: str | None = None, limit: int = 100
    ) -> tuple[list[ThreadSummary], str | None]:
        self._check()
        return await self.inner.list_threads(owner, before=before, limit=limit)

    async def delete_thread(self, thread_id: str, *, incarnation: object = ANY_INCARNATION) -> bool:
        self._check()
        return await self.inner.delete_thread(thread_id, incarnation=incarnation)

    async def ping(self, *, write: bool = False) -> None:
        self._check()

    async def close(self) -> None:
        """The inner store is the test's."""


async def events_of(stream: AsyncIterator[BaseEvent]) -> list[Any]:
    return [event async for event in stream]


async def lost_outcome(store: MemoryStore, clock: Clock, answer: str) -> tuple[Adapter, dict[str, Any]]:
    """Thread t1's resume, `answer`ed on a replica whose store is cut once the answers are stored.

    Returns the other replica, on the same store and clock, and the resume entry to send again.
    """
    first = clocked(Adapter(ScriptedBackend(RULES), tools=[pay], store=CutAfterClosing(store), limits=LIMITS), clock)
    opening = RunAgentInput(
        thread_id="t1", run_id="r0", messages=[UserMessage(id="u1", content="pay 10")], tools=[], context=[]
    )
    (interrupt,) = (await events_of(first.run(opening)))[-1].outcome.interrupts
    entry = {"interruptId": interrupt.id, "status": "resolved", "payload": ANSWERS[answer]}
    cut_off = await events_of(first.resume("t1", [entry], run_id="r1"))
    assert (cut_off[-1].type, cut_off[-1].code) == ("RUN_ERROR", "STORE_UNAVAILABLE")
    stored = await store.load("t1", since=None)
    assert stored is not None
    assert stored.head.open_turn is None
    assert stored.head.applied["outcome"] is None
    second = clocked(Adapter(ScriptedBackend(RULES), tools=[pay], store=store, limits=LIMITS), clock)
    return second, entry


def ended_as(events: list[Any]) -> tuple[str, str | None, Any]:
    last = events[-1]
    details = (last.metadata or {}).get("details") if last.type == "RUN_ERROR" else None
    return last.type, getattr(last, "code", None), details


@pytest.mark.parametrize("answer", list(ANSWERS))
@given(waits=st.lists(st.integers(min_value=0, max_value=int(LEASE.total_seconds())), min_size=1, max_size=5))
async def test_a_replay_conflicts_until_the_lease_then_ends_with_one_final_outcome(
    answer: str, waits: list[int]
) -> None:
    store, clock = MemoryStore(), Clock()
    second, entry = await lost_outcome(store, clock, answer)
    waited, final = 0, None
    for wait in waits:
        clock.advance(timedelta(seconds=wait))
        waited += wait
        replay = await events_of(second.resume("t1", [entry], run_id="r1"))
        kind, code, details = ended_as(replay)
        if waited < LEASE.total_seconds():
            retry = math.ceil(LEASE.total_seconds() - waited)
            assert (kind, code, details) == ("RUN_ERROR", "RESUME_CONFLICT", {"retryAfter": retry})
            assert replay[-1].message.endswith(f"is still applying this resume; retry in {retry} s")
            continue
        assert (kind, code) == ("RUN_ERROR", INTERRUPTED)  # never a conflict after the lease
        assert "Read the thread" in replay[-1].message
        assert final in (None, replay[-1].message)  # the same every time
        final = replay[-1].message


@pytest.mark.parametrize("answer", list(ANSWERS))
async def test_the_outcome_a_lapsed_replay_gives_is_recorded_once_and_stands(answer: str, clock: Clock) -> None:
    store = MemoryStore()
    second, entry = await lost_outcome(store, clock, answer)
    before = await store.load("t1", since=None)
    clock.advance(LEASE)

    replays = await asyncio.gather(*(events_of(second.resume("t1", [entry], run_id="r1")) for _ in range(3)))
    stored = await store.load("t1", since=None)

    assert {ended_as(replay)[:2] for replay in replays} == {("RUN_ERROR", INTERRUPTED)}
    assert stored is not None
    assert stored.head.applied["outcome"]["code"] == INTERRUPTED
    assert stored.head.applied["outcome"]["message"] == replays[0][-1].message
    # the outcome, written once
    assert before is not None
    assert stored.head.version == before.head.version + 1


class Slow:
    """The scripted backend, held in the step after stored answers until released: a replica slower than the lease."""

    def __init__(self) -> None:
        self.scripted = ScriptedBackend(RULES)
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def stream(self, request: ModelRequest) -> AsyncIterator[BackendItem]:
        if request.messages and isinstance(request.messages[-1], ToolMessage):
            self.entered.set()
            await self.release.wait()
        async for item in self.scripted.stream(request):
            yield item


async def test_a_run_that_ends_after_its_lapsed_replay_stores_its_reply_but_not_its_outcome(clock: Clock) -> None:
    """The first outcome recorded stands: the late run's messages are kept after it, its own ending is not."""
    store, slow = MemoryStore(), Slow()
    first = clocked(Adapter(slow, tools=[pay], store=store, limits=LIMITS), clock)
    second = clocked(Adapter(ScriptedBackend(RULES), tools=[pay], store=store, limits=LIMITS), clock)
    opening = RunAgentInput(
        thread_id="t1", run_id="r0", messages=[UserMessage(id="u1", content="pay 10")], tools=[], context=[]
    )
    (interrupt,) = (await events_of(first.run(opening)))[-1].outcome.interrupts
    entry = {"interruptId": interrupt.id, "status": "resolved", "payload": {"approved": True}}
    late = asyncio.ensure_future(events_of(first.resume("t1", [entry], run_id="r1")))
    await slow.entered.wait()
    clock.advance(LEASE)

    lapsed = await events_of(second.resume("t1", [entry], run_id="r1"))
    slow.release.set()
    finished = await late
    again = await events_of(second.resume("t1", [entry], run_id="r1"))
    thread = await second.thread("t1")

    assert ended_as(lapsed)[:2] == ended_as(again)[:2] == ("RUN_ERROR", INTERRUPTED)
    assert finished[-1].type == "RUN_FINISHED"
    assert thread is not None
    assert [m.get("content") for m in thread["messages"]][-1] == "Done."


@pytest.mark.slow
@pytest.mark.parametrize("answer", list(ANSWERS))
async def test_a_replica_killed_after_storing_the_answers_leaves_a_replay_that_settles(
    tmp_path: Path, answer: str
) -> None:
    """The issue's case: after kill -9, the same resume got "still applying" for ever, even after the lease."""
    db, journal = tmp_path / "turns.db", tmp_path / "journal"
    hold = journal.with_name(journal.name + ".hold")
    first = Replica("tests/resume/applying_server.py", db, journal, 0.5)
    replicas = [first]
    try:
        async with httpx.AsyncClient(timeout=BOUND) as http:
            await first.ready(http)
            thread = Client(http, first.url).thread()
            (interrupt,) = (await thread.say("pay 10")).interrupts
            entry = resolved(interrupt["id"], ANSWERS[answer])
            hold.touch()
            resuming = asyncio.ensure_future(thread.resume(entry))

            async def stored_answers() -> bool | None:
                return bool(journaled(journal)) or None

            await until(stored_answers, "the answers to be stored")
            first.kill()
            with contextlib.suppress(httpx.TransportError):
                await resuming
            hold.unlink()
            second = Replica("tests/resume/applying_server.py", db, journal, 0.5)
            replicas.append(second)
            await second.ready(http)
            again = Client(http, second.url).thread(thread_id=thread.id)
            conflicts: list[dict[str, Any]] = []

            async def settled() -> Any:
                reply = await again.resume(entry, clean=False)
                if reply.error["code"] == "RESUME_CONFLICT":
                    conflicts.append(reply.error)
                    return None
                return reply

            reply = await until(settled, "the lease to lapse")
            replayed = await again.resume(entry, clean=False)
    finally:
        for replica in replicas:
            if replica.process.poll() is None:
                replica.kill()

    assert reply.error["code"] == replayed.error["code"] == INTERRUPTED
    assert reply.error["message"] == replayed.error["message"]
    for conflict in conflicts:
        assert conflict["metadata"]["details"]["retryAfter"] == 1  # the lease is half a second: at most 1 s to wait
    assert [run["pid"] for run in journaled(journal)] == [first.process.pid]  # nothing ran again
