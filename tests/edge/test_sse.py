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
    CustomEvent,
    RunAgentInput,
    RunErrorEvent,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
)
from agui import http_scope, parse_sse
from starlette.types import Message

from adapter import Adapter, create_app
from adapter._edge._sse import (  # private on purpose: SSE framing is one pure function, tested alone
    KEEPALIVE,
    encode_event,
)
from adapter._limits import CheckedInput  # private on purpose: an adapter whose start fails, as the edge calls it
from adapter._sessions._journal import RunEvents  # private on purpose: what `Adapter.start` returns, overridden here
from adapter.backends import BackendItem, ModelRequest, TextDelta
from adapter.client import AGUIClient
from examples.serving import KEEP_ALIVE_SECONDS  # the same keep-alive as every test server

if TYPE_CHECKING:
    from conftest import Connect


BODY = json.dumps({"threadId": "t1", "runId": "r1", "messages": []}).encode()
STARTED = RunStartedEvent(thread_id="t1", run_id="r1", protocol_version="1.0")
TEXT = [
    TextMessageStartEvent(message_id="m1", role="assistant"),
    TextMessageContentEvent(message_id="m1", delta="héllo 👍🏽\r\nworld"),
    TextMessageEndEvent(message_id="m1"),
]
WORDS = "héllo 👍🏽\r\nworld"


class Paced:
    """A backend that says `WORDS` after `pause` seconds, or raises `failure` after its first word."""

    def __init__(self, pause: float = 0.0, failure: Exception | None = None) -> None:
        self.pause, self.failure = pause, failure

    async def stream(self, request: ModelRequest) -> AsyncIterator[BackendItem]:
        yield TextDelta("héllo ")
        if self.failure is not None:
            raise self.failure
        await asyncio.sleep(self.pause)
        yield TextDelta("👍🏽\r\nworld")


async def post(adapter: Adapter, **options: Any) -> httpx.Response:
    app = create_app(adapter, **options)
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
    response = await post(Adapter(Paced()))

    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream"
    assert response.headers["cache-control"] == "no-store"
    assert response.headers["x-accel-buffering"] == "no"
    assert b"\r" not in response.content
    events, comments = sse_of(response)
    assert [event["type"] for event in events][0] == "RUN_STARTED"
    assert "".join(event.get("delta", "") for event in events) == WORDS
    assert comments == 0


async def test_the_terminal_event_ends_the_body_in_its_own_send() -> None:
    """No empty `send` after the last frames: every layer of the ASGI chain and the server pays one per response."""
    inbox: list[Message] = [{"type": "http.request", "body": BODY, "more_body": False}]
    sent: list[Message] = []

    async def receive() -> Message:
        if inbox:
            return inbox.pop(0)
        await asyncio.get_running_loop().create_future()  # the client stays
        raise AssertionError("unreachable")

    async def send(message: Message) -> None:
        sent.append(message)

    with anyio.fail_after(2):
        await create_app(Adapter(Paced()))(body_scope(BODY), receive, send)

    bodies = [message for message in sent if message["type"] == "http.response.body"]
    assert all(message["body"] for message in bodies)
    assert [message["more_body"] for message in bodies] == [True] * (len(bodies) - 1) + [False]
    assert b'"type":"RUN_FINISHED"' in bodies[-1]["body"]


async def test_keepalive_comments_fill_a_silent_gap() -> None:
    quiet = await post(Adapter(Paced()), keepalive_interval=0.05)
    slow = await post(Adapter(Paced(pause=0.2)), keepalive_interval=0.05)

    assert KEEPALIVE in slow.text
    slow_events, comments = sse_of(slow)
    assert comments >= 2
    assert [event["type"] for event in slow_events] == [event["type"] for event in sse_of(quiet)[0]]


async def test_a_raising_backend_ends_with_one_run_error_that_tells_nothing(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="adapter"):
        response = await post(Adapter(Paced(failure=RuntimeError("secret-detail at /srv/app.py"))))

    events, _ = sse_of(response)
    assert [event["type"] for event in events][0] == "RUN_STARTED"
    assert [event["type"] for event in events].count("RUN_ERROR") == 1
    assert events[-1]["type"] == "RUN_ERROR"
    assert "secret-detail" not in response.text
    assert "Traceback" not in response.text
    assert "secret-detail" in caplog.text


class FailsToStart(Adapter):
    """An adapter whose `start` fails with a bug, before any event."""

    async def start(self, run_input: RunAgentInput | CheckedInput, *, principal: str | None = None) -> RunEvents:
        raise RuntimeError("secret-detail")


async def test_an_adapter_that_fails_to_start_gets_a_clean_500(caplog: pytest.LogCaptureFixture) -> None:
    response = await post(FailsToStart(Paced()))

    assert (response.status_code, response.json()["error"]["code"]) == (500, "INTERNAL_ERROR")
    assert "secret-detail" not in response.text
    assert "secret-detail" in caplog.text


