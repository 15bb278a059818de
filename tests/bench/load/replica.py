"""One replica of the load harness: the adapter on a PostgresStore, served by uvicorn on 127.0.0.1.

    python tests/bench/load/replica.py PORT DSN JOURNAL [--lease SECONDS] [--tool-seconds S]

Its agent is a `ScriptedBackend` (`PacedBackend` around it for the long streams):

- "hello ..."       a short reply (a new run);
- "go to PAGE"      the client's `navigate` tool, answered by a resume (`frontend_outcome="interrupt"`);
- "pay N"           the server's approval-gated `pay`: once approved it appends `{"key", "thread", "pid"}` to
                    JOURNAL (one line, one `write` with O_APPEND, so replicas appending at once never interleave:
                    the harness counts executions per thread from it), then works `--tool-seconds`;
- "slowly N"        N text deltas, one every `PACE` seconds: a long stream, in flight when a replica restarts.

On SIGTERM it stops the way docs/replicas.md ("A graceful stop") tells a server that is not
examples/serving.py to: `await adapter.drain()` first (when the adapter has it), while uvicorn still listens,
then uvicorn's own shutdown. A second SIGTERM stops it at once. The harness measures what that gives.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette

from adapter import Adapter, Limits, ToolContext, create_app, tool
from adapter.backends import BackendItem, Call, ModelRequest, Rule, ScriptedBackend
from adapter.stores import PostgresStore
from examples.serving import KEEP_ALIVE_SECONDS

PACE = 0.02
"""Seconds between two deltas of a long stream ("slowly N")."""
POOL_SIZE = 10
"""Connections each replica's store may hold (PostgresStore's own default)."""


class PacedBackend:
    """The scripted backend, with a pause between the items of a step when the user asked for it "slowly"."""

    def __init__(self, inner: ScriptedBackend) -> None:
        self.inner = inner

    async def stream(self, request: ModelRequest) -> AsyncIterator[BackendItem]:
        """The inner backend's step; paced when the latest user message starts with "slowly"."""
        paced = _latest_user_text(request).startswith("slowly")
        async for item in self.inner.stream(request):
            if paced:
                await asyncio.sleep(PACE)
            yield item


def _latest_user_text(request: ModelRequest) -> str:
    users = [message for message in request.messages if message.role == "user"]
    content: Any = users[-1].content if users else ""
    return content if isinstance(content, str) else ""


def build(dsn: str, journal: Path, *, lease: float | None, tool_seconds: float) -> tuple[Starlette, Adapter]:
    """The sub-app on a PostgresStore, and its adapter (to drain it)."""

    @tool(requires_approval=True)
    async def pay(amount: str, ctx: ToolContext) -> str:
        """Pay an amount."""
        line = json.dumps({"key": ctx.idempotency_key, "thread": ctx.thread_id, "pid": os.getpid()}) + "\n"
        descriptor = os.open(journal, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(descriptor, line.encode())
        finally:
            os.close(descriptor)
        await asyncio.sleep(tool_seconds)
        return f"paid {amount}"

    words = " ".join(f"w{i}" for i in range(400))
    rules = [
        Rule(r"^hello", reply="Hello to you too."),
        Rule(r"go to (?P<page>\w+)", steps=[[Call("navigate", {"path": "/{page}"})]], reply="Opened it."),
        Rule(r"pay (?P<amount>\d+)", steps=[[Call("pay", {"amount": "{amount}"})]], reply="Done."),
        Rule(r"^slowly", reply=words),
    ]
    backend = PacedBackend(ScriptedBackend(rules, keep_requests=1))
    store = PostgresStore(dsn, max_size=POOL_SIZE)
    limits = Limits() if lease is None else Limits(claim_lease=timedelta(seconds=lease))
    adapter = Adapter(backend, tools=[pay], store=store, frontend_outcome="interrupt", limits=limits)
    return create_app(adapter), adapter


async def serve(app: Starlette, adapter: Adapter, port: int) -> None:
    """Serve until SIGTERM (or SIGINT): drain the adapter first where it can, then let uvicorn stop."""
    # IPPROTO_TCP explicitly, as tests/bench/_server.py: asyncio sets TCP_NODELAY only on sockets that say TCP.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(2048)  # uvicorn's own backlog
    config = uvicorn.Config(app, log_level="warning", access_log=False, timeout_keep_alive=KEEP_ALIVE_SECONDS)
    server = uvicorn.Server(config)
    loop = asyncio.get_running_loop()
    stopping: list[asyncio.Task[None]] = []

    async def stop() -> None:
        drain = getattr(adapter, "drain", None)
        if drain is not None:
            await drain()
        server.should_exit = True

    def on_signal() -> None:
        if stopping:  # the second signal: at once
            server.force_exit = server.should_exit = True
            return
        stopping.append(loop.create_task(stop()))

    serving = loop.create_task(server.serve(sockets=[sock]))
    await asyncio.sleep(0)  # uvicorn installs its own handlers as it starts serving: ours replace them after
    while not server.started and not serving.done():
        await asyncio.sleep(0.01)
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_signal)
    try:
        await serving
    finally:
        await adapter.aclose()  # its store's pool: the harness counts the connections left behind


def main() -> None:
    parser = argparse.ArgumentParser(description="One replica of the load harness.")
    parser.add_argument("port", type=int)
    parser.add_argument("dsn")
    parser.add_argument("journal", type=Path)
    parser.add_argument("--lease", type=float, default=None, help="claim_lease seconds (the adapter's default)")
    parser.add_argument("--tool-seconds", type=float, default=0.2, help="how long an approved `pay` works")
    args = parser.parse_args()
    app, adapter = build(args.dsn, args.journal, lease=args.lease, tool_seconds=args.tool_seconds)
    asyncio.run(serve(app, adapter, args.port))


if __name__ == "__main__":
    main()
