"""The demo served over real HTTP, and Debian's Chromium under Playwright: shared by the tests and the screenshots."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import uvicorn
from externals import CHROMIUM as CHROMIUM  # re-exported for the scripts beside the tests
from externals import MISSING_PLAYWRIGHT as MISSING_PLAYWRIGHT

from examples.demo import build_app
from examples.serving import KEEP_ALIVE_SECONDS  # the same keep-alive as every test server

# No internet here: these flags keep Chromium from reaching out (QUIC, updates, sync, background fetches).
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


class DemoServer:
    """`examples.demo.build_app(db_path, **options)` served by uvicorn on 127.0.0.1 (a free port) in its own thread."""

    def __init__(self, db_path: Path, **options: Any) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        config = uvicorn.Config(
            build_app(str(db_path), **options),
            log_level="warning",
            ws="none",
            http="h11",
            loop="asyncio",
            timeout_keep_alive=KEEP_ALIVE_SECONDS,
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=asyncio.run, args=(self.server.serve(sockets=[sock]),), daemon=True, name="demo-server"
        )
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the demo server did not start")
            time.sleep(0.01)

    def thread_record(self, thread_id: str) -> dict[str, Any]:
        """GET /agui/threads/{id}: the stored conversation and the open interrupts."""
        with urllib.request.urlopen(f"{self.url}/agui/threads/{thread_id}", timeout=5) as response:
            record: dict[str, Any] = json.load(response)
        return record

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)
