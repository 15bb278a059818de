"""The demo app (`examples.demo.build_app`) served by uvicorn on 127.0.0.1, for tests that drive it from outside.

Unlike conftest's `serve`, the app runs its lifespan, so the demo's adapter and store close as in production.
`serve_agui_demo` serves what the `agui-demo` command builds for its flags: a test of a docs example that tells
the reader to start `agui-demo` serves it that way, so it fails when the example fails on what a reader runs.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import uvicorn

from examples.demo import app_from_flags, build_app, parse_flags
from examples.serving import KEEP_ALIVE_SECONDS

_BOUND = 10.0  # seconds a start or a stop may take


@contextlib.contextmanager
def serve_demo(db_path: Path, **options: Any) -> Iterator[str]:
    """Serve `build_app(db_path, **options)` on a free port; yields the base URL, e.g. http://127.0.0.1:PORT."""
    with serve_app(build_app(str(db_path), **options)) as url:
        yield url


@contextlib.contextmanager
def serve_agui_demo(db_path: Path, *flags: str) -> Iterator[str]:
    """Serve what `agui-demo --db DB_PATH *FLAGS` serves, with no agent configured by the environment."""
    with serve_app(app_from_flags(parse_flags(["--db", str(db_path), *flags]), environ={})) as url:
        yield url


@contextlib.contextmanager
def serve_app(app: Any, name: str = "demo") -> Iterator[str]:
    """Serve the ASGI `app` by uvicorn on a free port of 127.0.0.1, in a thread; yields its base URL.

    Raises:
        RuntimeError: The server did not start within the bound.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    # As `python -m examples.demo` serves it: a Node client (the CopilotKit runtime) reuses idle connections.
    config = uvicorn.Config(app, log_level="warning", ws="none", http="h11", timeout_keep_alive=KEEP_ALIVE_SECONDS)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True, name=f"{name}-{port}")
    thread.start()
    try:
        deadline = time.monotonic() + _BOUND
        while not server.started:
            if time.monotonic() > deadline or not thread.is_alive():
                raise RuntimeError(f"the {name} server did not start")
            time.sleep(0.01)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(_BOUND)
        sock.close()
        assert not thread.is_alive(), f"the {name} server did not stop"
