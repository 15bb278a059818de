"""Bounds on what one upstream run may send, whatever the upstream does: the body read as bounded lines.

    body_lines     the body's lines, decoded (gzip, deflate) in pieces of at most `_PIECE` bytes;
                   a longer line, or more bytes in all, is refused before it is held
    paced_lines    the same lines, refused when they carry too many events, one event too large, no event
                   for `event_timeout` seconds (comments and other lines do not count) or the run outlasts
                   `run_timeout`

Every refusal is a `BackendError` with code `UPSTREAM_LIMIT` that names the limit. The layer knows SSE only
as far as counting events (a blank line after data), so it stays when the event parsing moves.
"""

from __future__ import annotations

import asyncio
import math
import re
import zlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Final

import httpx

from adapter._errors import UPSTREAM_ERROR, UPSTREAM_LIMIT, BackendError, ConfigurationError

_PIECE: Final = 65_536
"""The most decoded bytes held at once from one compressed chunk."""
_BREAK: Final = re.compile(rb"\r\n|\r|\n")
_ENCODINGS: Final = {"gzip": zlib.MAX_WBITS | 16, "x-gzip": zlib.MAX_WBITS | 16, "deflate": zlib.MAX_WBITS}
_UNDECODABLE: Final = "The upstream agent sent a body that does not decompress."
ACCEPTED_ENCODINGS: Final = "gzip, deflate"
"""What the upstream may compress its body with (`accept-encoding`); any other encoding is refused."""


