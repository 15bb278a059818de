"""The engine's edges: a bug becomes a clean RUN_ERROR, a runaway model is stopped, a racing or crashed claim."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from agui import FRONTEND_TOOLS, new_id, resolved, run_input, user

from adapter import Adapter, Limits, tool
from adapter.backends import Call, Rule, ScriptedBackend
from adapter.stores import ANY_INCARNATION, JournalAppend, MemoryStore, StoreConflict, StoredThread, ThreadChange

if TYPE_CHECKING:
    from clock import Clock
    from conftest import Kit, MakeAdapter, Serve


class BrokenStore(MemoryStore):
    async def load(self, thread_id: str, *, since: int | None = 0, until: int | None = None) -> StoredThread | None:
        raise RuntimeError("disk on fire: /secret/path")


async def test_an_unexpected_failure_is_a_clean_internal_error(serve: Serve) -> None:
    served = await serve(Adapter(ScriptedBackend(), store=BrokenStore()))

    reply = await served.client.post(run_input(new_id("thread"), [user("hello")]))

    refusal = reply.refusal(500)
    assert refusal["code"] == "INTERNAL_ERROR"
    assert "secret" not in refusal["message"]
    assert "Traceback" not in refusal["message"]


async def test_a_model_that_never_stops_calling_tools_is_cancelled_at_max_steps(serve: Serve) -> None:
    @tool
    def ping() -> str:
        """Ping."""
        return "pong"

    forever = Rule(r"loop", steps=[[Call("ping")]] * 50)
    served = await serve(Adapter(ScriptedBackend([forever]), tools=[ping], limits=Limits(max_steps=3)))

    reply = await served.client.post(run_input(new_id("thread"), [user("loop")]))

    assert reply.outcome == {"type": "cancelled"}
    assert len(reply.of("TOOL_CALL_RESULT")) == 3


class RacingStore(MemoryStore):
    """Another replica writes the thread between this run's read and its claim (alone, or with its RUN_STARTED)."""

    race = False

    def _raced(self, thread_id: str, change: ThreadChange, expected_version: int) -> None:
        if self.race and change.claim:
            self.race = False
            raise StoreConflict(thread_id, expected_version)

    async def save(
        self,
        thread_id: str,
        change: ThreadChange,
        *,
        expected_version: int,
        fence: int | None = None,
        incarnation: object = ANY_INCARNATION,
    ) -> int:
        self._raced(thread_id, change, expected_version)
        return await super().save(
            thread_id, change, expected_version=expected_version, fence=fence, incarnation=incarnation
        )

    async def save_and_append(
        self,
        thread_id: str,
        change: ThreadChange,
        journal: JournalAppend,
        *,
        expected_version: int,
        fence: int | None = None,
        incarnation: object = ANY_INCARNATION,
    ) -> tuple[int, bool]:
        self._raced(thread_id, change, expected_version)
        return await super().save_and_append(
            thread_id, change, journal, expected_version=expected_version, fence=fence, incarnation=incarnation
        )


async def test_a_claim_that_loses_a_race_changes_nothing(serve: Serve, make_adapter: MakeAdapter, kit: Kit) -> None:
    store = RacingStore()
    served = await serve(make_adapter(store=store))
    thread = served.client.thread(tools=FRONTEND_TOOLS)
    (interrupt,) = (await thread.say("email ceo@x.io")).interrupts
    store.race = True

    lost = await thread.resume(resolved(interrupt["id"], {"approved": True}))
    won = await thread.resume(resolved(interrupt["id"], {"approved": True}))

    assert lost.error["code"] == "RESUME_CONFLICT"
    assert won.outcome == {"type": "success"}
    assert kit.count("send_email") == 1


async def test_a_claim_left_by_a_crashed_replica_expires_with_its_lease(
    serve: Serve, make_adapter: MakeAdapter, kit: Kit, clock: Clock
) -> None:
    store = MemoryStore()
    served = await serve(make_adapter(store=store, clock=clock, limits=Limits(claim_lease=timedelta(minutes=5))))
    thread = served.client.thread(tools=FRONTEND_TOOLS)
    (interrupt,) = (await thread.say("email ceo@x.io")).interrupts
    stored = await served.call(store.load(thread.id, since=None))
    assert stored is not None
    crashed = {**stored.head.open_turn, "claimed_by": "run-on-a-dead-replica", "claimed_at": clock.now.isoformat()}
    claimed = ThreadChange(open_turn=crashed, claim=True)
    await served.call(store.save(thread.id, claimed, expected_version=stored.head.version))
    entry = resolved(interrupt["id"], {"approved": True})

    while_held = await thread.resume(entry)
    clock.advance(timedelta(minutes=5, seconds=1))
    after_lease = await thread.resume(entry)

    assert while_held.error["code"] == "RESUME_CONFLICT"
    assert after_lease.outcome == {"type": "success"}
    assert kit.count("send_email") == 1
