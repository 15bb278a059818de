"""A replica that dies while forwarding answers to the backend's own interrupt: after the lease, the same resume ends
the turn, exactly once; a forward refused after such a takeover gives the turn back unclaimed and not blocked."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ag_ui.core import Interrupt, RunAgentInput
from agui import collect, resolved, run_input, user
from clock import clocked
from hypothesis import given, settings
from hypothesis import strategies as st

from adapter import Adapter, Limits, tool
from adapter.backends import BackendError, BackendInterrupt, BackendItem, ModelRequest, TextDelta, ToolCall
from adapter.stores import MemoryStore, SQLiteStore, ThreadHead, TurnStore

LEASE = timedelta(minutes=5)
LIMITS = Limits(claim_lease=LEASE)
ANSWER = resolved("up-1", {"approved": True})


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2030, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


class Upstream:
    """Stops for its own interrupt; each forward of its answers then dies, is refused or is accepted, as scripted.

    A forward that "dies" hangs until `release` is set, as a replica that died or stalled mid-forward.
    """

    def __init__(self, script: list[str]) -> None:
        self.script = list(script)
        self.forwards: list[str] = []
        self.hanging = asyncio.Semaphore(0)
        self.release = asyncio.Event()

    async def stream(self, request: ModelRequest) -> AsyncIterator[BackendItem]:
        if not request.resume:
            yield BackendInterrupt([Interrupt(id="up-1", reason="confirmation")])
            return
        what = self.script.pop(0) if self.script else "accept"
        self.forwards.append(what)
        if what == "die":
            self.hanging.release()
            await self.release.wait()
            yield TextDelta("late")
        elif what == "refuse":
            raise BackendError("The upstream agent failed: no such interrupt", code="UPSTREAM_ERROR")
        else:
            yield TextDelta("accepted")


async def resume(replica: Adapter, entries: dict[str, Any] | list[dict[str, Any]] = ANSWER) -> list[dict[str, Any]]:
    body = run_input("t", [], resume=entries if isinstance(entries, list) else [entries])
    return await collect(replica.run(RunAgentInput.model_validate(body)), resumed=True)


async def head(store: TurnStore) -> ThreadHead:
    stored = await store.load("t", since=None)
    assert stored is not None
    return stored.head


def blocked(turn_head: ThreadHead) -> bool:
    """An unclaimed open turn beside an unfinished applied record: every resume would get "still applying"."""
    applied = turn_head.applied
    unclaimed = turn_head.open_turn is not None and turn_head.open_turn["claimed_by"] is None
    return unclaimed and applied is not None and applied["outcome"] is None


async def dying(replica: Adapter, upstream: Upstream) -> asyncio.Future[list[dict[str, Any]]]:
    """Resume on `replica` and wait until its forward hangs: a replica about to die."""
    hung = asyncio.ensure_future(resume(replica))
    await upstream.hanging.acquire()
    return hung


def texts(stored: dict[str, Any] | None) -> list[str]:
    assert stored is not None
    return [m["content"] for m in stored["messages"] if m["role"] == "assistant" and m.get("content")]


async def test_a_replica_that_dies_mid_forward_is_taken_over_with_the_same_answer(tmp_path: Path) -> None:
    """Two replicas on one SQLite file: the first hangs mid-forward, the second finishes the turn after the lease."""
    upstream, clock = Upstream(["die"]), Clock()
    first, second = (
        clocked(Adapter(upstream, store=SQLiteStore(tmp_path / "turns.db"), limits=LIMITS), clock) for _ in range(2)
    )
    await collect(first.run(RunAgentInput.model_validate(run_input("t", [user("go")]))))
    hung = await dying(first, upstream)

    during = await head(second.store)
    early = await resume(second)
    clock.now += LEASE
    other = await resume(second, resolved("up-1", {"approved": False}))
    taken_over = await resume(second)
    after = await head(second.store)
    replayed = await resume(second)
    upstream.release.set()
    late = await hung
    await first.aclose()

    # the claim is stored
    assert during.open_turn is not None
    assert during.open_turn["claimed_by"] is not None
    assert (early[-1]["type"], early[-1]["code"]) == ("RUN_ERROR", "RESUME_CONFLICT")
    assert (other[-1]["code"], "may have run" in other[-1]["message"]) == ("RESUME_CONFLICT", True)
    assert taken_over[-1]["outcome"] == {"type": "success"}
    assert replayed[-1]["outcome"] == {"type": "success"}
    assert (late[-1]["type"], late[-1]["code"]) == ("RUN_ERROR", "THREAD_CONFLICT")
    assert await head(second.store) == after  # the dead replica's late writes were fenced off
    assert upstream.forwards == ["die", "accept"]  # the replay forwarded nothing
    assert texts(await second.thread("t")) == ["accepted"]
    await second.aclose()


async def test_a_forward_refused_after_a_takeover_gives_the_turn_back_unclaimed(tmp_path: Path) -> None:
    upstream, clock = Upstream(["die", "refuse"]), Clock()
    first, second = (
        clocked(Adapter(upstream, store=SQLiteStore(tmp_path / "turns.db"), limits=LIMITS), clock) for _ in range(2)
    )
    await collect(first.run(RunAgentInput.model_validate(run_input("t", [user("go")]))))
    hung = await dying(first, upstream)
    clock.now += LEASE

    refused = await resume(second)
    reopened = await head(second.store)
    applied = await resume(second)
    upstream.release.set()
    await hung
    await first.aclose()

    assert (refused[-1]["type"], refused[-1]["code"]) == ("RUN_ERROR", "UPSTREAM_ERROR")
    assert reopened.open_turn is not None
    assert [c["interrupt_id"] for c in reopened.open_turn["pending"]] == ["up-1"]
    assert (reopened.open_turn["claimed_by"], reopened.open_turn["claimed_at"]) == (None, None)
    assert not blocked(reopened)
    assert applied[-1]["outcome"] == {"type": "success"}
    assert upstream.forwards == ["die", "refuse", "accept"]
    await second.aclose()


async def test_a_takeover_repeats_the_answers_the_dead_replica_applied_before_its_forward(tmp_path: Path) -> None:
    """An approval answered with the upstream's interrupt: its tool ran before the forward, and is not run again."""
    payments: list[str] = []

    @tool(requires_approval=True)
    async def pay(amount: str) -> str:
        """Pay an amount."""
        payments.append(amount)
        return f"paid {amount}"

    class AlsoPaying(Upstream):
        async def stream(self, request: ModelRequest) -> AsyncIterator[BackendItem]:
            if not request.resume:
                yield ToolCall("call-pay", "pay", '{"amount": "10"}')
            async for item in super().stream(request):
                yield item

    upstream, clock = AlsoPaying(["die"]), Clock()
    store = tmp_path / "turns.db"
    first, second = (
        clocked(Adapter(upstream, tools=[pay], store=SQLiteStore(store), limits=LIMITS), clock) for _ in range(2)
    )
    asked = await collect(first.run(RunAgentInput.model_validate(run_input("t", [user("go")]))))
    approval, upstreams = [resolved(i["id"], {"approved": True}) for i in asked[-1]["outcome"]["interrupts"]]
    entries = [approval, upstreams]
    hung = asyncio.ensure_future(resume(first, entries))
    await upstream.hanging.acquire()
    clock.now += LEASE

    denied = await resume(second, [{**approval, "payload": {"approved": False}}, upstreams])
    taken_over = await resume(second, entries)
    replayed = await resume(second, entries)
    upstream.release.set()
    await hung
    await first.aclose()
    await second.aclose()

    assert (denied[-1]["code"], "answered differently" in denied[-1]["message"]) == ("RESUME_CONFLICT", True)
    assert taken_over[-1]["outcome"] == {"type": "success"}
    assert replayed[-1]["outcome"] == {"type": "success"}
    assert payments == ["10"]
    assert upstream.forwards == ["die", "accept"]


