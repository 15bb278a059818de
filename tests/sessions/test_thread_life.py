"""A thread's life is its identity: nothing of a deleted thread's runs reaches a thread created again under its id.

Issue 40's reproductions, each on every store: a late save of a deleted life, a live run of an earlier life read
by the next owner, a run id used again, a snapshot past the journal's limits.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from ag_ui.core import BaseEvent, RunAgentInput, UserMessage
from pg import every_store
from sessions_kit import journal_of

from adapter import Adapter, Limits, ToolContext, create_app, tool
from adapter.backends import Call, Rule, ScriptedBackend
from adapter.stores import MemoryStore, TurnStore

STORES = every_store()


@pytest.fixture(params=STORES)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[TurnStore]:
    factory: Callable[[Path], TurnStore] = request.param
    instance = factory(tmp_path)
    yield instance
    await instance.close()


class Payments:
    """A `pay` tool that needs approval; a payment of 5 waits until the test releases it."""

    def __init__(self) -> None:
        self.paid: list[tuple[str, str]] = []
        self.started = asyncio.Event()
        self.release = asyncio.Event()

        @tool(requires_approval=True)
        async def pay(amount: str, ctx: ToolContext) -> str:
            """Pay an amount."""
            if amount == "5":
                self.started.set()
                await self.release.wait()
            self.paid.append((ctx.thread_id, amount))
            return f"paid {amount}"

        self.tool = pay


def alice_or_bob(principal: str | None, owner: str | None, action: str) -> bool:
    return owner is None or principal == owner


def opening(text: str, run_id: str, message_id: str) -> RunAgentInput:
    return RunAgentInput(
        thread_id="t1", run_id=run_id, messages=[UserMessage(id=message_id, content=text)], tools=[], context=[]
    )


async def events_of(stream: AsyncIterator[BaseEvent]) -> list[Any]:
    return [json.loads(event.model_dump_json(by_alias=True, exclude_none=True)) async for event in stream]


async def asked(adapter: Adapter, text: str, run_id: str, principal: str) -> dict[str, Any]:
    """Ask for a payment on t1; the resume entry that approves it."""
    events = await events_of(adapter.run(opening(text, run_id, f"u-{run_id}"), principal=principal))
    (interrupt,) = events[-1]["outcome"]["interrupts"]
    return {"interruptId": interrupt["id"], "status": "resolved", "payload": {"approved": True}}


def stored_texts(thread: dict[str, Any] | None) -> list[str]:
    assert thread is not None
    return [str(message.get("content")) for message in thread["messages"]]


@pytest.fixture
def payments() -> Payments:
    return Payments()


@pytest.fixture
def adapter(store: TurnStore, payments: Payments) -> Adapter:
    rules = [Rule(r"pay (?P<amount>\d+)", steps=[[Call("pay", {"amount": "{amount}"})]], reply="Done.")]
    return Adapter(ScriptedBackend(rules), tools=[payments.tool], store=store, authorize=alice_or_bob)


async def test_a_deleted_threads_late_save_never_lands_in_the_thread_created_again_under_its_id(
    adapter: Adapter, payments: Payments
) -> None:
    """Alice approves pay 5 and deletes the thread while it runs; Bob's thread under the id stays his alone."""
    approval = await asked(adapter, "pay 5", "a0", "alice")
    alices = asyncio.ensure_future(events_of(adapter.resume("t1", [approval], run_id="a1", principal="alice")))
    await payments.started.wait()
    assert await adapter.delete_thread("t1", principal="alice")

    # Bob's thread reaches the version and claim number Alice's run holds.
    bobs_approval = await asked(adapter, "pay 7", "b0", "bob")
    bobs = await events_of(adapter.resume("t1", [bobs_approval], run_id="b1", principal="bob"))
    payments.release.set()
    alice_ended = await alices

    assert bobs[-1]["type"] == "RUN_FINISHED", bobs[-1]
    assert alice_ended[-1] == {
        "type": "RUN_ERROR",
        "message": "the thread was deleted while this run was in progress",
        "code": "THREAD_DELETED",
    }
    thread = await adapter.thread("t1", principal="bob")
    texts = stored_texts(thread)
    assert "paid 7" in texts
    assert "paid 5" not in texts
    assert thread is not None
    assert thread["interrupts"] == []
    assert sorted(payments.paid) == [("t1", "5"), ("t1", "7")]  # Alice's ran, and is only in the log


