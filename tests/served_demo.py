"""The demo app (`examples.demo.build_app`) served by uvicorn on 127.0.0.1, for tests that drive it from outside.

Unlike conftest's `serve`, the app runs its lifespan, so the demo's adapter and store close as in production.
`serve_agui_demo` serves what the `agui-demo` command builds for its flags: a test of a docs example that tells
the reader to start `agui-demo` serves it that way, so it fails when the example fails on what a reader runs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from threaded_server import serve_in_thread, server_config

from examples.demo import app_from_flags, build_app, parse_flags

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
    served = serve_in_thread(server_config(app), name, _BOUND)  # with its lifespan, unlike conftest's `serve`
    try:
        yield served.url
    finally:
        served.stop(_BOUND)
