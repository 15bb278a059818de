"""A replica that dies after a resume's answers are stored, before its outcome is: for the stale-applying test.

    python tests/resume/applying_server.py PORT DB JOURNAL LEASE_SECONDS

"pay N" asks for approval of `pay`. Once the answers of a resume are stored (the approved tool ran, or
the denial was recorded), the model's next step appends `{"pid": ...}` to JOURNAL and waits while the
file JOURNAL.hold exists: the test kills the process with SIGKILL there.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import uvicorn
from ag_ui.core import ToolMessage
from starlette.applications import Starlette

from adapter import Adapter, Limits, create_app, tool
from adapter.backends import BackendItem, Call, ModelRequest, Rule, ScriptedBackend
from adapter.stores import SQLiteStore


class Holding:
    """The scripted backend, held in the step that follows stored answers while JOURNAL.hold exists."""

    def __init__(self, scripted: ScriptedBackend, journal: Path) -> None:
        self.scripted = scripted
        self.journal = journal

    async def stream(self, request: ModelRequest) -> AsyncIterator[BackendItem]:
        if request.messages and isinstance(request.messages[-1], ToolMessage):
            with self.journal.open("a") as lines:
                lines.write(json.dumps({"pid": os.getpid()}) + "\n")
            hold = self.journal.with_name(self.journal.name + ".hold")
            while hold.exists():
                await asyncio.sleep(0.02)
        async for item in self.scripted.stream(request):
            yield item


def build(db: str, journal: Path, lease: float) -> Starlette:
    @tool(requires_approval=True)
    async def pay(amount: str) -> str:
        """Pay an amount."""
        return f"paid {amount}"

    rules = [Rule(r"pay (?P<amount>\d+)", steps=[[Call("pay", {"amount": "{amount}"})]], reply="Done.")]
    backend = Holding(ScriptedBackend(rules), journal)
    adapter = Adapter(backend, tools=[pay], store=SQLiteStore(db), limits=Limits(claim_lease=timedelta(seconds=lease)))
    return create_app(adapter)


if __name__ == "__main__":
    port, db, journal, lease = sys.argv[1:5]
    uvicorn.run(build(db, Path(journal), float(lease)), host="127.0.0.1", port=int(port), log_level="warning")
