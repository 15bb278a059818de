"""A test server in a process of its own, on a free port: started, waited for, and killed with SIGKILL.

tests/crash_server.py and tests/resume/applying_server.py run an adapter in such a process, so that a test
can kill it mid-tool or mid-save (kill -9) and check what another replica makes of what it left; the PostgreSQL
replicas (tests/replica_server.py) run the same way. `free_port` is the one free port the tests ask for.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx

ROOT = Path(__file__).resolve().parents[1]
BOUND = 60.0  # seconds a replica may take to start, stop or answer on a loaded machine
T = TypeVar("T")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def until(condition: Callable[[], Awaitable[T | None]], what: str, bound: float = BOUND) -> T:
    """Poll `condition` until it gives a value; fail after `bound` seconds."""
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        found = await condition()
        if found is not None:
            return found
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def wait_until(condition: Callable[[], bool], what: str, bound: float = BOUND) -> None:
    """`until` for a caller outside an event loop: poll `condition` until it holds; fail after `bound` seconds."""
    deadline = time.monotonic() + bound
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


class Replica:
    """`script` (a path under the checkout) run with `port` and `args`, its adapter served on 127.0.0.1:port."""

    def __init__(self, script: str, *args: object, log: Path | None = None) -> None:
        self.port = free_port()
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        command = [sys.executable, str(ROOT / script), str(self.port), *(str(arg) for arg in args)]
        with contextlib.ExitStack() as files:  # the child keeps its own copy of the log's descriptor
            stderr = files.enter_context(log.open("ab")) if log is not None else None
            self.process = subprocess.Popen(command, env=env, stderr=stderr)
        self.url = f"http://127.0.0.1:{self.port}"

    def healthy(self) -> bool:
        """Whether it answers `GET /health` with 200 (its store reachable) now; fails if it exited."""
        assert self.process.poll() is None, f"the replica on port {self.port} exited"
        try:
            return httpx.get(self.url + "/health", timeout=5).status_code == 200
        except httpx.TransportError:
            return False

    async def ready(self, http: httpx.AsyncClient) -> None:
        """Wait until it answers `GET /health` with 200; fail if it exits first."""

        async def health() -> bool | None:
            assert self.process.poll() is None, "the replica exited"
            try:
                return (await http.get(self.url + "/health")).status_code == 200 or None
            except httpx.TransportError:
                return None

        await until(health, "the replica to answer")

    def terminate(self) -> None:
        """SIGTERM: what a deploy sends; a replica served with a drain stops gracefully."""
        self.process.send_signal(signal.SIGTERM)

    async def exited(self) -> int:
        """Wait, without blocking the event loop, until the process is gone; its exit status."""

        async def gone() -> int | None:
            return self.process.poll()

        return await until(gone, "the replica to exit")

    def kill(self) -> None:
        """kill -9, then wait for it to be gone; nothing to do for one already gone."""
        self.process.send_signal(signal.SIGKILL)  # Popen sends nothing to a process it has seen exit
        self.process.wait(BOUND)


def journaled(journal: Path) -> list[dict[str, Any]]:
    """The lines a server's tool journal holds (what its tools really did), as JSON."""
    return [json.loads(line) for line in journal.read_text().splitlines()] if journal.exists() else []