async def test_a_plain_runs_messages_never_land_in_the_next_life(store: TurnStore) -> None:
    """A long run whose thread is deleted and created again stores nothing: the next owner sees none of it."""
    gate = asyncio.Event()
    started = asyncio.Event()

    class Slow:
        async def stream(self, request: Any) -> AsyncIterator[Any]:
            from adapter.backends import TextDelta

            if str(request.messages[-1].content) == "slow":
                started.set()
                await gate.wait()
            yield TextDelta(f"answer to {request.messages[-1].content}")

    adapter = Adapter(Slow(), store=store, authorize=alice_or_bob)
    first = await events_of(adapter.run(opening("hello", "a0", "u0"), principal="alice"))
    assert first[-1]["type"] == "RUN_FINISHED"
    slow = asyncio.ensure_future(events_of(adapter.run(opening("slow", "a1", "u1"), principal="alice")))
    await started.wait()
    assert await adapter.delete_thread("t1", principal="alice")
    await events_of(adapter.run(opening("mine", "b0", "u2"), principal="bob"))
    gate.set()
    ended = await slow

    assert ended[-1]["type"] == "RUN_ERROR"
    assert ended[-1]["code"] in ("THREAD_DELETED", "THREAD_CONFLICT")
    assert stored_texts(await adapter.thread("t1", principal="bob")) == ["mine", "answer to mine"]


async def test_a_live_run_of_an_earlier_life_is_read_and_stopped_by_no_one(
    adapter: Adapter, payments: Payments
) -> None:
    approval = await asked(adapter, "pay 5", "a0", "alice")
    alices = asyncio.ensure_future(events_of(adapter.resume("t1", [approval], run_id="a1", principal="alice")))
    await payments.started.wait()
    assert await adapter.run_events("t1", "a1", principal="alice") is not None
    assert await adapter.delete_thread("t1", principal="alice")
    await asked(adapter, "pay 7", "b0", "bob")

    assert await adapter.run_events("t1", "a1", principal="bob") is None
    assert await adapter.run_events("t1", "a1", principal="alice") is None
    assert await adapter.stop_run("t1", "a1", principal="bob") is None
    payments.release.set()
    await alices


async def test_a_run_id_used_again_is_journaled_and_can_be_stopped(store: TurnStore) -> None:
    """A retried input under its run id is a second attempt: journaled, read from the events route, stoppable."""
    gate = asyncio.Event()
    started = asyncio.Event()

    class Slow:
        async def stream(self, request: Any) -> AsyncIterator[Any]:
            from adapter.backends import TextDelta

            yield TextDelta("first ")
            if str(request.messages[-1].content) == "slow":
                started.set()
                await gate.wait()
            yield TextDelta("done")

    adapter = Adapter(Slow(), store=store)
    done = await events_of(adapter.run(opening("quick", "r1", "u0")))
    assert done[-1]["type"] == "RUN_FINISHED"

    again = await adapter.start(opening("slow", "r1", "u1"))
    reading = asyncio.ensure_future(events_of(again))
    await started.wait()

    assert again.journaled
    assert await adapter.stop_run("t1", "r1") is True
    gate.set()
    ended = await reading
    assert ended[-1]["type"] == "RUN_FINISHED"
    assert ended[-1]["outcome"] == {"type": "cancelled"}
    reattached = await adapter.run_events("t1", "r1")
    assert reattached is not None
    journaled = [json.loads(event.json) async for event in reattached]
    assert [event["type"] for event in journaled] == [event["type"] for event in ended]
    first_attempt = await store.read_events("t1", await journal_of(store, "t1", "r1"), limit=100)
    assert first_attempt is not None
    assert first_attempt.ended
    assert len(first_attempt.events) == len(done)