async def attempts(script: list[str]) -> None:
    """Resume with one answer on a fresh replica per attempt, each forward going as `script` says, until accepted."""
    store, clock, upstream = MemoryStore(), Clock(), Upstream(script)

    def replica() -> Adapter:
        return clocked(Adapter(upstream, store=store, limits=LIMITS), clock)

    await collect(replica().run(RunAgentInput.model_validate(run_input("t", [user("go")]))))
    dead: list[tuple[Adapter, asyncio.Future[list[dict[str, Any]]]]] = []
    for what in script:
        if what == "die":
            one = replica()
            dead.append((one, await dying(one, upstream)))
            turn = (await head(store)).open_turn
            assert turn is not None
            assert turn["claimed_by"] is not None
            assert (await resume(replica()))[-1]["code"] == "RESUME_CONFLICT"  # a live claim is never raced
            clock.now += LEASE
        else:
            assert (await resume(replica()))[-1]["code"] == "UPSTREAM_ERROR"
        assert not blocked(await head(store))
    assert (await resume(replica()))[-1]["outcome"] == {"type": "success"}
    finished = await head(store)
    upstream.release.set()
    for one, hung in dead:
        assert (await hung)[-1]["type"] == "RUN_ERROR"
        await one.aclose()
    assert await head(store) == finished
    assert (await resume(replica()))[-1]["outcome"] == {"type": "success"}  # a replay: nothing forwarded
    assert upstream.forwards == [*script, "accept"]
    assert texts(await replica().thread("t")) == ["accepted"]


