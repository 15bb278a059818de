"""How the demo and the examples are served: uvicorn, with the flags every one of them takes.

    --host                 127.0.0.1
    --port                 8000
    --timeout-keep-alive   75 seconds an idle HTTP/1.1 connection is kept open (uvicorn's own default is 5)

Why 75 s: a server must keep an idle connection open longer than any client or proxy in front of it
keeps it in its pool, or the client reuses a connection the server has just closed and the next
request fails ("other side closed", ECONNRESET). Uvicorn's 5 s is shorter than, or a hair's breadth
from, what common pools keep: undici (Node's fetch, the CopilotKit runtime) 4 s without a hint and up
to 600 s with one, Node's http.Agent 5 s, httpx 5 s, aiohttp 15 s, nginx's upstream keepalive and an
AWS ALB 60 s. 75 s is longer than all of these; behind a proxy that keeps idle connections longer
(Google Cloud's load balancers keep them 600 s), set it above that proxy's timeout. See docs/clients.md.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import gc
from collections.abc import Awaitable, Callable, Sequence
from types import FrameType
from typing import Any, Final

KEEP_ALIVE_SECONDS: Final = 75
"""The default `--timeout-keep-alive`: longer than common client pools and proxies keep idle connections."""


def add_server_flags(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add --host, --port and --timeout-keep-alive to `parser`."""
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument(
        "--timeout-keep-alive",
        type=_positive_seconds,
        default=KEEP_ALIVE_SECONDS,
        metavar="SECONDS",
        help="how long an idle connection stays open; keep it above the client's or proxy's idle timeout "
        f"(default {KEEP_ALIVE_SECONDS})",
    )
    return parser


def uvicorn_options(args: argparse.Namespace) -> dict[str, Any]:
    """The `uvicorn.run` keyword arguments the server flags ask for."""
    return {"host": args.host, "port": args.port, "timeout_keep_alive": args.timeout_keep_alive}


def serve(app: Any, argv: Sequence[str] | None = None, *, description: str) -> None:
    """Parse the server flags and serve `app` with uvicorn until interrupted."""
    args = add_server_flags(argparse.ArgumentParser(description=description)).parse_args(argv)
    run(app, args)


def run(app: Any, args: argparse.Namespace, *, drain: Callable[[], Awaitable[None]] | None = None) -> None:
    """Serve `app` with uvicorn, configured by the parsed server flags, until SIGTERM or Ctrl-C.

    With `drain` (an `Adapter.drain`), the first SIGTERM or SIGINT drains before uvicorn stops: the server
    keeps listening while `GET /health` says "draining" (a balancer moves away) and the runs in progress end,
    then it stops as uvicorn stops. A second signal stops it at once, as uvicorn's own handling does.
    """
    try:
        import uvicorn
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise SystemExit("Serving needs uvicorn: pip install 'agui-adapter[demo]'") from exc
    config = uvicorn.Config(app, **uvicorn_options(args), log_config=log_config(uvicorn))
    server = uvicorn.Server(config) if drain is None else _draining_server(uvicorn, config, drain)
    freeze_startup_objects()
    server.run()


def log_config(uvicorn: Any) -> dict[str, Any]:
    """Uvicorn's logging, with the adapter's own lines (INFO and up: a drain, a run cut) in its terminal output.

    Without it they would reach no handler: a drain on SIGTERM would say nothing until uvicorn's "Shutting down".
    """
    config: dict[str, Any] = copy.deepcopy(uvicorn.config.LOGGING_CONFIG)
    config["loggers"]["adapter"] = {"handlers": ["default"], "level": "INFO", "propagate": False}
    return config


def freeze_startup_objects() -> None:
    """Leave what start-up made (modules, classes, the app) out of every later garbage collection.

    They live as long as the process, yet each full collection walked all of them: about 0.4 ms a run at
    100 concurrent runs (docs/benchmarks.md). What is garbage now is collected first, so nothing is kept
    that would have been freed.
    """
    gc.collect()
    gc.freeze()


def _draining_server(uvicorn: Any, config: Any, drain: Callable[[], Awaitable[None]]) -> Any:
    class DrainingServer(uvicorn.Server):  # type: ignore[misc]
        """A uvicorn server whose first exit signal drains the adapter before it stops."""

        _loop: asyncio.AbstractEventLoop | None = None
        _draining: asyncio.Task[None] | None = None

        async def serve(self, sockets: Any = None) -> None:
            self._loop = asyncio.get_running_loop()
            await super().serve(sockets)

        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            loop = self._loop
            if self._draining is not None or loop is None or self.should_exit:
                super().handle_exit(sig, frame)
                return
            self._captured_signals.append(sig)  # uvicorn raises it again once stopped, as it does for its own
            loop.call_soon_threadsafe(self._start_draining)

        def _start_draining(self) -> None:
            self._draining = asyncio.ensure_future(self._drain_then_stop())

        async def _drain_then_stop(self) -> None:
            try:
                await drain()
            finally:
                self.should_exit = True

    return DrainingServer(config)


def _positive_seconds(text: str) -> int:
    seconds = int(text)
    if seconds < 1:
        raise argparse.ArgumentTypeError("the keep-alive timeout must be at least 1 second")
    return seconds
