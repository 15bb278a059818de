"""The body of a run request, read at the edge: its media type, its size as it arrives, and where it is parsed."""

from __future__ import annotations

from contextlib import aclosing
from typing import Final

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from adapter._input import CheckedInput, parse_run_input

_INLINE_PARSE_BYTES: Final = 64 * 1024  # larger bodies are parsed off the event loop
_UTF8: Final = frozenset({"utf-8", "utf8"})


def is_json(content_type: str) -> bool:
    """Whether `content_type` is `application/json`, with no charset other than UTF-8."""
    media_type, *parameters = content_type.split(";")
    if media_type.strip().lower() != "application/json":
        return False
    for parameter in parameters:
        name, _, value = parameter.partition("=")
        if name.strip().lower() == "charset" and value.strip().strip('"').lower() not in _UTF8:
            return False
    return True


async def read_body(request: Request, limit: int) -> bytes | None:
    """The body, or None as soon as it is known to exceed `limit` bytes."""
    declared = request.headers.get("content-length", "")
    if declared.isascii() and declared.isdigit() and int(declared) > limit:
        return None
    # Counted as it arrives: Content-Length may be absent (chunked) or wrong.
    body = bytearray()
    async with aclosing(request.stream()) as chunks:
        async for chunk in chunks:
            body += chunk
            if len(body) > limit:
                return None
    return bytes(body)


async def parse_body(body: bytes) -> CheckedInput:
    """The run input in `body`, checked; a large body is parsed on a worker thread, off the event loop."""
    if len(body) <= _INLINE_PARSE_BYTES:
        return parse_run_input(body)
    return await run_in_threadpool(parse_run_input, body)
