"""A replica for the crash test: one approval-gated tool whose executions are journaled, on SQLite.

    python tests/crash_server.py PORT DB JOURNAL LEASE_SECONDS

The `pay` tool appends `{"key": idempotency_key, "pid": ...}` to JOURNAL, then waits while the file
JOURNAL.hold exists: the test kills the process with SIGKILL there, mid-tool.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from datetime import timedelta
from pathlib import Path

import uvicorn
from starlette.applications import Starlette

from adapter import Adapter, ToolContext, create_app, tool
from adapter.backends import Call, Rule, ScriptedBackend
from adapter.stores import SQLiteStore


def build(db: str, journal: Path, lease: float) -> Starlette:
    """The sub-app: "pay N" asks for approval of `pay`, which runs once approved."""

    @tool(requires_approval=True)
    async def pay(amount: str, ctx: ToolContext) -> str:
        """Pay an amount."""
        with journal.open("a") as lines:
            lines.write(json.dumps({"key": ctx.idempotency_key, "pid": os.getpid()}) + "\n")
        hold = journal.with_name(journal.name + ".hold")
        while hold.exists():
            await asyncio.sleep(0.02)
        return f"paid {amount}"

    rules = [Rule(r"pay (?P<amount>\d+)", steps=[[Call("pay", {"amount": "{amount}"})]], reply="Done.")]
    adapter = Adapter(ScriptedBackend(rules), tools=[pay], store=SQLiteStore(db), claim_lease=timedelta(seconds=lease))
    return create_app(adapter)


if __name__ == "__main__":
    port, db, journal, lease = sys.argv[1:5]
    uvicorn.run(build(db, Path(journal), float(lease)), host="127.0.0.1", port=int(port), log_level="warning")