@dataclass(frozen=True, slots=True)
class UpstreamLimits:
    """What one upstream run (one step) may send before it is cut off with `UPSTREAM_LIMIT`.

    Args:
        max_event_bytes: The largest SSE line, and the largest event (its data lines together), in bytes.
        max_bytes: Bytes of body in all, after decompression.
        max_events: Events in all (comments are not events).
        event_timeout: Seconds the upstream may go without sending an event; keep-alive comments do not count.
        run_timeout: Seconds from the request to the run's terminal event, whatever is sent.
    """

    max_event_bytes: int = 8 * 1024 * 1024
    max_bytes: int = 64 * 1024 * 1024
    max_events: int = 100_000
    event_timeout: float = 120.0
    run_timeout: float = 900.0

    def __post_init__(self) -> None:
        for name in ("max_event_bytes", "max_bytes", "max_events", "event_timeout", "run_timeout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0 or math.isnan(value):
                raise ConfigurationError(f"UpstreamLimits.{name} must be a positive number, not {value!r}")


def upstream_limit(message: str) -> BackendError:
    """An upstream run cut off at one of its limits."""
    return BackendError(message, code=UPSTREAM_LIMIT)


class _Inflate:
    """One compressed body, decoded in bounded pieces (httpx decodes a whole chunk at once: a bomb's 1000x)."""

    def __init__(self, encoding: str) -> None:
        self._wbits = _ENCODINGS[encoding]
        self._z = zlib.decompressobj(self._wbits)
        self._started = False

    def pieces(self, data: bytes) -> Iterator[bytes]:
        while data:
            try:
                piece = self._z.decompress(data, _PIECE)
            except zlib.error:
                if self._started or self._wbits != zlib.MAX_WBITS:
                    raise BackendError(_UNDECODABLE, code=UPSTREAM_ERROR) from None
                self._wbits, self._z = -zlib.MAX_WBITS, zlib.decompressobj(-zlib.MAX_WBITS)  # raw deflate
                continue
            self._started = True
            data = self._z.unconsumed_tail
            if piece:
                yield piece


def _decoder(response: httpx.Response) -> _Inflate | None:
    encodings = [e.strip().lower() for e in response.headers.get("content-encoding", "").split(",") if e.strip()]
    encodings = [e for e in encodings if e != "identity"]
    if not encodings:
        return None
    if len(encodings) == 1 and encodings[0] in _ENCODINGS:
        return _Inflate(encodings[0])
    raise upstream_limit(f"The upstream agent used a content encoding other than {ACCEPTED_ENCODINGS}.")


async def body_pieces(response: httpx.Response, max_bytes: int) -> AsyncIterator[bytes]:
    """The decoded body in pieces of at most `_PIECE` bytes, refused past `max_bytes`."""
    decoder = _decoder(response) if response.is_stream_consumed is False else None
    total = 0
    async for chunk in _raw(response):
        for piece in decoder.pieces(chunk) if decoder else _sliced(chunk):
            total += len(piece)
            if total > max_bytes:
                raise upstream_limit(f"The upstream agent sent more than {max_bytes} bytes (max_bytes).")
            yield piece


async def _raw(response: httpx.Response) -> AsyncIterator[bytes]:
    """The body as sent; a body a transport has already read (a mock's) is already decoded."""
    if response.is_stream_consumed:
        yield response.content
        return
    async for chunk in response.aiter_raw():
        yield chunk


def _sliced(chunk: bytes) -> Iterator[bytes]:
    for start in range(0, len(chunk), _PIECE):
        yield chunk[start : start + _PIECE]


async def body_lines(response: httpx.Response, limits: UpstreamLimits) -> AsyncIterator[str]:
    """The body's lines (CR, LF or CRLF ends one), each refused once it grows past `max_event_bytes`."""
    line = bytearray()
    after_cr = False
    async for piece in body_pieces(response, limits.max_bytes):
        if after_cr and piece.startswith(b"\n"):
            piece = piece[1:]  # the LF of a CRLF split across two pieces
        after_cr = piece.endswith(b"\r")
        start = 0
        for end in _BREAK.finditer(piece):
            _grow(line, piece, start, end.start(), limits.max_event_bytes)
            yield line.decode("utf-8", errors="replace")
            line.clear()
            start = end.end()
        _grow(line, piece, start, len(piece), limits.max_event_bytes)
    if line:
        yield line.decode("utf-8", errors="replace")


def _grow(line: bytearray, piece: bytes, start: int, end: int, limit: int) -> None:
    if len(line) + end - start > limit:
        raise upstream_limit(f"The upstream agent sent a line longer than {limit} bytes (max_event_bytes).")
    line += piece[start:end]


@dataclass(slots=True)
class _Events:
    """Counts the events lines make, refusing one too large or one too many."""

    limits: UpstreamLimits
    count: int = 0
    pending: int | None = None
    """Bytes of the data lines of the event being sent; None between events."""

    def see(self, line: str) -> bool:
        """Count one line; True when it ends an event (a blank line after data: comments and other fields are not)."""
        if line:
            if line.partition(":")[0] == "data":
                self.pending = (self.pending or 0) + len(line)
                if self.pending > self.limits.max_event_bytes:
                    raise upstream_limit(
                        f"An upstream event was over {self.limits.max_event_bytes} bytes (max_event_bytes)."
                    )
            return False
        if self.pending is None:
            return False
        self.pending, self.count = None, self.count + 1
        if self.count > self.limits.max_events:
            raise upstream_limit(f"The upstream agent sent more than {self.limits.max_events} events (max_events).")
        return True


async def paced_lines(lines: AsyncIterator[str], limits: UpstreamLimits, started: float) -> AsyncIterator[str]:
    """`lines`, while the events they carry keep within the limits; `started` is the request's loop time."""
    loop = asyncio.get_running_loop()
    deadline = started + limits.run_timeout
    events = _Events(limits)
    waiting_since = loop.time()
    while True:
        until = min(waiting_since + limits.event_timeout, deadline)
        try:
            async with asyncio.timeout_at(until) as timer:
                line = await anext(lines)
        except StopAsyncIteration:
            return
        except TimeoutError:
            if not timer.expired():
                raise
            raise _late(limits, whole_run=deadline <= until) from None
        if loop.time() >= until:  # a line that beat the timer (Python 3.11's wait_for may swallow its cancel)
            raise _late(limits, whole_run=deadline <= until)
        ended = events.see(line)
        yield line
        if ended:
            waiting_since = loop.time()  # the consumer has handled the event: wait afresh for the next one


def _late(limits: UpstreamLimits, *, whole_run: bool) -> BackendError:
    if whole_run:
        return upstream_limit(f"The upstream agent's run took longer than {limits.run_timeout} s (run_timeout).")
    return upstream_limit(f"The upstream agent sent no event for {limits.event_timeout} s (event_timeout).")


def limited_lines(response: httpx.Response, limits: UpstreamLimits, started: float) -> AsyncIterator[str]:
    """The lines of an upstream run's SSE body, within `limits`."""
    return paced_lines(body_lines(response, limits), limits, started)
