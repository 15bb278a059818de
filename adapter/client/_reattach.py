"""A run's stream read across dropped connections: after a drop, the rest from the last `id:` read, each event once.

    the connection drops before the run's     the unfinished frame is forgotten (`SSEDecoder.drop`), and the run's
    terminal event: a reset, a read timeout,  events route is read from the id of the last whole frame read:
    a silence past `event_timeout`, a body    GET {mount}/threads/{threadId}/runs/{runId}/events, Last-Event-ID: N
    that ends early
    a reattach that brings no new event       tried again after `BACKOFF` s, doubled each time up to `MAX_BACKOFF`;
    (it drops, fails to connect, or gets a    after `max_reattaches` in a row the read gives up: `StreamDropped`, or
    5xx or 429)                               `StreamLimitExceeded` for a silence
    the events route answers 204              the run ended with nothing after the id: the read ends there
    any other refusal (404: the thread was    the read ends, the refusal among the run's problems
    deleted)
    any other limit (`max_bytes`, ...)        the read stops, as on one connection

The rule: a reader gets the run's events after the position it started from, each once and in order, with no
gap. It holds because a frame is taken only whole, with its id (a frame cut mid-way is forgotten and comes
again); the server sends the events after the id it is given; and the reader checks the ids besides (each
the one after the last, `RunReader` with `numbered`), so an event read already is never taken twice. The
limits hold for the whole read, over every connection: `max_bytes` and `max_events` count every byte and
frame, `run_timeout` runs from the first request, and `event_timeout` from each connection's start.

A stream whose events carry no ids cannot be taken up where it dropped (the events route would send it
again from its start): once an event came without an id, a drop stands.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass
from typing import Final
from urllib.parse import quote

import httpx

from adapter.client._errors import StreamDropped, error_code
from adapter.client._limits import ACCEPTED_ENCODINGS, StreamLimitError, UndecodableBody, body_pieces, read_prefix
from adapter.client._run import RunReader
from adapter.client._sse import paced

BACKOFF: Final = 0.1
"""Seconds before the second reattach in a row that brought no new event (the first goes at once)."""
MAX_BACKOFF: Final = 2.0
"""The longest pause between two reattaches."""
MAX_REATTACHES: Final = 8
"""Reattaches in a row that may bring no new event before a read gives up (`AGUIClient(max_reattaches=)`): with
their pauses, they ride out some 7 s of a server that cannot answer (a restart)."""
STREAM_HEADERS: Final = {"accept": "text/event-stream", "accept-encoding": ACCEPTED_ENCODINGS}
_REFUSAL_BYTES: Final = 4096  # of a refused reattach's answer: enough for its error code
_TRANSIENT: Final = frozenset({429, 500, 502, 503, 504})  # refusals a later reattach may not meet


def events_url(base: str, thread_id: str, run_id: str) -> str:
    """The events route of a run, below the sub-app at `base`; the ids percent-encoded whole."""
    return f"{base.rstrip('/')}/threads/{quote(thread_id, safe='')}/runs/{quote(run_id, safe='')}/events"


def events_request(http: httpx.AsyncClient, url: str, last_event_id: str | None) -> httpx.Request:
    """A GET of a run's events route, after `last_event_id` (from the start without one)."""
    headers = dict(STREAM_HEADERS)
    if last_event_id:
        headers["last-event-id"] = last_event_id
    return http.build_request("GET", url, headers=headers)


@dataclass(frozen=True, slots=True)
class Reattach:
    """Where a run's stream is read again after a drop: its events route, through `http`."""

    http: httpx.AsyncClient
    url: str
    max_reattaches: int = MAX_REATTACHES

    async def open(self, last_event_id: str | None) -> httpx.Response:
        """The events route's answer, its body not read yet."""
        return await self.http.send(events_request(self.http, self.url, last_event_id), stream=True)


async def pieces(
    response: httpx.Response, reader: RunReader, started: float, again: Reattach | None
) -> AsyncGenerator[bytes, None]:
    """The pieces of a run's stream, paced, for `reader` to feed on; after a drop, with `again`, its events route's.

    The events route is read from the last id `reader` read, as often as the stream drops before its end, as
    long as each reattach (or one of `again.max_reattaches` in a row) brings a new event.

    Raises:
        StreamDropped: The connection dropped, and the stream was not (or could not be) taken up again.
        StreamLimitError: A limit passed (`event_timeout`, with `again`, once reattaching gave up).
    """
    run = reader.run
    tries = 0
    while True:
        before = (len(run.wire), run.last_event_id)
        cause: Exception | None = None
        try:
            async with aclosing(paced(body_pieces(response), reader.decoder, started)) as arriving:
                async for piece in arriving:
                    yield piece
        except httpx.TransportError as error:
            cause = error
        except StreamLimitError as error:
            if again is None or error.limit != "event_timeout":
                raise
            cause = error
        finally:
            await response.aclose()
        if reader.ended or (cause is None and again is None):
            return  # whole; or, not reattaching, an early end that the lifecycle reports (LIFE-3)
        run.drops.append(_told(cause))
        reader.decoder.drop()
        if (len(run.wire), run.last_event_id) != before:
            tries = 0
        while True:
            if again is None or not _resumable(reader) or tries >= again.max_reattaches:
                if isinstance(cause, StreamLimitError):
                    raise cause
                raise _dropped(run.drops[-1], reader, cause)
            tries += 1
            await asyncio.sleep(0 if tries == 1 else min(BACKOFF * 2 ** (tries - 2), MAX_BACKOFF))
            try:
                response = await again.open(run.last_event_id)
            except httpx.TransportError as error:
                cause = error
                run.drops.append(f"reattaching failed: {_told(error)}")
                continue
            if response.status_code == 200 and response.headers.get("content-type", "").startswith("text/event-stream"):
                break
            refusal = await _refusal(response)
            if response.status_code == 204:
                return  # the run ended, and nothing is after the last id read
            if response.status_code not in _TRANSIENT:
                run.problems.append(f"reattaching after event id {run.last_event_id}: {refusal}")
                return
            cause = None
            run.drops.append(f"reattaching was refused: {refusal}")


def _resumable(reader: RunReader) -> bool:
    """Whether the stream can be taken up where it dropped: an id says where, or nothing was read yet."""
    return bool(reader.run.last_event_id) or reader.decoder.events == 0


def _told(cause: Exception | None) -> str:
    if cause is None:
        return "the body ended before the run's terminal event"
    if isinstance(cause, StreamLimitError):
        return cause.told("The server")
    return f"{type(cause).__name__}: {cause}".rstrip(": ")


def _dropped(why: str, reader: RunReader, cause: Exception | None) -> StreamDropped:
    last = reader.run.last_event_id
    where = f"reattach after event id {last} for the rest" if last else "no event id to reattach after"
    dropped = StreamDropped(f"the run's stream dropped before its end ({why}); {where}", reader.run)
    if isinstance(cause, httpx.RequestError):
        try:
            dropped.request = cause.request
        except RuntimeError:  # an error raised outside a request (a transport's own) has none
            pass
    return dropped


async def _refusal(response: httpx.Response) -> str:
    """A refused reattach in a few words: its status and the server's error code; its body read within bounds."""
    try:
        body = await read_prefix(response, _REFUSAL_BYTES)
    except (httpx.TransportError, StreamLimitError, UndecodableBody):
        body = b""
    finally:
        await response.aclose()
    return f"HTTP {response.status_code} {error_code(body)}".rstrip()
