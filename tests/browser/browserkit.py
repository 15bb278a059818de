"""The demo served over real HTTP, and Debian's Chromium under Playwright: shared by the tests and the screenshots."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

from externals import CHROMIUM as CHROMIUM  # re-exported for the scripts beside the tests
from externals import MISSING_PLAYWRIGHT as MISSING_PLAYWRIGHT
from threaded_server import serve_in_thread, server_config

from examples.demo import build_app

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
        self.served = serve_in_thread(server_config(build_app(str(db_path), **options)), "demo-server")
        self.url = self.served.url

    def thread_record(self, thread_id: str) -> dict[str, Any]:
        """GET /agui/threads/{id}: the stored conversation and the open interrupts."""
        with urllib.request.urlopen(f"{self.url}/agui/threads/{thread_id}", timeout=5) as response:
            record: dict[str, Any] = json.load(response)
        return record

    def stop(self) -> None:
        self.served.stop()
