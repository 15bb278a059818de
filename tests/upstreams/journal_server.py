"""What every framework's agent server shares: the journal of real tool executions, and the PORT handshake.

Each `<name>_server.py` runs as a script in its framework's own virtualenv, so this module needs only FastAPI
and uvicorn (every framework brings both) and imports nothing from the project.
"""

from __future__ import annotations

import asyncio
import socket

import uvicorn
from fastapi import FastAPI

KEEP_ALIVE_SECONDS = 75  # as examples/serving.py: longer than any client pool keeps an idle connection


def add_journal(served: FastAPI, journal: list[str]) -> FastAPI:
    """GET /deleted lists what the server's tools really did; POST /deleted clears it between tests."""

    @served.get("/deleted")
    def listed() -> list[str]:
        return journal

    @served.post("/deleted")
    def cleared() -> list[str]:
        journal.clear()
        return journal

    return served


def serve(served: FastAPI) -> None:
    """Serve on a free port and print `PORT <n>` once listening (tests/upstreams/kit.py waits for that line)."""
    asyncio.run(_serve(served))


async def _serve(served: FastAPI) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(served, log_level="warning", timeout_keep_alive=KEEP_ALIVE_SECONDS))
    serving = asyncio.ensure_future(server.serve(sockets=[listener]))
    while not server.started:
        await asyncio.sleep(0.01)
    print(f"PORT {listener.getsockname()[1]}", flush=True)
    await serving
