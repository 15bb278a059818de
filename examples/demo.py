"""Run the demo server: `python -m examples.demo` serves the page at http://127.0.0.1:8000/ and the adapter at /agui.

A ScriptedBackend plays the model and SQLite keeps suspended turns, so no key and no service is needed.
OPENAI_BASE_URL or AGUI_UPSTREAM_URL puts a real agent behind it instead (see `examples/backend_choice.py`).
"""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Literal, TypeAlias

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from adapter import Adapter, HistoryMode, create_app, mount
from adapter.backends import ScriptedBackend
from adapter.stores import PostgresStore, SQLiteStore, TurnStore

from . import form_assist, serving
from .backend_choice import choose_backend
from .demo_agent import HELP, RULES, LongAnswers, forms, tools

WEB = Path(__file__).parent / "web"
"""The demo page: plain HTML, CSS and ES modules, served as they are."""

FrontendOutcome: TypeAlias = Literal["interrupt", "pending"]


def build_app(
    db_path: str = "demo.db",
    *,
    frontend_outcome: FrontendOutcome = "pending",
    history: HistoryMode = "client",
    inspector: bool = False,
    environ: Mapping[str, str] | None = None,
) -> Starlette:
    """The demo app: the page at / (a JSON hint for non-browsers), its files under /static, the adapter at /agui.

    `frontend_outcome="pending"` (the default, AG-UI 1.0 FE-2) ends a run that calls a client tool with
    `pendingToolCallIds`, answered by a ToolMessage; `"interrupt"` ends it with an interrupt, for clients that
    answer client tools with `resume` (the page answers either);
    `history="server"` keeps the conversation in the store, so a client may send only new messages;
    `inspector=True` serves the agui-inspector page at /agui/inspector/;
    `environ` may put a real agent behind it (`examples/backend_choice.py`).
    """
    scripted = LongAnswers(ScriptedBackend([*form_assist.RULES, *RULES], fallback=f"{HELP} {form_assist.HELP}"))
    backend = choose_backend(environ or {}, scripted=scripted)
    adapter = Adapter(
        backend,
        tools=[*tools, *form_assist.TOOLS],
        forms=forms,
        store=open_store(db_path),
        frontend_outcome=frontend_outcome,
        history=history,
    )

    async def index(request: Request) -> Response:
        if "text/html" in request.headers.get("accept", ""):  # a browser gets the page, an API client the hint
            return FileResponse(WEB / "index.html", headers={"Cache-Control": "no-cache"})
        return JSONResponse({"agui": str(request.url_for("agui", path="/")), "page": "/", "try": HELP})

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await adapter.aclose()  # closes the backend's HTTP client too

    app = Starlette(
        routes=[
            Route("/", index),
            Mount("/static", app=StaticFiles(directory=WEB), name="static"),
            mount("/agui", create_app(adapter, inspector=inspector), name="agui"),
        ],
        lifespan=lifespan,
    )
    app.state.adapter = adapter  # for `main`: SIGTERM drains it (examples/serving.py)
    return app


def open_store(db: str) -> TurnStore:
    """A PostgresStore for a `postgresql://` URL, else a SQLiteStore on that file."""
    if db.startswith(("postgresql://", "postgres://")):
        return PostgresStore(db)
    return SQLiteStore(db)


def parse_flags(argv: list[str] | None = None) -> argparse.Namespace:
    """The flags of `agui-demo`, each with the default the docs tell a reader to start with."""
    parser = serving.add_server_flags(argparse.ArgumentParser(description="Serve the AG-UI adapter demo."))
    parser.add_argument("--db", default="demo.db", help="SQLite file for suspended turns, or a postgresql:// URL")
    parser.add_argument(
        "--frontend-outcome",
        choices=["pending", "interrupt"],
        default="pending",
        help="how a client-tool call ends the run: 'pending' (AG-UI 1.0 FE-2, pendingToolCallIds), or 'interrupt' "
        "for clients that answer client tools with resume",
    )
    parser.add_argument(
        "--history",
        choices=["client", "server"],
        default="client",
        help="who keeps the conversation; 'server' lets a client send only its new messages",
    )
    parser.add_argument(
        "--inspector",
        action="store_true",
        help="serve the agui-inspector page at /agui/inspector/ (needs the inspector extra: "
        "pip install 'agui-adapter[inspector]')",
    )
    return parser.parse_args(argv)


def app_from_flags(args: argparse.Namespace, environ: Mapping[str, str]) -> Starlette:
    """The app `agui-demo` serves for these flags: what a test of the docs serves, so it serves what they say."""
    return build_app(
        args.db,
        frontend_outcome=args.frontend_outcome,
        history=args.history,
        inspector=args.inspector,
        environ=environ,
    )


def main(argv: list[str] | None = None) -> None:
    """Parse the flags and serve the demo with uvicorn."""
    args = parse_flags(argv)
    try:
        app = app_from_flags(args, os.environ)
    except ImportError as exc:
        if "pip install" not in str(exc):
            raise
        raise SystemExit(str(exc)) from None  # a flag whose extra is missing: its one-line hint, exit status 1
    print(f"Demo page: http://{args.host}:{args.port}/  AG-UI endpoint: http://{args.host}:{args.port}/agui")
    if args.inspector:
        print(f"Inspector: http://{args.host}:{args.port}/agui/inspector/")
    serving.run(app, args, drain=app.state.adapter.drain)


if __name__ == "__main__":
    main()
