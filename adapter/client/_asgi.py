"""An httpx transport to an in-process ASGI app that streams the response as the app sends it.

`httpx.ASGITransport` collects the whole body before it returns and lets an app's exception escape,
which suits finite test responses but not an agent's event stream: nothing would arrive until the
run ended, an endless stream would be held whole, a read timeout could never fire, and a client that
goes away could not stop the app. This transport behaves like a server on a socket instead:

    the app answers                 -> the status and headers, then each body chunk as it is sent
    the app fails before answering  -> HTTP 500, as a server would send
    the app fails mid-body          -> httpx.RemoteProtocolError, as a cut connection would read
    nothing sent within `read`      -> httpx.ReadTimeout (the request's read timeout)
    the response is closed early    -> the app's `receive` reports `http.disconnect`, what it sends is dropped,
                                       and it is cancelled unless it finishes within `_GRACE` seconds

`AGUIClient` (for an ASGI target) and `AGUIUpstream` (for an ASGI upstream) send through it, so that
their stream limits hold in-process as they do over a socket.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import httpx

log = logging.getLogger("adapter.client")

ASGIMessage: TypeAlias = MutableMapping[str, Any]
ASGIApp: TypeAlias = Callable[
    [MutableMapping[str, Any], Callable[[], Awaitable[ASGIMessage]], Callable[[ASGIMessage], Awaitable[None]]],
    Awaitable[None],
]

_BUFFERED = 64
"""Body chunks the app may send ahead of the reader before its `send` waits."""
_GRACE = 0.5
"""Seconds an app has to finish after its response is closed (it sees `http.disconnect`) before it is cancelled."""


class _Done:
    """The app returned."""


@dataclass(frozen=True, slots=True)
class _Failed:
    """The app raised."""

    error: Exception


@dataclass(frozen=True, slots=True)
class _Start:
    status: int
    headers: list[tuple[bytes, bytes]]


@dataclass(slots=True)
class _Exchange:
    """One request to the app: its body going in, its messages coming out."""

    body: bytes
    out: asyncio.Queue[_Start | bytes | _Done | _Failed] = field(default_factory=lambda: asyncio.Queue(_BUFFERED))
    closed: asyncio.Event = field(default_factory=asyncio.Event)
    body_sent: bool = False

    async def receive(self) -> ASGIMessage:
        if not self.body_sent:
            self.body_sent = True
            return {"type": "http.request", "body": self.body, "more_body": False}
        await self.closed.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: ASGIMessage) -> None:
        if self.closed.is_set():
            # Nobody reads any more, as after a client disconnect; yield, so that an app sending in a tight loop
            # lets its own disconnect listener, and the reader's cancel after `_GRACE`, run.
            await asyncio.sleep(0)
            return
        if message["type"] == "http.response.start":
            await self.out.put(_Start(message["status"], list(message.get("headers", []))))
        elif message["type"] == "http.response.body":
            if message.get("body"):
                await self.out.put(bytes(message["body"]))
            if not message.get("more_body", False):
                await self.out.put(_Done())

    async def serve(self, app: ASGIApp, scope: MutableMapping[str, Any]) -> None:
        try:
            await app(scope, self.receive, self.send)
        except Exception as exc:
            if not self.closed.is_set():
                log.exception("the in-process app failed")
                await self.out.put(_Failed(exc))
        else:
            if not self.closed.is_set():
                await self.out.put(_Done())

    def close(self) -> None:
        """Stop reading: the app sees a disconnect, and a `send` waiting for room goes through."""
        self.closed.set()
        while not self.out.empty():
            self.out.get_nowait()

    async def next(self, timeout: float | None) -> _Start | bytes | _Done | _Failed:
        try:
            return await asyncio.wait_for(self.out.get(), timeout)
        except TimeoutError:
            raise httpx.ReadTimeout("the in-process app sent nothing in time") from None


@dataclass(slots=True)
class _Body(httpx.AsyncByteStream):
    exchange: _Exchange
    task: asyncio.Task[None]
    timeout: float | None

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while True:
            message = await self.exchange.next(self.timeout)
            if isinstance(message, bytes):
                yield message
            elif isinstance(message, _Failed):
                raise httpx.RemoteProtocolError("the in-process app failed mid-response")
            elif isinstance(message, _Done):
                return

    async def aclose(self) -> None:
        self.exchange.close()
        await asyncio.wait([self.task], timeout=_GRACE)
        if not self.task.done():
            self.task.cancel()
            await asyncio.wait([self.task])


class StreamingASGITransport(httpx.AsyncBaseTransport):
    """Send requests to an ASGI app in this process, streaming each response body as the app sends it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Start the app on the request and return as soon as it has sent its status and headers."""
        timeout: float | None = request.extensions.get("timeout", {}).get("read")
        exchange = _Exchange(await request.aread())
        task = asyncio.ensure_future(exchange.serve(self.app, _scope(request)))
        body = _Body(exchange, task, timeout)
        try:
            first = await exchange.next(timeout)
        except BaseException:
            await body.aclose()
            raise
        if isinstance(first, _Start):
            return httpx.Response(first.status, headers=first.headers, stream=body)
        await body.aclose()
        if isinstance(first, _Failed):
            return httpx.Response(500, text="Internal Server Error")
        raise httpx.RemoteProtocolError("the in-process app sent no response start")


def _scope(request: httpx.Request) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": request.method,
        "headers": [(key.lower(), value) for key, value in request.headers.raw],
        "scheme": request.url.scheme,
        "path": request.url.path,
        "raw_path": request.url.raw_path.split(b"?")[0],
        "query_string": request.url.query,
        "server": (request.url.host, request.url.port or 80),
        "client": ("127.0.0.1", 0),
        "root_path": "",
    }
