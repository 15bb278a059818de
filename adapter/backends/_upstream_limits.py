"""`UpstreamLimits`: what one upstream run or model step may send, and the backends' SSE reading within them.

The reading is `adapter.client`'s, the one SSE reader of the project (`_limits.body_pieces`, decoded in
bounded pieces; `_sse.read_sse`, framed linearly and paced). Here its refusals become `BackendError`s:

    a line or an event over `max_event_bytes`, more than `max_bytes` (decompressed)
    or `max_events`, no event for `event_timeout`, a run over `run_timeout`,
    a content encoding other than gzip or deflate                               -> UPSTREAM_LIMIT, naming the limit
    a body that does not decompress                                             -> the reader's own code

`AGUIUpstream` and `OpenAIChatBackend` both read through `read_data`.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import ClassVar

import httpx

from adapter._errors import UPSTREAM_LIMIT, BackendError, ConfigurationError
from adapter.client._limits import StreamLimitError, StreamLimits, UndecodableBody, body_pieces
from adapter.client._sse import read_sse


@dataclass(frozen=True, slots=True)
class UpstreamLimits(StreamLimits):
    """What one upstream run (one step), or one model step, may send before it is cut off with `UPSTREAM_LIMIT`.

    Args:
        max_event_bytes: The largest SSE line, and the largest event (its lines together), in bytes.
        max_bytes: Bytes of body in all, after decompression.
        max_events: Events in all; a frame of comments alone (a keep-alive) counts as one.
        event_timeout: Seconds spent waiting for the server without an event arriving; keep-alive comments do
            not count, nor does the time the engine takes over what it got.
        run_timeout: Seconds from the request to the end of the stream, whatever is sent.
    """

    _invalid: ClassVar[type[ValueError]] = ConfigurationError


def upstream_limit(message: str) -> BackendError:
    """A stream cut off at one of its limits."""
    return BackendError(message, code=UPSTREAM_LIMIT)


async def read_data(
    response: httpx.Response,
    limits: StreamLimits,
    started: float,
    *,
    sender: str,
    undecodable: BackendError,
    on_other_line: Callable[[str], None] | None = None,
) -> AsyncGenerator[str, None]:
    """The data of each event of a server's SSE body, within `limits` from `started` (the request's loop time).

    Args:
        response: The streamed response, its status and media type already checked.
        limits: The limits to read within.
        started: The loop time the request was sent.
        sender: Who sent it, as a refusal names it ("The upstream agent").
        undecodable: The error for a body that does not decompress.
        on_other_line: Sees each line that is no SSE field; may raise to refuse the body.
    """
    arriving = read_sse(body_pieces(response), on_other_line=on_other_line, limits=limits, started=started)
    try:
        async with aclosing(arriving) as data:
            async for each in data:
                yield each
    except StreamLimitError as error:
        raise upstream_limit(error.told(sender)) from None
    except UndecodableBody:
        raise undecodable from None
