from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import anyio
import httpx
import pytest
import uvicorn
from ag_ui.core import (
    AgentCapabilities,
    BaseEvent,
    CustomEvent,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
)
from agui import http_scope, parse_sse
from starlette.types import Message

from adapter import create_app
from adapter._input import CheckedInput  # private on purpose: handlers of their own, as the edge starts them
from adapter._sse import KEEPALIVE, encode_event  # private on purpose: SSE framing is one pure function, tested alone
from adapter.client import AGUIClient
from examples.serving import KEEP_ALIVE_SECONDS  # the same keep-alive as every test server

if TYPE_CHECKING:
    from conftest import Connect


BODY = json.dumps({"threadId": "t1", "runId": "r1", "messages": []}).encode()
STARTED = RunStartedEvent(thread_id="t1", run_id="r1", protocol_version="1.0")
FINISHED = RunFinishedEvent(thread_id="t1", run_id="r1")
TEXT = [
    TextMessageStartEvent(message_id="m1", role="assistant"),
    TextMessageContentEvent(message_id="m1", delta="héllo 👍🏽\r\nworld"),
    TextMessageEndEvent(message_id="m1"),
]


class Handler:
    """What `create_app` serves, started as the edge starts it: `run` gives the events."""

    async def start(self, checked: CheckedInput) -> AsyncIterator[BaseEvent]:
        return self.run(checked.input)

    def run(self, run_input: RunAgentInput) -> AsyncIterator[BaseEvent]:
        raise NotImplementedError

    def capabilities(self) -> AgentCapabilities:
        return AgentCapabilities()

    async def thread(self, thread_id: str) -> None:
        return None  # it keeps no threads: GET /threads/{id} answers 404


class ScriptedHandler(Handler):
    """Plays a script: events are yielded, numbers are pauses in seconds, exceptions are raised."""

    def __init__(self, *script: BaseEvent | float | BaseException) -> None:
        self.script = script
        self.closed = False
        self.yielded = 0

    async def run(self, run_input: RunAgentInput) -> AsyncIterator[BaseEvent]:
        try:
            for step in self.script:
                if isinstance(step, BaseEvent):
                    self.yielded += 1
                    yield step
                elif isinstance(step, BaseException):
                    raise step
                else:
                    await asyncio.sleep(step)
        finally:
            self.closed = True


async def post(handler: Any, **options: Any) -> httpx.Response:
    app = create_app(handler, **options)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://test") as client:
        return await client.post("/", content=BODY, headers={"content-type": "application/json"})


def sse_of(response: httpx.Response) -> tuple[list[dict[str, Any]], int]:
    """The events and the number of comment frames, after the framing checks of `agui.parse_sse`."""
    events, comments, problems = parse_sse(response.content)
    assert problems == []
    return events, len(comments)


def test_encode_event_frames_one_data_line() -> None:
    assert (
        encode_event(STARTED) == 'data: {"type":"RUN_STARTED","threadId":"t1","runId":"r1","protocolVersion":"1.0"}\n\n'
    )
    assert encode_event(TEXT[1]) == (
        'data: {"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"héllo 👍🏽\\r\\nworld"}\n\n'
    )


def test_encode_event_keeps_required_nulls_and_drops_absent_optionals() -> None:
    assert (
        encode_event(CustomEvent(name="ping", value=None)) == 'data: {"type":"CUSTOM","name":"ping","value":null}\n\n'
    )
    assert encode_event(RunErrorEvent(message="no")) == 'data: {"type":"RUN_ERROR","message":"no"}\n\n'


async def test_stream_headers_and_lf_only_framing() -> None:
    response = await post(ScriptedHandler(STARTED, *TEXT, FINISHED))

    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream"
    assert response.headers["cache-control"] == "no-store"
    assert response.headers["x-accel-buffering"] == "no"
    assert b"\r" not in response.content
    events, comments = sse_of(response)
    assert events == [json.loads(encode_event(event)[len("data: ") :]) for event in (STARTED, *TEXT, FINISHED)]
    assert comments == 0


