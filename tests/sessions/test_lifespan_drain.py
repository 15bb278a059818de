"""The sub-app drains from its lifespan: served without `examples/serving.py`, a stop lapses no turn for the lease."""

from __future__ import annotations

import asyncio
import re
from datetime import timedelta
from pathlib import Path
from types import TracebackType
from typing import Any

from ag_ui.core import RunAgentInput, UserMessage

from adapter import Adapter, Limits, ToolContext, create_app, tool
from adapter.backends import Call, Rule, ScriptedBackend
from adapter.stores import MemoryStore

REPLICAS = Path(__file__).parents[2] / "docs" / "replicas.md"


class Lifespan:
    """An ASGI server's lifespan around `app`: startup on entry, shutdown on exit (what uvicorn sends)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.outbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.task: asyncio.Future[None] | None = None

    async def __aenter__(self) -> Lifespan:
        scope = {"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}
        self.task = asyncio.ensure_future(self.app(scope, self.inbox.get, self.outbox.put))
        await self.inbox.put({"type": "lifespan.startup"})
        assert (await self.outbox.get())["type"] == "lifespan.startup.complete"
        return self

    async def __aexit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        await self.inbox.put({"type": "lifespan.shutdown"})
        assert (await self.outbox.get())["type"] == "lifespan.shutdown.complete"
        assert self.task is not None
        await self.task


async def test_a_stop_mid_tool_lapses_the_claim_so_another_replica_finishes_the_turn_at_once() -> None:
    started, release, paid = asyncio.Event(), asyncio.Event(), []

    @tool(requires_approval=True)
    async def pay(amount: str, ctx: ToolContext) -> str:
        """Pay an amount."""
        paid.append(ctx.idempotency_key)
        if len(paid) == 1:
            started.set()
            await release.wait()  # a tool slower than the grace
        return f"paid {amount}"

    store = MemoryStore()
    rules = [Rule(r"pay (?P<amount>\d+)", steps=[[Call("pay", {"amount": "{amount}"})]], reply="Done.")]

    def replica() -> Adapter:
        return Adapter(
            ScriptedBackend(rules), tools=[pay], store=store, limits=Limits(drain_grace=timedelta(milliseconds=50))
        )

    stopping, other = replica(), replica()
    opening = RunAgentInput(
        thread_id="t1", run_id="r0", messages=[UserMessage(id="u1", content="pay 5")], tools=[], context=[]
    )
    (interrupt,) = [event async for event in stopping.run(opening)][-1].outcome.interrupts  # type: ignore[attr-defined]
    approval = {"interruptId": interrupt.id, "status": "resolved", "payload": {"approved": True}}

    async with Lifespan(create_app(stopping)):
        cut = asyncio.ensure_future(_drain(stopping.resume("t1", [approval], run_id="r1")))
        await started.wait()
    await cut

    assert stopping.draining
    finished = [event async for event in other.resume("t1", [approval], run_id="r2")]
    assert finished[-1].type == "RUN_FINISHED", finished[-1]
    # taken over at once, under one idempotency key
    assert len(paid) == 2
    assert len(set(paid)) == 1
    release.set()


async def _drain(events: Any) -> list[Any]:
    return [event async for event in events]


async def test_the_mounted_apps_lifespan_in_the_docs_drains_the_adapter_as_written() -> None:
    text = REPLICAS.read_text(encoding="utf-8")
    section = text[text.index("\n## A graceful stop\n") :]
    found = re.search(r"```python\n(.*?)```", section, re.S)
    assert found is not None
    namespace: dict[str, Any] = {}
    exec(compile(found[1], str(REPLICAS), "exec"), namespace)

    async with Lifespan(namespace["app"]):
        assert not namespace["adapter"].draining

    assert namespace["adapter"].draining
