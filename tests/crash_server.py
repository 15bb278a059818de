"""A replica for the crash test: one approval-gated tool, and an upstream interrupt, journaled, on SQLite.

    python tests/crash_server.py PORT DB JOURNAL LEASE_SECONDS [DRAIN_GRACE_SECONDS]

The `pay` tool appends `{"key": idempotency_key, "pid": ...}` to JOURNAL, and an answer forwarded to the
upstream's own interrupt (asked for by "confirm") appends `{"forward": payload, "pid": ...}`; each then
waits while the file JOURNAL.hold exists: the test kills the process with SIGKILL there, mid-tool or
mid-forward. With DRAIN_GRACE_SECONDS it is served as the demo is (examples/serving.py): SIGTERM drains it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import uvicorn
from ag_ui.core import Interrupt
from starlette.applications import Starlette

from adapter import Adapter, Limits, ToolContext, create_app, tool
from adapter.backends import BackendInterrupt, BackendItem, Call, ModelRequest, Rule, ScriptedBackend, TextDelta
from adapter.stores import SQLiteStore
from examples import serving
from examples.serving import KEEP_ALIVE_SECONDS  # the same keep-alive as every test server


async def held(journal: Path, entry: dict[str, object]) -> None:
    """Journal `entry`, then wait while JOURNAL.hold exists."""
    with journal.open("a") as lines:
        lines.write(json.dumps({**entry, "pid": os.getpid()}) + "\n")
    hold = journal.with_name(journal.name + ".hold")
    while hold.exists():
        await asyncio.sleep(0.02)


class Confirming:
    """The scripted backend, but "confirm" stops for the upstream's own interrupt, and its answer is journaled."""

    def __init__(self, scripted: ScriptedBackend, journal: Path) -> None:
        self.scripted = scripted
        self.journal = journal

    async def stream(self, request: ModelRequest) -> AsyncIterator[BackendItem]:
        if request.resume:
            await held(self.journal, {"forward": request.resume[0].payload})
            yield TextDelta("confirmed")
        elif request.messages and request.messages[-1].content == "confirm":
            yield BackendInterrupt([Interrupt(id="up-1", reason="confirmation")])
        else:
            async for item in self.scripted.stream(request):
                yield item


def build(db: str, journal: Path, lease: float, drain_grace: float = 30.0) -> tuple[Starlette, Adapter]:
    """The sub-app: "pay N" asks for approval of `pay`, which runs once approved; "confirm" asks the upstream's."""

    @tool(requires_approval=True)
    async def pay(amount: str, ctx: ToolContext) -> str:
        """Pay an amount."""
        await held(journal, {"key": ctx.idempotency_key})
        return f"paid {amount}"

    rules = [Rule(r"pay (?P<amount>\d+)", steps=[[Call("pay", {"amount": "{amount}"})]], reply="Done.")]
    backend = Confirming(ScriptedBackend(rules), journal)
    adapter = Adapter(
        backend,
        tools=[pay],
        store=SQLiteStore(db),
        limits=Limits(claim_lease=timedelta(seconds=lease), drain_grace=timedelta(seconds=drain_grace)),
    )
    return create_app(adapter), adapter


if __name__ == "__main__":
    port, db, journal, lease, *drain = sys.argv[1:]
    app, adapter = build(db, Path(journal), float(lease), *(float(grace) for grace in drain))
    if drain:
        flags = serving.add_server_flags(argparse.ArgumentParser()).parse_args(["--port", port])
        serving.run(app, flags, drain=adapter.drain)
    else:
        uvicorn.run(app, host="127.0.0.1", port=int(port), log_level="warning", timeout_keep_alive=KEEP_ALIVE_SECONDS)
