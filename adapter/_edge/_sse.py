"""SSE framing, and the response that streams a run's events to a client, each with its `id:`.

The response reads a `Listener` (`adapter._sessions._journal`): the run itself is driven by a task of its own,
so the response only waits for what is ready, with a timeout that sends keep-alive comments, and never
holds the run's work. Whatever ends the response (the terminal event, the client gone), it tells the
listener, which lets the run go on, or stops it (`on_disconnect="stop"`: at its next safe point).
"""

from __future__ import annotations

import asyncio
from typing import Final

from ag_ui.core import BaseEvent
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from adapter._sessions._journal import Batch, Listener
from adapter._wire import event_json

KEEPALIVE: Final = ": keep-alive\n\n"
"""An SSE comment: consumers ignore it, proxies see traffic (TRANS-5)."""
KEEPALIVE_BYTES: Final = KEEPALIVE.encode()

HEADERS: Final = {"content-type": "text/event-stream", "cache-control": "no-store", "x-accel-buffering": "no"}
_RAW_HEADERS: Final = tuple((name.encode("latin-1"), value.encode("latin-1")) for name, value in HEADERS.items())


def encode_event(event: BaseEvent) -> str:
    """Frame one event as an SSE `data:` line followed by a blank line, LF only (TRANS-3/4).

    Optional fields without a value are left out by the ag_ui models themselves. `exclude_none` is
    deliberately not passed: it would also drop required nulls such as `CUSTOM.value`.
    """
    return f"data: {event_json(event)}\n\n"


def frames(batch: Batch, *, ids: bool) -> str:
    """Frame a batch of journaled events as SSE: each its `id:` (unless `ids` is off, or it is not in the journal).

    The events are wire JSON already (encoded once, by the run's driver); events outside the journal (seq 0) go
    without an `id:`, so a client's `Last-Event-ID` always names an event of the journal.
    """
    if not ids or not batch.first:
        return "".join(f"data: {text}\n\n" for text in batch.texts)
    return "".join(f"id: {seq}\ndata: {text}\n\n" for seq, text in enumerate(batch.texts, batch.first))


def body(batch: Batch, *, ids: bool) -> bytes:
    """A batch's SSE bytes (`frames`), made once for every reader that gets the same batch."""
    framed = batch.framed.get(ids)
    if framed is None:
        framed = batch.framed[ids] = frames(batch, ids=ids).encode()
    return framed


class EventStreamResponse(Response):
    """A `200 text/event-stream` response carrying one run's events, up to and including its terminal event.

    Args:
        listener: Where the events come from: the run this request started, or a reattached reader.
        keepalive_interval: Seconds without an event after which a keep-alive comment is sent.
    """

    media_type = "text/event-stream"

    def __init__(self, listener: Listener, *, keepalive_interval: float) -> None:
        self.status_code = 200
        self.background = None
        self.raw_headers = list(_RAW_HEADERS)  # what `init_headers(HEADERS)` builds, encoded once (3 µs a response)
        self._listener = listener
        self._keepalive_interval = keepalive_interval

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        finished = False
        try:
            finished = await self._stream(receive, send)
        finally:
            await self._listener.close(left=not finished)

    async def _stream(self, receive: Receive, send: Send) -> bool:
        """Send frames until the last one; False if the client left first.

        An ASGI 2.3 server (uvicorn) tells of a gone client only through `receive`: a task of its own watches it,
        and cancels the response where it waits (its next step, however busy). A plain task and the task's own
        cancel count (`uncancel`), not an anyio task group: the group cost some 70 µs a response, the task 9.
        """
        response = asyncio.current_task()
        assert response is not None
        watching, left = True, False

        def gone(watcher: asyncio.Future[None]) -> None:
            nonlocal left
            if watcher.cancelled():
                return
            watcher.exception()  # retrieved: a `receive` that fails once the response is over is not logged as lost
            if watching:
                left = True
                response.cancel()

        watcher = asyncio.ensure_future(_watch_disconnect(receive))
        watcher.add_done_callback(gone)
        try:
            return await self._write(send)
        except OSError:  # ASGI 2.4 servers report a gone client by failing `send`
            return False
        except asyncio.CancelledError:
            if not left or response.uncancel() > 0:  # cancelled from outside (as well): that goes on
                raise
            failure = watcher.exception()
            if failure is not None:  # `receive` failed: the server's, raised as the task group raised it
                raise failure from None
            return False
        finally:
            watching = False
            if not watcher.done():  # its callback would cost a loop turn of its own after the cancel, to do nothing
                watcher.remove_done_callback(gone)
            watcher.cancel()

    async def _write(self, send: Send) -> bool:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        listener = self._listener
        last = False
        while not last:
            batch = await listener.next(self._keepalive_interval)
            if batch is None:
                chunk = KEEPALIVE_BYTES
            else:
                # Every frame that is ready goes in one write: joining adds no wait, and saves a send per event.
                chunk, last = body(batch, ids=listener.ids), batch.last
            # The last frames end the body in the same message: no empty send of its own through every layer.
            await send({"type": "http.response.body", "body": chunk, "more_body": not last})
        return True


async def _watch_disconnect(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
