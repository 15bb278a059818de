"""What one remote stream may send (`StreamLimits`), and its body read without holding more than that.

    body_pieces    the body as sent, decoded (gzip, deflate) in pieces of at most `PIECE` bytes, so a
                   gzip bomb's thousandfold never exists at once; an encoding that was not offered
                   (`ACCEPTED_ENCODINGS`) is refused before a byte of it is read
    read_prefix    at most so many decoded bytes of a body that is not a stream (an error page, a JSON
                   answer), read the same way

The line, event, byte and count limits are applied by the SSE decoder (`_sse.SSEDecoder`) as it frames
the pieces, and the two times by `_sse.paced`. Every reader of a remote stream in the project reads it
this way: `AGUIClient` (and so the conformance kit), `AGUIUpstream` and `OpenAIChatBackend`. Each turns
`StreamLimitError` into its own error: `StreamLimitExceeded` for the client, `UPSTREAM_LIMIT` for the
backends.

Decompression is bounded by decoding it ourselves: the request offers only gzip and deflate, the raw
bytes are inflated with a cap on each step's output (httpx inflates a whole chunk at once), and any
other content encoding is refused, since it could not be bounded the same way.
"""

from __future__ import annotations

import math
import re
import zlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import ClassVar, Final

import httpx

PIECE: Final = 65_536
"""The most decoded bytes held at once from one compressed chunk."""
ACCEPTED_ENCODINGS: Final = "gzip, deflate"
"""What a remote stream may be compressed with (the request's `accept-encoding`); any other encoding is refused."""
_ENCODINGS: Final = {"gzip": zlib.MAX_WBITS | 16, "x-gzip": zlib.MAX_WBITS | 16, "deflate": zlib.MAX_WBITS}
_LIMIT_NAME: Final = re.compile(r"\((\w+)\)$")


@dataclass(frozen=True, slots=True)
class StreamLimits:
    """What one remote SSE stream (one run, one model step) may send before reading stops.

    Args:
        max_event_bytes: The largest SSE line, and the largest frame (its lines together), in bytes.
        max_bytes: Bytes of body in all, after decompression.
        max_events: Frames in all; a frame of comments alone (a keep-alive) counts too, since each is held.
        event_timeout: Seconds spent waiting for the server without an event arriving; comments do not
            count as events, and time the reader spends on what it got does not count as waiting.
        run_timeout: Seconds from the request to the end of the stream, whatever is sent.
    """

    max_event_bytes: int = 8 * 1024 * 1024
    max_bytes: int = 64 * 1024 * 1024
    max_events: int = 100_000
    event_timeout: float = 120.0
    run_timeout: float = 900.0

    _invalid: ClassVar[type[ValueError]] = ValueError

    def __post_init__(self) -> None:
        for name in ("max_event_bytes", "max_bytes", "max_events", "event_timeout", "run_timeout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0 or math.isnan(value):
                raise self._invalid(f"{type(self).__name__}.{name} must be a positive number, not {value!r}")


class StreamLimitError(Exception):
    """A remote stream passed one of its limits; `limit` names it, `what` says what the server did."""

    def __init__(self, what: str) -> None:
        super().__init__(f"the server {what}")
        self.what = what
        found = _LIMIT_NAME.search(what)
        self.limit = found.group(1) if found else ""

    def told(self, sender: str) -> str:
        """The refusal as one sentence about `sender` ("The upstream agent", "The model server")."""
        return f"{sender} {self.what}."


class UndecodableBody(Exception):
    """The body does not decompress as its content encoding says."""


class _Inflate:
    """One compressed body, inflated at most `PIECE` bytes at a time."""

    def __init__(self, encoding: str) -> None:
        self._wbits = _ENCODINGS[encoding]
        self._z = zlib.decompressobj(self._wbits)
        self._started = False

    def pieces(self, data: bytes) -> Iterator[bytes]:
        while data:
            try:
                piece = self._z.decompress(data, PIECE)
            except zlib.error:
                if self._started or self._wbits != zlib.MAX_WBITS:
                    raise UndecodableBody("the body does not decompress") from None
                self._wbits, self._z = -zlib.MAX_WBITS, zlib.decompressobj(-zlib.MAX_WBITS)  # raw deflate
                continue
            self._started = True
            data = self._z.unconsumed_tail
            if piece:
                yield piece


def _inflater(response: httpx.Response) -> _Inflate | None:
    encodings = [e.strip().lower() for e in response.headers.get("content-encoding", "").split(",") if e.strip()]
    encodings = [e for e in encodings if e != "identity"]
    if not encodings:
        return None
    if len(encodings) == 1 and encodings[0] in _ENCODINGS:
        return _Inflate(encodings[0])
    raise StreamLimitError(f"used a content encoding other than {ACCEPTED_ENCODINGS} (content_encoding)")


async def body_pieces(response: httpx.Response) -> AsyncIterator[bytes]:
    """The decoded body in pieces of at most `PIECE` bytes, each decoded only when the reader asks for it."""
    inflater = _inflater(response)  # first: an encoding not offered is refused, read or not
    if response.is_stream_consumed:
        inflater = None  # a body a transport has already read (a mock's) is already decoded
    async for chunk in _raw(response):
        for piece in inflater.pieces(chunk) if inflater else _sliced(chunk):
            yield piece


async def read_prefix(response: httpx.Response, limit: int) -> bytes:
    """At most the first `limit` decoded bytes of the body; reading stops there."""
    body = bytearray()
    async for piece in body_pieces(response):
        body += piece[: limit - len(body)]
        if len(body) >= limit:
            break
    return bytes(body)


async def _raw(response: httpx.Response) -> AsyncIterator[bytes]:
    """The body as sent, or as a transport has already read it."""
    if response.is_stream_consumed:
        yield response.content
        return
    async for chunk in response.aiter_raw():
        yield chunk


def _sliced(chunk: bytes) -> Iterator[bytes]:
    for start in range(0, len(chunk), PIECE):
        yield chunk[start : start + PIECE]
