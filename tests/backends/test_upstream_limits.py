"""A hostile or broken upstream meets `UpstreamLimits`: bounded bytes read, memory, and time without events."""

from __future__ import annotations

import asyncio
import json
import tracemalloc
import zlib
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest
from agui import run_events, run_input, user
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from adapter import Adapter, ConfigurationError, Limits
from adapter.backends import AGUIUpstream, BackendError, BackendItem, ModelRequest, TextDelta, UpstreamLimits

if TYPE_CHECKING:
    from conftest import Serve

KIB = 1024
STARTED = {"type": "RUN_STARTED", "threadId": "up", "runId": "up-run"}
FINISHED = {"type": "RUN_FINISHED", "threadId": "up", "runId": "up-run"}
Message = MutableMapping[str, Any]  # an ASGI scope or message


def frame(event: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(event)}\n\n".encode()


def content(delta: str) -> bytes:
    return frame({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": delta})


TEXT_START = frame({"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"})


@dataclass
class Hostile:
    """An in-process upstream that sends `chunks` (forever, if they are endless) and counts what got through."""

    chunks: Callable[[], Iterator[bytes]]
    headers: tuple[tuple[bytes, bytes], ...] = ((b"content-type", b"text/event-stream"),)
    pause: float = 0.0
    status: int = 200
    sent_bytes: int = 0
    sent_chunks: int = 0

    async def __call__(
        self, scope: Message, receive: Callable[[], Awaitable[Message]], send: Callable[[Message], Awaitable[None]]
    ) -> None:
        await receive()
        gone = asyncio.ensure_future(receive())  # http.disconnect: the reader stopped
        await send({"type": "http.response.start", "status": self.status, "headers": list(self.headers)})
        for chunk in self.chunks():
            if gone.done():
                return
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
            self.sent_bytes += len(chunk)
            self.sent_chunks += 1
            await asyncio.sleep(self.pause)  # 0: yield to the reader, as a socket write would
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        gone.cancel()


def request() -> ModelRequest:
    return ModelRequest(messages=[], tools=[], thread_id="t", run_id="r")


async def refusal(backend: AGUIUpstream) -> BackendError:
    """The error the step ends with; a stream that never ends fails the test instead of hanging it."""
    with pytest.raises(BackendError) as caught:
        async with asyncio.timeout(60):
            async for _ in backend.stream(request()):
                pass
    return caught.value


def endless(*chunks: bytes, then: bytes = b"", up_to: int = 20_000) -> Callable[[], Iterator[bytes]]:
    """`chunks`, then `then` again and again (at most `up_to` times, so a missing limit fails rather than hangs)."""

    def generate() -> Iterator[bytes]:
        yield from chunks
        for _ in range(up_to):
            yield then

    return generate


_BUFFERED = 66  # chunks the in-process transport holds ahead of the reader, and the two in hand


async def test_a_line_past_max_event_bytes_is_refused_after_reading_about_that_much() -> None:
    upstream = Hostile(endless(b"data: ", then=b"a" * 16 * KIB, up_to=2048))  # a 32 MiB line
    async with AGUIUpstream(upstream, limits=UpstreamLimits(max_event_bytes=256 * KIB)) as backend:
        error = await refusal(backend)

    assert (error.code, "max_event_bytes" in error.message) == ("UPSTREAM_LIMIT", True)
    assert upstream.sent_bytes <= 256 * KIB + _BUFFERED * 16 * KIB


async def test_an_event_of_many_data_lines_counts_as_one() -> None:
    upstream = Hostile(endless(frame(STARTED), then=b"data: " + b"x" * KIB + b"\n", up_to=32 * KIB))
    async with AGUIUpstream(upstream, limits=UpstreamLimits(max_event_bytes=64 * KIB)) as backend:
        error = await refusal(backend)

    assert (error.code, "max_event_bytes" in error.message) == ("UPSTREAM_LIMIT", True)
    assert upstream.sent_chunks <= 64 + _BUFFERED + 1


async def test_endless_text_stops_at_max_events() -> None:
    upstream = Hostile(endless(frame(STARTED), TEXT_START, then=content("spam ")))
    async with AGUIUpstream(upstream, limits=UpstreamLimits(max_events=500)) as backend:
        error = await refusal(backend)

    assert (error.code, "max_events" in error.message) == ("UPSTREAM_LIMIT", True)
    assert upstream.sent_chunks <= 500 + _BUFFERED


async def test_endless_large_events_stop_at_max_bytes() -> None:
    upstream = Hostile(endless(frame(STARTED), TEXT_START, then=content("x" * 32 * KIB)))
    async with AGUIUpstream(upstream, limits=UpstreamLimits(max_bytes=1024 * KIB)) as backend:
        error = await refusal(backend)

    assert (error.code, "max_bytes" in error.message) == ("UPSTREAM_LIMIT", True)
    assert upstream.sent_bytes <= 1024 * KIB + _BUFFERED * 33 * KIB


async def test_keep_alive_comments_do_not_hold_a_run_open_past_event_timeout() -> None:
    upstream = Hostile(endless(frame(STARTED), then=b": keep-alive\n\n"), pause=0.01)
    limits = UpstreamLimits(event_timeout=0.3)
    async with AGUIUpstream(upstream, timeout=30, limits=limits) as backend:
        error = await refusal(backend)

    assert (error.code, "event_timeout" in error.message) == ("UPSTREAM_LIMIT", True)
    assert upstream.sent_chunks > 2  # comments kept flowing: the read timeout never fired, the event timeout did


async def test_events_that_keep_coming_stop_at_run_timeout() -> None:
    upstream = Hostile(endless(frame(STARTED), TEXT_START, then=content("x")), pause=0.01)
    limits = UpstreamLimits(event_timeout=30, run_timeout=0.3)
    async with AGUIUpstream(upstream, limits=limits) as backend:
        error = await refusal(backend)

    assert (error.code, "run_timeout" in error.message) == ("UPSTREAM_LIMIT", True)


async def test_a_slow_consumer_does_not_count_against_event_timeout() -> None:
    body = [frame(STARTED), TEXT_START, content("a"), content("b"), frame(FINISHED)]
    upstream = Hostile(endless(*body, up_to=0))
    received: list[BackendItem] = []
    async with AGUIUpstream(upstream, limits=UpstreamLimits(event_timeout=0.2)) as backend:
        async for item in backend.stream(request()):
            received.append(item)
            await asyncio.sleep(0.3)  # the engine's client is slow: the upstream is not to blame

    assert received == [TextDelta("a", "m"), TextDelta("b", "m")]


async def test_the_engine_ends_the_run_with_upstream_limit() -> None:
    upstream = Hostile(endless(frame(STARTED), TEXT_START, then=content("spam ")))
    adapter = Adapter(AGUIUpstream(upstream, limits=UpstreamLimits(max_events=100)))

    events = await run_events(adapter, run_input("t-limit", [user("hi")]))

    assert events[-1]["type"] == "RUN_ERROR"
    assert events[-1]["code"] == "UPSTREAM_LIMIT"


def gzip_bomb(decoded: int) -> bytes:
    """A gzip body of `decoded` bytes of SSE comments, about a thousandth of that size."""
    packer = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    line = b": " + b"z" * 1022 + b"\n"
    block = line * 1024
    return b"".join(packer.compress(block) for _ in range(decoded // len(block))) + packer.flush()


async def test_a_gzip_bomb_over_http_is_cut_at_max_bytes_in_bounded_memory(serve: Serve) -> None:
    bomb = gzip_bomb(128 * 1024 * KIB)

    async def answer(request: Request) -> Response:
        await request.body()
        return Response(bomb, headers={"content-type": "text/event-stream", "content-encoding": "gzip"})

    served = await serve(Starlette(routes=[Route("/", answer, methods=["POST"])]))
    limits = UpstreamLimits(max_bytes=4 * 1024 * KIB)
    async with AGUIUpstream(served.url + "/", limits=limits) as backend:
        tracemalloc.start()
        try:
            error = await refusal(backend)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    assert (error.code, "max_bytes" in error.message) == ("UPSTREAM_LIMIT", True)
    assert len(bomb) < 512 * KIB
    assert peak < 16 * 1024 * KIB


@pytest.mark.parametrize(
    ("encoding", "wbits"),
    [
        pytest.param("gzip", zlib.MAX_WBITS | 16, id="gzip"),
        pytest.param("deflate", zlib.MAX_WBITS, id="deflate"),
        pytest.param("deflate", -zlib.MAX_WBITS, id="raw-deflate"),
    ],
)
async def test_a_compressed_stream_reads_as_the_plain_one(encoding: str, wbits: int) -> None:
    packer = zlib.compressobj(6, zlib.DEFLATED, wbits)
    body = packer.compress(frame(STARTED) + TEXT_START + content("hello") + frame(FINISHED)) + packer.flush()
    headers = ((b"content-type", b"text/event-stream"), (b"content-encoding", encoding.encode()))
    upstream = Hostile(endless(*(body[i : i + 7] for i in range(0, len(body), 7)), up_to=0), headers)
    async with AGUIUpstream(upstream) as backend:
        assert [item async for item in backend.stream(request())] == [TextDelta("hello", "m")]


async def test_an_encoding_the_adapter_did_not_offer_is_refused() -> None:
    headers = ((b"content-type", b"text/event-stream"), (b"content-encoding", b"br"))
    async with AGUIUpstream(Hostile(endless(b"\x8b\x00", up_to=0), headers)) as backend:
        error = await refusal(backend)

    assert error.code == "UPSTREAM_LIMIT"


@pytest.mark.parametrize("value", [0, -1, float("nan"), True, "10"])
def test_each_limit_must_be_a_positive_number(value: Any) -> None:
    for name in ("max_event_bytes", "max_bytes", "max_events", "event_timeout", "run_timeout"):
        with pytest.raises(ConfigurationError, match=name):
            UpstreamLimits(**{name: value})


async def test_an_upstream_copy_bomb_ends_the_run_before_it_reaches_the_client() -> None:
    bomb = {"type": "STATE_DELTA", "delta": [{"op": "copy", "from": "/a", "path": "/a/-"}] * 21}
    upstream = Hostile(endless(frame(STARTED), frame(bomb), frame(FINISHED), up_to=0))
    adapter = Adapter(AGUIUpstream(upstream), limits=Limits(max_state_bytes=64 * KIB))

    events = await run_events(adapter, run_input("t-bomb", [user("hi")], state={"a": ["tiny"] * 10}))

    assert [each["type"] for each in events if each["type"].startswith("STATE")] == []
    assert events[-1]["type"] == "RUN_ERROR"
    assert events[-1]["code"] == "STATE_PATCH_TOO_LARGE"


@pytest.mark.parametrize("value", [0, -5, True, 1.5])
def test_max_state_bytes_must_be_a_positive_integer(value: Any) -> None:
    with pytest.raises(ConfigurationError, match="max_state_bytes"):
        Adapter(AGUIUpstream(Hostile(endless(up_to=0))), limits=Limits(max_state_bytes=value))


async def test_a_gzip_bomb_as_an_error_body_is_read_only_as_far_as_the_log_needs() -> None:
    bomb = gzip_bomb(64 * 1024 * KIB)
    headers = ((b"content-type", b"text/plain"), (b"content-encoding", b"gzip"))
    upstream = Hostile(endless(bomb, up_to=0), headers, status=500)
    async with AGUIUpstream(upstream) as backend:
        tracemalloc.start()
        try:
            error = await refusal(backend)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    assert (error.code, error.message) == ("UPSTREAM_ERROR", "The upstream agent failed (HTTP 500).")
    assert peak < 8 * 1024 * KIB


@pytest.mark.parametrize("status", [200, 502])
async def test_a_body_that_does_not_decompress_is_an_upstream_error(status: int) -> None:
    headers = ((b"content-type", b"text/event-stream"), (b"content-encoding", b"gzip"))
    async with AGUIUpstream(Hostile(endless(b"not gzip at all", up_to=0), headers, status=status)) as backend:
        error = await refusal(backend)

    assert error.code == "UPSTREAM_ERROR"
    assert ("decompress" in error.message) == (status == 200)