async def test_a_thread_longer_than_the_journals_limits_still_suspends_and_resumes(
    store: TurnStore, payments: Payments
) -> None:
    """The journal's limits bound what a backend makes: the restated thread never stops a turn."""
    rules = [Rule(r"pay (?P<amount>\d+)", steps=[[Call("pay", {"amount": "{amount}"})]], reply="Done.")]
    adapter = Adapter(
        ScriptedBackend(rules), tools=[payments.tool], store=store, limits=Limits(max_journal_chars=2_000)
    )
    history = [UserMessage(id=f"old{i}", content="x" * 500) for i in range(8)]
    run_input = opening("pay 7", "r0", "u0")
    run_input = run_input.model_copy(update={"messages": [*history, *run_input.messages]})

    suspended = await events_of(adapter.run(run_input))
    (interrupt,) = suspended[-1]["outcome"]["interrupts"]
    entry = {"interruptId": interrupt["id"], "status": "resolved", "payload": {"approved": True}}
    resumed = await events_of(adapter.resume("t1", [entry], run_id="r1"))

    assert resumed[-1]["type"] == "RUN_FINISHED", resumed[-1]
    snapshots = [event for event in [*suspended, *resumed] if event["type"] == "MESSAGES_SNAPSHOT"]
    assert snapshots
    assert all(len(json.dumps(event)) > 2_000 for event in snapshots)
    assert payments.paid == [("t1", "7")]
    reattached = await adapter.run_events("t1", "r0")
    assert reattached is not None
    assert [json.loads(event.json) async for event in reattached] == suspended


@pytest.mark.parametrize("field", ["threadId", "runId"])
@pytest.mark.parametrize("dots", [".", ".."])
async def test_an_id_no_url_path_can_carry_is_refused_at_creation(field: str, dots: str) -> None:
    app = create_app(Adapter(ScriptedBackend([Rule("hi", reply="hello")])))
    body: dict[str, Any] = {"threadId": "t1", "runId": "r1", "messages": [{"id": "u", "role": "user", "content": "hi"}]}
    body |= {"tools": [], "context": [], "state": None, "forwardedProps": None, field: dots}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
        response = await http.post("/", json=body)

    assert response.status_code == 422
    assert response.json()["error"]["code"] == "INVALID_ID"
    assert f"/{field}" in response.json()["error"]["message"]


async def test_a_cache_never_serves_a_thread_restored_and_written_again_to_the_state_it_remembers() -> None:
    """A restore from a backup, then a write on another replica, brings back (incarnation, version, count)."""
    import copy
    import dataclasses

    # private on purpose: read long threads by their head, as replicas do
    from adapter._thread._cache import ParsedThreads

    store = MemoryStore()
    backend = ScriptedBackend([Rule(r"say (\w+)", reply="ok")])
    first, second = (Adapter(backend, store=store) for _ in range(2))
    for replica in (first, second):
        replica.config = dataclasses.replace(replica.config, parsed=ParsedThreads(head_first=0))

    async def say(replica: Adapter, word: str) -> None:
        ran = await events_of(replica.run(opening(f"say {word}", f"r-{word}", f"u-{word}")))
        assert ran[-1]["type"] == "RUN_FINISHED"

    await say(first, "one")
    backup = copy.deepcopy(store._threads["t1"])
    await say(first, "two")  # the first replica keeps the thread as it wrote it
    store._threads["t1"] = backup  # the store is restored from the backup
    await say(second, "other")  # the same incarnation, version and count as the first replica remembers
    await say(first, "three")

    seen = [str(message.content) for message in backend.requests[-1].messages if message.role == "user"]
    assert seen == ["say one", "say other", "say three"]
