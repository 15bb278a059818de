"""An ASGI app served by uvicorn on 127.0.0.1 in a thread of its own, with its own event loop, like a process.

The one way the tests serve an app in-process over real HTTP: conftest's `serve` fixture, `served_demo`, the
browser tests' demo server and the serving-flags tests all start theirs here. The socket is bound before uvicorn
starts, so the port is known at once and no other process can take it in between.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any

import uvicorn

from examples.serving import KEEP_ALIVE_SECONDS

BOUND = 10.0  # seconds a server may take to start or to stop


def server_config(app: Any, **options: Any) -> uvicorn.Config:
    """The config every test server shares, `options` overriding it.

    Served as examples/serving.py serves the demo: an idle connection outlives the client pool's 5 s (uvicorn's own
    default is also 5 s: a loaded client reuses connections the server is closing; docs/clients.md#keep-alive).
    """
    shared: dict[str, Any] = {
        "log_level": "warning",
        "ws": "none",
        "http": "h11",
        "loop": "asyncio",
        "timeout_keep_alive": KEEP_ALIVE_SECONDS,
    }
    return uvicorn.Config(app, **{**shared, **options})


@dataclass
class ThreadedServer:
    """A started server: its uvicorn `server`, the `thread` and event `loop` it runs on, and its `port`."""

    server: uvicorn.Server
    thread: threading.Thread
    loop: asyncio.AbstractEventLoop
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self, bound: float = BOUND) -> None:
        """Tell it to exit and wait until its thread ends."""
        self.server.should_exit = True
        self.thread.join(bound)
        assert not self.thread.is_alive(), f"the server on port {self.port} did not stop"


def serve_in_thread(config: uvicorn.Config, name: str = "uvicorn", bound: float = BOUND) -> ThreadedServer:
    """Start `config`'s app on a free port of 127.0.0.1; return once it accepts connections.

    Raises:
        RuntimeError: It did not start within `bound` seconds, or its thread ended first.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)  # asyncio sets TCP_NODELAY only then
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port: int = sock.getsockname()[1]
    server = uvicorn.Server(config)
    loops: list[asyncio.AbstractEventLoop] = []

    async def serve() -> None:
        loops.append(asyncio.get_running_loop())
        try:
            await server.serve(sockets=[sock])
        finally:
            sock.close()

    thread = threading.Thread(target=asyncio.run, args=(serve(),), daemon=True, name=f"{name}-{port}")
    thread.start()
    deadline = time.monotonic() + bound
    while not (server.started and loops):
        if time.monotonic() > deadline or not thread.is_alive():
            server.should_exit = True
            raise RuntimeError(f"the {name} server did not start")
        time.sleep(0.005)
    return ThreadedServer(server, thread, loops[0], port)