async def test_keepalive_comments_fill_a_silent_gap() -> None:
    quiet = await post(ScriptedHandler(STARTED, *TEXT, FINISHED), keepalive_interval=0.05)
    slow = await post(ScriptedHandler(STARTED, 0.2, *TEXT, FINISHED), keepalive_interval=0.05)

    assert KEEPALIVE in slow.text
    slow_events, comments = sse_of(slow)
    assert comments >= 2
    assert slow_events == sse_of(quiet)[0]


async def test_stream_ends_right_after_the_terminal_event() -> None:
    handler = ScriptedHandler(STARTED, FINISHED, CustomEvent(name="late", value=1), 30.0, FINISHED)

    with anyio.fail_after(5):
        response = await post(handler)

    events, _ = sse_of(response)
    assert [event["type"] for event in events] == ["RUN_STARTED", "RUN_FINISHED"]
    assert handler.yielded == 2
    assert handler.closed


async def test_run_error_is_terminal_too() -> None:
    handler = ScriptedHandler(STARTED, RunErrorEvent(message="nope", code="BACKEND_ERROR"), FINISHED)

    events, _ = sse_of(await post(handler))

    assert [event["type"] for event in events] == ["RUN_STARTED", "RUN_ERROR"]
    assert events[-1]["code"] == "BACKEND_ERROR"


async def test_a_raising_handler_ends_with_one_generic_run_error(caplog: pytest.LogCaptureFixture) -> None:
    handler = ScriptedHandler(STARTED, *TEXT[:2], RuntimeError("secret-detail at /srv/app.py"))

    with caplog.at_level(logging.ERROR, logger="adapter"):
        response = await post(handler)

    events, _ = sse_of(response)
    assert [event["type"] for event in events] == [
        "RUN_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "RUN_ERROR",
    ]
    assert events[-1]["code"] == "INTERNAL_ERROR"
    assert "secret-detail" not in response.text and "Traceback" not in response.text
    assert "secret-detail" in caplog.text
    assert handler.closed


class FailsToStart(Handler):
    async def start(self, checked: CheckedInput) -> AsyncIterator[BaseEvent]:
        raise RuntimeError("secret-detail")


class FailsAtOnce(Handler):
    async def run(self, run_input: RunAgentInput) -> AsyncIterator[BaseEvent]:
        raise RuntimeError("secret-detail")
        yield STARTED  # pragma: no cover - makes this an async generator


async def test_a_handler_that_fails_to_start_gets_a_clean_500(caplog: pytest.LogCaptureFixture) -> None:
    response = await post(FailsToStart())

    assert (response.status_code, response.json()["error"]["code"]) == (500, "INTERNAL_ERROR")
    assert "secret-detail" not in response.text and "secret-detail" in caplog.text


class YieldsGarbage(ScriptedHandler):
    async def run(self, run_input: RunAgentInput) -> AsyncIterator[BaseEvent]:
        yield STARTED
        yield "not an event"  # type: ignore[misc]


@pytest.mark.parametrize(
    "handler",
    [
        pytest.param(FailsAtOnce(), id="run-raises-before-iterating"),
        pytest.param(ScriptedHandler(STARTED, *TEXT), id="no-terminal-event"),
        pytest.param(YieldsGarbage(), id="non-event-item"),
        pytest.param(ScriptedHandler(STARTED, asyncio.CancelledError()), id="own-cancelled-error"),
    ],
)
async def test_a_run_that_cannot_finish_ends_with_internal_error(handler: Any) -> None:
    with anyio.fail_after(5):
        response = await post(handler)

    events, _ = sse_of(response)
    assert events[-1] == {"type": "RUN_ERROR", "message": events[-1]["message"], "code": "INTERNAL_ERROR"}
    assert "secret-detail" not in response.text


class Endless(Handler):
    """Streams RUN_STARTED, then waits on a backend task (or keeps yielding) forever."""

    def __init__(self, *, chatty: bool) -> None:
        self.chatty = chatty
        self.backend: asyncio.Task[None] | None = None
        self.finalised = asyncio.Event()
        self.ticks = 0

    async def run(self, run_input: RunAgentInput) -> AsyncIterator[BaseEvent]:
        self.backend = asyncio.create_task(asyncio.sleep(3600))
        try:
            yield STARTED
            while self.chatty:
                self.ticks += 1
                yield CustomEvent(name="tick", value=None)
                await asyncio.sleep(0)
            await self.backend
        finally:
            self.backend.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.backend
            self.finalised.set()


