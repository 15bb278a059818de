"""A resume's journal opens with its claim, in one store call (issue 43): its RUN_STARTED reaches no reader before
the claim commits, so a client that saw it finds the run on every replica; a resume whose claim is refused, or
whose run id's first attempt is taken, opens its journal alone and ends as before."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from ag_ui.core import RunAgentInput, Tool, UserMessage
from agui import interrupts_of

from adapter import Adapter
from adapter.backends import Call, Rule, ScriptedBackend
from adapter.stores import ANY_INCARNATION, JournalAppend, SQLiteStore, ThreadChange

NAVIGATE = Tool(
    name="navigate",
    description="Open a page.",
    parameters={"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)
RULES = [Rule(r"go to (\w+)", steps=[[Call("navigate", {"path": "/{1}"})]], reply="Opened it.")]


class HeldClaim(SQLiteStore):
    """A SQLiteStore whose claims wait for the test: `entered` once one is under way, `release` lets it go on."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.entered = asyncio.Event()
        self.release = asyncio.Event()
        self.claims: list[list[str]] = []
        """Each claim's journal events' types, in store calls: [] for a claim stored alone."""

    async def save(
        self,
        thread_id: str,
        change: ThreadChange,
        *,
        expected_version: int,
        fence: int | None = None,
        incarnation: object = ANY_INCARNATION,
    ) -> int:
        if change.claim:
            self.claims.append([])
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
        if change.claim:
            self.claims.append([json.loads(event.json)["type"] for event in journal.events])
            self.entered.set()
            await self.release.wait()
        return await super().save_and_append(
            thread_id, change, journal, expected_version=expected_version, fence=fence, incarnation=incarnation
        )


def opening() -> RunAgentInput:
    return RunAgentInput(
        thread_id="t", run_id="r0", messages=[UserMessage(id="u", content="go to x")], tools=[NAVIGATE], context=[]
    )


async def suspended(adapter: Adapter) -> dict[str, Any]:
    events = [event async for event in adapter.run(opening())]
    (interrupt,) = interrupts_of(events[-1])
    return {"interruptId": interrupt.id, "status": "resolved", "payload": {"navigated": True}}


def resuming(entry: dict[str, Any], run_id: str = "r1") -> RunAgentInput:
    return RunAgentInput.model_validate({**opening().model_dump(by_alias=True), "runId": run_id, "resume": [entry]})


async def types_of(adapter: Adapter, run_id: str) -> list[str]:
    events = await adapter.run_events("t", run_id)
    assert events is not None
    return [json.loads(event.json)["type"] async for event in events]


async def test_a_resumes_run_started_reaches_no_one_before_its_claim_commits(tmp_path: Path) -> None:
    store = HeldClaim(tmp_path / "t.db")
    store.release.set()
    adapter = Adapter(ScriptedBackend(RULES), store=store, frontend_outcome="interrupt")
    other = Adapter(ScriptedBackend(RULES), store=SQLiteStore(tmp_path / "t.db"))  # another replica
    entry = await suspended(adapter)
    store.release.clear()

    events = await adapter.start(resuming(entry))
    first = asyncio.ensure_future(anext(aiter(events)))
    await asyncio.wait_for(store.entered.wait(), 30)  # the claim carries the opening: one save_and_append
    seen_before, elsewhere_before = first.done(), await other.run_events("t", "r1")
    stop_before = await other.stop_run("t", "r1")
    store.release.set()
    started = await first
    elsewhere_after, stop_after = await other.run_events("t", "r1"), await other.stop_run("t", "r1")
    rest = [event.type async for event in events]

    assert (seen_before, elsewhere_before, stop_before) == (False, None, None)  # as for a stop that overtook it
    assert started.type == "RUN_STARTED"
    assert elsewhere_after is not None
    assert stop_after is not None  # asked (True), or the run ended first (False): found either way
    assert rest[-1] == "RUN_FINISHED"
    assert store.claims == [["RUN_STARTED", "MESSAGES_SNAPSHOT"]]  # the events made before the claim
    assert (await types_of(other, "r1"))[0] == "RUN_STARTED"
    await adapter.aclose()
    await other.aclose()


class ClaimedFirst(SQLiteStore):
    """Another request claims the turn just before this resume's claim lands."""

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
        if change.claim:
            await self.save(thread_id, ThreadChange(claim=True), expected_version=expected_version)
        return await super().save_and_append(
            thread_id, change, journal, expected_version=expected_version, fence=fence, incarnation=incarnation
        )


async def test_a_resume_whose_claim_is_refused_opens_its_journal_alone_and_ends_with_the_refusal(
    tmp_path: Path,
) -> None:
    adapter = Adapter(ScriptedBackend(RULES), store=ClaimedFirst(tmp_path / "t.db"), frontend_outcome="interrupt")
    entry = await suspended(adapter)

    events = [event async for event in adapter.run(resuming(entry))]

    assert [event.type for event in events] == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "RUN_ERROR"]
    assert getattr(events[-1], "code", None) == "RESUME_CONFLICT"
    assert await types_of(adapter, "r1") == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "RUN_ERROR"]
    await adapter.aclose()


async def test_a_resume_under_a_run_id_whose_first_attempt_is_taken_opens_the_next_and_claims_alone(
    tmp_path: Path,
) -> None:
    """The run id's first attempt is an earlier resume's, stopped before its claim: the merged call is refused."""
    store = HeldClaim(tmp_path / "t.db")
    store.release.set()
    adapter = Adapter(ScriptedBackend(RULES), store=store, frontend_outcome="interrupt", on_disconnect="stop")
    entry = await suspended(adapter)
    stopped = await adapter.start(resuming(entry))
    assert await adapter.stop_run("t", "r1") is True
    assert [event.type async for event in stopped][-1] == "RUN_FINISHED"
    other = Adapter(ScriptedBackend(RULES), store=store, frontend_outcome="interrupt")  # knows no live run of it

    events = [event.type async for event in other.run(resuming(entry))]

    assert events[0] == "RUN_STARTED"
    assert events[-1] == "RUN_FINISHED"
    assert store.claims == [["RUN_STARTED", "MESSAGES_SNAPSHOT"], []]
    latest = await types_of(other, "r1")
    assert (latest[0], latest[-1]) == ("RUN_STARTED", "RUN_FINISHED")
    assert "TOOL_CALL_RESULT" in latest
    await adapter.aclose()
    await other.aclose()