@settings(max_examples=40)
@given(st.lists(st.sampled_from(["die", "refuse"]), max_size=4))
def test_whatever_became_of_earlier_forwards_the_same_answer_ends_the_turn_once(script: list[str]) -> None:
    """No forward that died or was refused leaves the thread blocked; the same answer then ends the turn once."""
    asyncio.run(attempts(script))


async def test_a_run_whose_claim_lapsed_while_its_tool_ran_cannot_hold_the_turn(tmp_path: Path) -> None:
    """A mixed turn: the approved tool outlasts the lease, another replica finishes the turn with the same answers;
    the first, done at last, finds the turn taken over when it would hold it for its forward: THREAD_CONFLICT, and
    the finished turn stays as the takeover stored it."""
    slow, payments = asyncio.Event(), []
    running = asyncio.Semaphore(0)

    @tool(requires_approval=True)
    async def pay(amount: str) -> str:
        """Pay an amount."""
        payments.append(amount)
        if len(payments) == 1:
            running.release()
            await slow.wait()
        return f"paid {amount}"

    class AlsoPaying(Upstream):
        async def stream(self, request: ModelRequest) -> AsyncIterator[BackendItem]:
            if not request.resume:
                yield ToolCall("call-pay", "pay", '{"amount": "10"}')
            async for item in super().stream(request):
                yield item

    upstream, clock = AlsoPaying([]), Clock()
    first, second = (
        clocked(Adapter(upstream, tools=[pay], store=SQLiteStore(tmp_path / "turns.db"), limits=LIMITS), clock)
        for _ in range(2)
    )
    asked = await collect(first.run(RunAgentInput.model_validate(run_input("t", [user("go")]))))
    entries = [resolved(i["id"], {"approved": True}) for i in asked[-1]["outcome"]["interrupts"]]
    slow_run = asyncio.ensure_future(resume(first, entries))
    await running.acquire()
    clock.now += LEASE

    taken_over = await resume(second, entries)
    finished = await head(second.store)
    slow.set()
    late = await slow_run
    await first.aclose()

    assert taken_over[-1]["outcome"] == {"type": "success"}
    assert (late[-1]["type"], late[-1]["code"]) == ("RUN_ERROR", "THREAD_CONFLICT")
    assert await head(second.store) == finished  # nothing of the late run was stored, nothing of the takeover lost
    assert upstream.forwards == ["accept"]
    assert texts(await second.thread("t")) == ["accepted"]
    await second.aclose()