class Endless:
    """A backend that says a word, then waits on a task of its own (or keeps talking) until it is cancelled."""

    def __init__(self, *, chatty: bool) -> None:
        self.chatty = chatty
        self.task: asyncio.Task[None] | None = None
        self.finalised = asyncio.Event()
        self.ticks = 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[BackendItem]:
        self.task = asyncio.create_task(asyncio.sleep(3600))
        try:
            yield TextDelta("started")
            while self.chatty:
                self.ticks += 1
                yield TextDelta(" tick")
                await asyncio.sleep(0)
            await self.task
        finally:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task
            self.finalised.set()


def stopping(backend: Endless) -> Adapter:
    """An adapter whose runs end with their client (`on_disconnect="stop"`), as the tests of a leaving client want."""
    return Adapter(backend, on_disconnect="stop")


def body_scope(body: bytes) -> dict[str, Any]:
    return http_scope([(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())])


@pytest.mark.parametrize("chatty", [False, True], ids=["waiting-on-backend", "suspended-at-yield"])
async def test_client_disconnect_closes_the_run(chatty: bool) -> None:
    backend = Endless(chatty=chatty)
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
        await create_app(stopping(backend), keepalive_interval=0.05)(body_scope(BODY), receive, send)
        await backend.finalised.wait()

    assert backend.task is not None
    assert backend.task.cancelled()
    assert b'"type":"RUN_STARTED"' in sent[1]["body"]


async def test_send_failing_with_oserror_closes_the_run() -> None:
    """ASGI 2.4 servers signal a gone client by raising OSError from send."""
    backend = Endless(chatty=True)
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
        await create_app(stopping(backend))(scope, receive, send)
        await backend.finalised.wait()


@pytest.mark.parametrize("leaves", [False, True], ids=["client-stays", "client-leaves-too"])
async def test_a_response_cancelled_from_outside_ends_cancelled_whether_or_not_its_client_left(leaves: bool) -> None:
    """The response's own cancel for a gone client is told apart from a cancel of its server (a shutdown)."""
    backend = Endless(chatty=False)
    first_body = asyncio.Event()
    leave = asyncio.Event()
    inbox: list[Message] = [{"type": "http.request", "body": BODY, "more_body": False}]

    async def receive() -> Message:
        if inbox:
            return inbox.pop(0)
        await leave.wait()
        loop = asyncio.get_running_loop()
        loop.call_soon(lambda: loop.call_soon(response.cancel))  # the server's cancel, just after the response's own
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        if b"started" in message.get("body", b""):  # the backend's word: the run then waits, and so does the response
            first_body.set()

    response = asyncio.ensure_future(create_app(stopping(backend))(body_scope(BODY), receive, send))
    with anyio.fail_after(2):
        await first_body.wait()
        if leaves:
            leave.set()
        else:
            response.cancel()
        await asyncio.wait({response})
        await backend.finalised.wait()

    assert response.cancelled()


class Gated:
    """A backend that says a word, then holds the rest of the run until the test opens the gate."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()

    async def stream(self, request: ModelRequest) -> AsyncIterator[BackendItem]:
        yield TextDelta("wait")
        await self.gate.wait()
        yield TextDelta(" done")


async def test_events_arrive_incrementally_over_real_http() -> None:
    backend = Gated()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        create_app(Adapter(backend)),
        lifespan="off",
        ws="none",
        log_level="warning",
        timeout_keep_alive=KEEP_ALIVE_SECONDS,
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
                    if event.type == "TEXT_MESSAGE_CONTENT" and not backend.gate.is_set():
                        backend.gate.set()  # the first word came before the run could finish
    finally:
        server.should_exit = True
        await serving
        sock.close()

    assert seen[0] == "RUN_STARTED"
    assert seen[-1] == "RUN_FINISHED"
    assert backend.gate.is_set()


async def test_a_stalled_client_that_leaves_stops_the_run() -> None:
    """No pacing: a run whose one reader stalls goes on, and once that reader left, `on_disconnect="stop"` stops it."""
    backend = Endless(chatty=True)
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
        await create_app(stopping(backend))(body_scope(BODY), receive, send)
        await backend.finalised.wait()

    assert backend.finalised.is_set()
    assert backend.task is not None
    assert backend.task.cancelled()


async def test_multibyte_text_survives_streaming(connect: Connect) -> None:
    client = await connect()

    reply = await client.thread().say("hello")

    assert reply.text == "héllo 👍🏽 👨‍👩‍👧"
    assert len(reply.of("TEXT_MESSAGE_CONTENT")) >= 2
    assert "héllo".encode() in reply.body
