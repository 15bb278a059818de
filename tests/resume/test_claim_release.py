"""A resume whose answers fail with a BaseException gives its claim back: the turn can be resumed at once."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from ag_ui.core import RunAgentInput, UserMessage

from adapter import Adapter, ToolContext, tool
from adapter.backends import Call, Rule, ScriptedBackend
from adapter.stores import MemoryStore


class Halt(BaseException):
    """Not an `Exception`: what KeyboardInterrupt or SystemExit would be inside a tool."""


def payments(failure: type[BaseException]) -> tuple[Adapter, list[str]]:
    """An adapter whose approved `pay` tool fails with `failure` the first time only."""
    paid: list[str] = []

    @tool(requires_approval=True)
    async def pay(amount: str, ctx: ToolContext) -> str:
        """Pay an amount."""
        paid.append(amount)
        if len(paid) == 1:
            raise failure()
        return f"paid {amount}"

    rules = [Rule(r"pay (?P<amount>\d+)", steps=[[Call("pay", {"amount": "{amount}"})]], reply="Done.")]
    return Adapter(ScriptedBackend(rules), tools=[pay], store=MemoryStore()), paid


async def events_of(adapter: Adapter, run_input: RunAgentInput) -> list[Any]:
    return [event async for event in adapter.run(run_input)]


@pytest.mark.parametrize("failure", [Halt, asyncio.CancelledError], ids=["base-exception", "cancelled"])
async def test_a_base_exception_while_applying_answers_releases_the_claim(failure: type[BaseException]) -> None:
    adapter, paid = payments(failure)
    opening = RunAgentInput(
        thread_id="t1", run_id="r0", messages=[UserMessage(id="u1", content="pay 10")], tools=[], context=[]
    )
    (interrupt,) = (await events_of(adapter, opening))[-1].outcome.interrupts
    suspended = await adapter.store.load("t1", since=None)
    approval = [{"interruptId": interrupt.id, "status": "resolved", "payload": {"approved": True}}]

    with pytest.raises(failure):
        [event async for event in adapter.resume("t1", approval, run_id="r1")]

    released = await adapter.store.load("t1", since=None)
    assert suspended is not None
    assert released is not None
    assert (released.head.open_turn, released.head.applied) == (suspended.head.open_turn, suspended.head.applied)
    again = [event async for event in adapter.resume("t1", approval, run_id="r2")]
    assert again[-1].type == "RUN_FINISHED"
    assert paid == ["10", "10"]