def body_scope(body: bytes) -> dict[str, Any]:
    return http_scope([(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())])


@pytest.mark.parametrize("chatty", [False, True], ids=["waiting-on-backend", "suspended-at-yield"])
async def test_client_disconnect_closes_the_run(chatty: bool) -> None:
    handler = Endless(chatty=chatty)
    first_event_sent = asyncio.Event()
    sent: list[Message] = []
    inbox: list[Message] = [{"type": "http.request", "body": BODY, "more_body": False}]

    async def receive() -> Message:
        if inbox:
            return inbox.pop(0)
        await first_event_sent.wait()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)
        if message.get("body"):
            first_event_sent.set()

    with anyio.fail_after(2):
        await create_app(handler, keepalive_interval=0.05)(body_scope(BODY), receive, send)

    assert handler.finalised.is_set()
    assert handler.backend is not None and handler.backend.cancelled()
    assert sent[1]["body"].startswith(encode_event(STARTED).encode())  # ready frames are sent together
    assert asyncio.all_tasks() == {asyncio.current_task()}


async def test_send_failing_with_oserror_closes_the_run() -> None:
    """ASGI 2.4 servers signal a gone client by raising OSError from send."""
    handler = Endless(chatty=True)
    inbox: list[Message] = [{"type": "http.request", "body": BODY, "more_body": False}]
    never = asyncio.Event()
    bodies = 0

    async def receive() -> Message:
        if inbox:
            return inbox.pop(0)
        await never.wait()
        raise AssertionError("unreachable")

    async def send(message: Message) -> None:
        nonlocal bodies
        if message["type"] == "http.response.body":
            bodies += 1
            if bodies > 3:
                raise OSError("connection reset")

    scope = {**body_scope(BODY), "asgi": {"version": "3.0", "spec_version": "2.4"}}
    with anyio.fail_after(2):
        await create_app(handler)(scope, receive, send)

    assert handler.finalised.is_set()
    assert asyncio.all_tasks() == {asyncio.current_task()}


class Gated(Handler):
    """Sends RUN_STARTED, then holds the rest of the run until the test opens the gate."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()

    async def run(self, run_input: RunAgentInput) -> AsyncIterator[BaseEvent]:
        yield STARTED
        await self.gate.wait()
        yield FINISHED


async def test_events_arrive_incrementally_over_real_http() -> None:
    handler = Gated()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        create_app(handler), lifespan="off", ws="none", log_level="warning", timeout_keep_alive=KEEP_ALIVE_SECONDS
    )
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        with anyio.fail_after(5):
            while not server.started:
                await asyncio.sleep(0.01)
            seen: list[str] = []
            async with AGUIClient(f"http://127.0.0.1:{port}/") as client:
                async for event in client.stream(BODY):
                    seen.append(event.type)
                    if not handler.gate.is_set():  # the first event came before the run could finish
                        assert event.type == "RUN_STARTED"
                        handler.gate.set()
    finally:
        server.should_exit = True
        await serving
        sock.close()

    assert seen == ["RUN_STARTED", "RUN_FINISHED"]


async def test_a_stalled_client_that_leaves_cuts_the_run() -> None:
    """A handler's own run knows no stop signal: its driver cuts it where it waits once its one reader left."""
    handler = Endless(chatty=True)
    inbox: list[Message] = [{"type": "http.request", "body": BODY, "more_body": False}]
    stalled = asyncio.Event()
    body_frames = 0

    async def receive() -> Message:
        if inbox:
            return inbox.pop(0)
        await stalled.wait()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        nonlocal body_frames
        if message.get("body"):
            body_frames += 1
        if body_frames == 2:
            stalled.set()
            await asyncio.Event().wait()

    with anyio.fail_after(2):
        await create_app(handler)(body_scope(BODY), receive, send)

    assert handler.finalised.is_set()
    assert handler.backend is not None and handler.backend.cancelled()


async def test_multibyte_text_survives_streaming(connect: Connect) -> None:
    client = await connect()

    reply = await client.thread().say("hello")

    assert reply.text == "héllo 👍🏽 👨‍👩‍👧"
    assert len(reply.of("TEXT_MESSAGE_CONTENT")) >= 2
    assert "héllo".encode() in reply.body
