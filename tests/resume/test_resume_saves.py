"""What a resume writes, save by save, on a real SQLiteStore (issue 22: the round trip's store hops).

Answers whose applying runs nothing (a client's tool result, a denial) are claimed and stored in one
save; answers that start work are claimed in a save of their own, stored before the tool runs.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from ag_ui.core import RunAgentInput, Tool, UserMessage
from agui import interrupts_of
from forwarding_store import ForwardingStore

from adapter import Adapter, ToolContext, tool
from adapter.backends import Call, Rule, ScriptedBackend
from adapter.stores import KEEP, JournalAppend, SQLiteStore, ThreadChange

NAVIGATE = Tool(
    name="navigate",
    description="Open a page.",
    parameters={"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)


class Recording(ForwardingStore[SQLiteStore]):
    """A SQLiteStore that remembers each save it stored, alone or with journal events: (claim, the open turn's
    claimant, appended roles).

    The claimant is None for a turn closed by the save, "kept" for a save that leaves the turn as it was.
    """

    def __init__(self, path: Path) -> None:
        super().__init__(SQLiteStore(path))
        self.saves: list[tuple[bool, Any, list[str]]] = []

    async def save(self, thread_id: str, change: ThreadChange, **expected: Any) -> int:
        version = await super().save(thread_id, change, **expected)
        self._remember(change)
        return version

    async def save_and_append(
        self, thread_id: str, change: ThreadChange, journal: JournalAppend, **expected: Any
    ) -> tuple[int, bool]:
        saved = await super().save_and_append(thread_id, change, journal, **expected)
        self._remember(change)
        return saved

    def _remember(self, change: ThreadChange) -> None:
        turn = change.open_turn
        claimant = "kept" if turn is KEEP else turn.get("claimed_by") if isinstance(turn, dict) else turn
        self.saves.append((change.claim, claimant, [m.role for m in change.append]))


def opening(text: str, tools: list[Tool]) -> RunAgentInput:
    return RunAgentInput(
        thread_id="t", run_id="r0", messages=[UserMessage(id="u", content=text)], tools=tools, context=[]
    )


async def suspend(adapter: Adapter, text: str, tools: list[Tool]) -> str:
    events = [event async for event in adapter.run(opening(text, tools))]
    (interrupt,) = interrupts_of(events[-1])
    return str(interrupt.id)


async def test_a_client_tool_result_is_claimed_and_stored_in_one_save(tmp_path: Path) -> None:
    store = Recording(tmp_path / "t.db")
    rules = [Rule(r"go to (\w+)", steps=[[Call("navigate", {"path": "/{1}"})]], reply="Opened it.")]
    adapter = Adapter(ScriptedBackend(rules), store=store, frontend_outcome="interrupt")
    interrupt = await suspend(adapter, "go to x", [NAVIGATE])
    store.saves.clear()

    entry = {"interruptId": interrupt, "status": "resolved", "payload": {"navigated": True}}
    events = [event async for event in adapter.resume("t", [entry], run_id="r1")]

    assert events[-1].type == "RUN_FINISHED"
    assert store.saves == [(True, None, ["tool"]), (False, "kept", ["assistant"])]


async def test_an_approved_tool_runs_only_after_its_claim_is_stored(tmp_path: Path) -> None:
    store = Recording(tmp_path / "t.db")
    seen: list[list[tuple[bool, Any, list[str]]]] = []

    @tool(requires_approval=True)
    async def pay(amount: str, ctx: ToolContext) -> str:
        """Pay an amount."""
        seen.append(list(store.saves))
        return f"paid {amount}"

    rules = [Rule(r"pay (?P<amount>\d+)", steps=[[Call("pay", {"amount": "{amount}"})]], reply="Done.")]
    adapter = Adapter(ScriptedBackend(rules), tools=[pay], store=store)
    interrupt = await suspend(adapter, "pay 10", [])
    store.saves.clear()

    entry = {"interruptId": interrupt, "status": "resolved", "payload": {"approved": True}}
    events = [event async for event in adapter.resume("t", [entry], run_id="r1")]

    assert events[-1].type == "RUN_FINISHED"
    assert seen == [[(True, "r1", [])]]
    assert store.saves == [(True, "r1", []), (False, None, ["tool", "activity"]), (False, "kept", ["assistant"])]


async def test_racing_client_results_are_applied_once(tmp_path: Path) -> None:
    store = Recording(tmp_path / "t.db")
    rules = [Rule(r"go to (\w+)", steps=[[Call("navigate", {"path": "/{1}"})]], reply="Opened it.")]
    adapter = Adapter(ScriptedBackend(rules), store=store, frontend_outcome="interrupt")
    interrupt = await suspend(adapter, "go to x", [NAVIGATE])

    async def resume(run_id: str, page: str) -> list[Any]:
        entry = {"interruptId": interrupt, "status": "resolved", "payload": {"page": page}}
        return [event async for event in adapter.resume("t", [entry], run_id=run_id)]

    replies = await asyncio.gather(resume("r1", "a"), resume("r2", "b"))

    assert sorted(reply[-1].type for reply in replies) == ["RUN_ERROR", "RUN_FINISHED"]
    (refused,) = [reply[-1] for reply in replies if reply[-1].type == "RUN_ERROR"]
    assert refused.code == "RESUME_CONFLICT"
    stored = await store.load("t")
    assert stored is not None
    assert [m.role for m in stored.messages].count("tool") == 1
