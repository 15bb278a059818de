"""A replica for the Postgres replica tests: one approval-gated tool whose executions are journaled.

    python tests/replica_server.py PORT DSN JOURNAL LEASE_SECONDS

"pay N" asks for approval of `pay`; once approved it appends `{"key", "pid", "thread"}` to JOURNAL (one
line, one write, so replicas appending at once never interleave), then waits while JOURNAL.hold exists:
a test kills the process with SIGKILL there, mid-tool.

It is served the way examples/serving.py serves the demo: an idle connection stays open 75 s, longer than
an httpx client keeps one in its pool (5 s). With uvicorn's own 5 s, a loaded machine lost requests: the
client reads a stream's end late and starts its 5 s after the server started its own, so it reused
connections the server was closing, and the request died unread on a reset (docs/clients.md#keep-alive).
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

from adapter import Adapter, Limits, ToolContext, create_app, tool
from adapter.backends import Call, Rule, ScriptedBackend
from adapter.stores import PostgresStore
from examples.serving import KEEP_ALIVE_SECONDS


def build(dsn: str, journal: Path, lease: float) -> Starlette:
    """The sub-app, on a PostgresStore."""

    @tool(requires_approval=True)
    async def pay(amount: str, ctx: ToolContext) -> str:
        """Pay an amount."""
        line = json.dumps({"key": ctx.idempotency_key, "pid": os.getpid(), "thread": ctx.thread_id}) + "\n"
        descriptor = os.open(journal, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(descriptor, line.encode())
        finally:
            os.close(descriptor)
        hold = journal.with_name(journal.name + ".hold")
        while hold.exists():
            await asyncio.sleep(0.02)
        return f"paid {amount}"

    rules = [Rule(r"pay (?P<amount>\d+)", steps=[[Call("pay", {"amount": "{amount}"})]], reply="Done.")]
    store = PostgresStore(dsn, max_size=20)
    adapter = Adapter(
        ScriptedBackend(rules), tools=[pay], store=store, limits=Limits(claim_lease=timedelta(seconds=lease))
    )
    return create_app(adapter)


if __name__ == "__main__":
    port, dsn, journal, lease = sys.argv[1:5]
    app = build(dsn, Path(journal), float(lease))
    uvicorn.run(app, host="127.0.0.1", port=int(port), log_level="warning", timeout_keep_alive=KEEP_ALIVE_SECONDS)
