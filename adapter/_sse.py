"""SSE framing, and the response that streams one run's events to the client.

The handler's iterator runs in a producer task that feeds a small queue; the response reads the
queue with a timeout so it can send keep-alive comments without ever cancelling the iterator
mid-step. Whatever ends the response (terminal event, failure, client gone), the iterator is closed
in its own task so the run's backend work is released.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any, Final, TypeAlias

import anyio
from ag_ui.core import BaseEvent, EventType, RunErrorEvent
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from adapter._errors import INTERNAL_ERROR

logger = logging.getLogger(__name__)

KEEPALIVE: Final = ": keep-alive\n\n"
"""An SSE comment: consumers ignore it, proxies see traffic (TRANS-5)."""


_TERMINAL: Final = frozenset({EventType.RUN_FINISHED, EventType.RUN_ERROR})
_QUEUE_SIZE: Final = 16  # small, so a slow client slows the run instead of growing memory
_STOP_TIMEOUT: Final = 5.0  # how long the response waits for the run to unwind before abandoning it
_HEADERS: Final = {"content-type": "text/event-stream", "cache-control": "no-store", "x-accel-buffering": "no"}
_Frame: TypeAlias = tuple[str, bool]  # (encoded frame, whether it ends the stream)


def encode_event(event: BaseEvent) -> str:
    """Frame one event as an SSE `data:` line followed by a blank line, LF only (TRANS-3/4).

    Optional fields without a value are left out by the ag_ui models themselves. `exclude_none` is
    deliberately not passed: it would also drop required nulls such as `CUSTOM.value`.
    """
    return f"data: {event.model_dump_json(by_alias=True)}\n\n"


# When the run's iterator raised or ended without a terminal event.
_INTERNAL_ERROR_FRAME: Final = encode_event(
    RunErrorEvent(message="The run failed with an internal error.", code=INTERNAL_ERROR)
)


class EventStreamResponse(Response):
    """A `200 text/event-stream` response carrying one run, up to and including its terminal event.

    Args:
        events: The started run's events, from RUN_STARTED on; closed whatever ends the response.
        keepalive_interval: Seconds without an event after which a keep-alive comment is sent.
    """

    media_type = "text/event-stream"

    def __init__(self, events: AsyncIterator[BaseEvent], *, keepalive_interval: float) -> None:
        self.status_code = 200
        self.background = None
        self.init_headers(_HEADERS)
        self._events = events
        self._keepalive_interval = keepalive_interval

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        queue: asyncio.Queue[_Frame] = asyncio.Queue(maxsize=_QUEUE_SIZE)
        producer = asyncio.create_task(self._produce(queue))
        finished = False
        try:
            finished = await self._stream(queue, receive, send)
        finally:
            await _stop(producer, cancel=not finished)

    async def _stream(self, queue: asyncio.Queue[_Frame], receive: Receive, send: Send) -> bool:
        """Send frames until the last one; False if the client left first."""
        gone = anyio.Event()
        finished = False
        async with anyio.create_task_group() as group:
            group.start_soon(_watch_disconnect, receive, gone, group.cancel_scope)
            try:
                finished = await self._write(queue, send, gone)
            except OSError:  # ASGI 2.4 servers report a gone client by failing `send`
                pass
            group.cancel_scope.cancel()
        if not finished:
            logger.info("client disconnected; stopping the run")
        return finished

    async def _write(self, queue: asyncio.Queue[_Frame], send: Send, gone: anyio.Event) -> bool:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        last = False
        while not last:
            # Checked each frame: while frames keep coming, the task may never park long enough to be cancelled.
            if gone.is_set():
                return False
            body, last = await self._next_body(queue)
            await send({"type": "http.response.body", "body": body.encode(), "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        return True

    async def _next_body(self, queue: asyncio.Queue[_Frame]) -> tuple[str, bool]:
        """Every frame that is ready, joined into one body; a keep-alive after a quiet interval.

        Joining what is already queued adds no wait, and saves a send per event. The timeout is armed
        only when the queue is empty: arming it for every event costs more than encoding the event.
        """
        frames: list[str] = []
        last = False
        if queue.empty():
            item: _Frame | None = None
            with anyio.move_on_after(self._keepalive_interval):
                item = await queue.get()
            if item is None:
                return KEEPALIVE, False
            frames.append(item[0])
            last = item[1]
        while not last and not queue.empty():
            frame, last = queue.get_nowait()
            frames.append(frame)
        return "".join(frames), last

    async def _produce(self, queue: asyncio.Queue[_Frame]) -> None:
        events = self._events
        try:
            if not await _forward(events, queue):
                logger.error("the run ended without RUN_FINISHED or RUN_ERROR")
                await queue.put((_INTERNAL_ERROR_FRAME, True))
        except asyncio.CancelledError:
            if _stopping():
                raise
            logger.error("the run raised a CancelledError of its own")
            await queue.put((_INTERNAL_ERROR_FRAME, True))
        except Exception:
            logger.exception("the run failed")
            await queue.put((_INTERNAL_ERROR_FRAME, True))
        finally:
            await _close(events)


async def _forward(events: AsyncIterator[BaseEvent], queue: asyncio.Queue[_Frame]) -> bool:
    """Queue frames up to the terminal event; False if the events ran out before one."""
    async for event in events:
        # Encoded here, not in the writer, so that a bad event becomes a RUN_ERROR too.
        last = event.type in _TERMINAL
        await queue.put((encode_event(event), last))
        if last:
            return True
    return False


def _stopping() -> bool:
    # Only the response cancels the producer; any other CancelledError came from inside the run.
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


async def _watch_disconnect(receive: Receive, gone: anyio.Event, scope: anyio.CancelScope) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    gone.set()
    scope.cancel()


async def _close(events: AsyncIterator[BaseEvent]) -> None:
    # Closing runs the handler's `finally` blocks now, in the task that iterated it, not at GC time.
    aclose: Callable[[], Any] | None = getattr(events, "aclose", None)
    if aclose is None:
        return
    try:
        await aclose()
    except Exception:
        logger.exception("closing the run's event iterator failed")


async def _stop(producer: asyncio.Task[None], *, cancel: bool) -> None:
    # Shielded: a response cancelled from outside must still release the run.
    with anyio.move_on_after(_STOP_TIMEOUT, shield=True):
        if cancel:
            producer.cancel()
        await asyncio.wait({producer})
    if not producer.done():
        logger.warning("the run did not stop within %s s of its response ending; cancelling it", _STOP_TIMEOUT)
        producer.cancel()
