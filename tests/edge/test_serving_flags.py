"""The flags the demo and the examples are served with: --host, --port and --timeout-keep-alive."""

from __future__ import annotations

import argparse
import logging
import socket
import sys
from collections.abc import Iterator

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from threaded_server import serve_in_thread

from examples import demo, serving

COMMON_IDLE_TIMEOUTS = {
    "undici": 4,
    "node-http-agent": 5,
    "httpx": 5,
    "aiohttp": 15,
    "nginx-upstream": 60,
    "aws-alb": 60,
}
"""Seconds common client pools and proxies keep an idle connection (see examples/serving.py)."""


def parse(*argv: str) -> argparse.Namespace:
    return serving.add_server_flags(argparse.ArgumentParser()).parse_args(argv)


def test_the_default_keep_alive_outlasts_common_client_pools() -> None:
    options = serving.uvicorn_options(parse())

    assert options["timeout_keep_alive"] == serving.KEEP_ALIVE_SECONDS
    assert all(options["timeout_keep_alive"] > seconds for seconds in COMMON_IDLE_TIMEOUTS.values())
    assert uvicorn.Config(Starlette()).timeout_keep_alive < min(COMMON_IDLE_TIMEOUTS.values()) + 2  # why it matters


def test_the_flags_reach_uvicorn() -> None:
    options = serving.uvicorn_options(parse("--host", "0.0.0.0", "--port", "9001", "--timeout-keep-alive", "620"))

    config = uvicorn.Config(Starlette(), **options)

    assert (config.host, config.port, config.timeout_keep_alive) == ("0.0.0.0", 9001, 620)


@pytest.mark.parametrize("value", ["0", "-5", "soon"])
def test_a_keep_alive_that_is_not_a_positive_number_of_seconds_is_refused(value: str) -> None:
    with pytest.raises(SystemExit):
        parse("--timeout-keep-alive", value)


@pytest.fixture
def logging_kept() -> Iterator[None]:
    """Undo the logging configuration that `uvicorn.Config` applies to this process (serving.log_config's)."""
    loggers = [logging.getLogger(name) for name in ("adapter", "uvicorn", "uvicorn.error", "uvicorn.access")]
    kept = [(each, each.handlers[:], each.level, each.propagate) for each in loggers]
    yield
    for each, handlers, level, propagate in kept:
        each.handlers[:], each.level, each.propagate = handlers, level, propagate


@pytest.mark.usefixtures("logging_kept")
def test_the_demo_takes_the_keep_alive_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    served: list[uvicorn.Config] = []
    monkeypatch.setattr(uvicorn.Server, "run", lambda server, sockets=None: served.append(server.config))

    demo.main(["--db", ":memory:", "--timeout-keep-alive", "90"])

    (config,) = served
    assert (config.host, config.port, config.timeout_keep_alive) == ("127.0.0.1", 8000, 90)
    assert logging.getLogger("adapter").handlers == logging.getLogger("uvicorn").handlers  # its lines, in the terminal
    assert logging.getLogger("adapter").getEffectiveLevel() == logging.INFO  # a drain's line among them


@pytest.mark.parametrize(
    ("flags", "missing", "hint"),
    [
        pytest.param(["--inspector"], "agui_inspector", "pip install 'agui-adapter[inspector]'", id="inspector"),
        pytest.param(
            ["--db", "postgresql://nowhere/db"], "psycopg_pool", "pip install 'agui-adapter[postgres]'", id="pg"
        ),
    ],
)
def test_a_flag_whose_extra_is_missing_exits_with_its_one_line_hint(
    flags: list[str], missing: str, hint: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, missing, None)  # as if the extra were not installed: importing it fails
    monkeypatch.setattr(uvicorn.Server, "run", lambda server, sockets=None: pytest.fail("it served"))

    with pytest.raises(SystemExit) as exited:
        demo.main(["--db", ":memory:", *flags])

    assert isinstance(exited.value.code, str)  # Python prints it alone to stderr and exits with status 1
    assert hint in exited.value.code
    assert "\n" not in exited.value.code
    assert capsys.readouterr() == ("", "")  # nothing else: no "Demo page" line for a demo that never served


def test_the_demos_help_says_which_flag_needs_an_extra(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "400")  # one line per flag: argparse wraps at hyphens
    with pytest.raises(SystemExit):
        demo.main(["--help"])

    shown = capsys.readouterr().out
    assert "/agui/inspector/ (needs the inspector extra: pip install 'agui-adapter[inspector]')" in shown


def test_the_server_closes_an_idle_connection_after_the_flagged_keep_alive() -> None:
    app = Starlette(routes=[Route("/", lambda request: PlainTextResponse("ok"))])
    options = serving.uvicorn_options(parse("--port", "0", "--timeout-keep-alive", "1"))
    served = serve_in_thread(uvicorn.Config(app, **options, log_level="warning", lifespan="off"))
    try:
        with socket.create_connection(("127.0.0.1", served.port), timeout=10) as connection:
            connection.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            received = b""
            while b"ok" not in received:
                received += connection.recv(4096)
            assert b"200 OK" in received
            assert connection.recv(4096) == b""  # the server closed the idle connection, well before the timeout
    finally:
        served.stop()


def test_serving_freezes_what_start_up_made_and_collects_its_garbage_first() -> None:
    import gc
    import weakref

    class Node:
        def __init__(self) -> None:
            self.me = self  # a cycle: only the collector frees it

    garbage, kept = Node(), Node()
    gone = weakref.ref(garbage)
    del garbage
    before = gc.get_freeze_count()
    try:
        serving.freeze_startup_objects()
        assert gone() is None  # collected before the freeze, not kept for the process's life
        assert gc.get_freeze_count() > before
    finally:
        gc.unfreeze()
    assert kept.me is kept
