"""Every reader of a remote stream, against the same hostile stream shapes: each stops within its limits.

The readers: `AGUIClient` (over HTTP and in-process), the conformance kit's client, `OpenAIChatBackend` and
`AGUIUpstream` (over HTTP and in-process). The shapes: endless events, one endless line, one endless event
of many data lines, endless keep-alive comments, and a gzip bomb. Each is counted in work units as the reader
pulls it: the bytes it took from the server, the bytes it inflated, and the largest piece it inflated at once.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from adapter.backends import AGUIUpstream, BackendError, ModelRequest, OpenAIChatBackend, UpstreamLimits
from adapter.client import AGUIClient, ProtocolError, StreamLimitExceeded, StreamLimits
from adapter.client import _limits as limits_module
from adapter.conformance._client import Client as KitClient  # on purpose: the kit's reader, held to the same shapes

if TYPE_CHECKING:
    from conftest import Serve

KIB = 1024
Message = MutableMapping[str, Any]
AGUI_PRELUDE = (
    b'data: {"type": "RUN_STARTED", "threadId": "t", "runId": "r"}\n\n'
    b'data: {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"}\n\n'
)
RUN_INPUT = {"threadId": "t", "runId": "r", "messages": [], "tools": [], "context": [], "state": {}}
RUN_INPUT |= {"forwardedProps": {}}


def agui_event(size: int) -> bytes:
    event = {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "x" * size}
    return f"data: {json.dumps(event)}\n\n".encode()


def chat_event(size: int) -> bytes:
    chunk = {"choices": [{"index": 0, "delta": {"content": "x" * size}}]}
    return f"data: {json.dumps(chunk)}\n\n".encode()


def gzip_bomb(decoded: int) -> bytes:
    """A gzip body of `decoded` bytes of keep-alive comments, about a thousandth of that size."""
    packer = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    block = b": keep-alive\n\n" * 4096
    return b"".join(packer.compress(block) for _ in range(decoded // len(block) + 1)) + packer.flush()


BOMB = gzip_bomb(16 * 1024 * KIB)


@dataclass(frozen=True)
class Shape:
    """A hostile body: what it starts with, what it repeats (`times` at most, so that a missing limit fails)."""

    name: str
    first: bytes
    then: bytes
    limits: frozenset[str]
    """The limits it may be stopped at."""
    times: int = 100_000
    gzip: bool = False


@dataclass(frozen=True)
class Reader:
    """One reader of remote streams: how it speaks (AG-UI or chat completions) and how it is driven."""

    name: str
    agui: bool
    read: Callable[[Source, StreamLimits], Awaitable[str]]
    """Reads the source until the reader refuses it; returns the limit its error names."""
    buffered: int = 0
    """Chunks a transport may hold ahead of the reader (the in-process ones)."""


@dataclass
class Source:
    """A server sending one shape in chunks of `chunk` bytes, counting what the reader pulled."""

    shape: Shape
    chunk: int
    pulled: int = 0
    chunks: int = 0

    @property
    def headers(self) -> list[tuple[bytes, bytes]]:
        headers = [(b"content-type", b"text/event-stream")]
        return headers + ([(b"content-encoding", b"gzip")] if self.shape.gzip else [])

    def pieces(self) -> Iterator[bytes]:
        if self.shape.gzip:
            for start in range(0, len(BOMB), self.chunk):
                yield BOMB[start : start + self.chunk]
            return
        pending = self.shape.first
        for _ in range(self.shape.times):
            pending += self.shape.then
            while len(pending) >= self.chunk:
                yield pending[: self.chunk]
                pending = pending[self.chunk :]

    async def body(self) -> AsyncIterator[bytes]:
        for piece in self.pieces():
            self.pulled += len(piece)
            self.chunks += 1
            yield piece

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(lambda request: httpx.Response(200, headers=self.headers, content=self.body()))

    async def app(self, scope: Message, receive: Callable[[], Awaitable[Message]], send: Callable[..., Any]) -> None:
        """The same body from an ASGI app: it stops sending once the reader goes away."""
        await receive()
        gone = asyncio.ensure_future(receive())
        await send({"type": "http.response.start", "status": 200, "headers": self.headers})
        async for piece in self.body():
            if gone.done():
                return
            await send({"type": "http.response.body", "body": piece, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        gone.cancel()


def named_limit(message: str) -> str:
    return message.rpartition("(")[2].rstrip(").")


async def by_client(source: Source, limits: StreamLimits) -> str:
    async with httpx.AsyncClient(transport=source.transport()) as http:
        client = AGUIClient("http://agent.test/", http=http, limits=limits)
        with pytest.raises(StreamLimitExceeded) as refused:
            await client.run(RUN_INPUT)
    assert refused.value.run.problems[-1].startswith("reading stopped: The server ")
    return refused.value.limit


async def by_client_in_process(source: Source, limits: StreamLimits) -> str:
    async with AGUIClient(source.app, limits=limits) as client:
        with pytest.raises(StreamLimitExceeded) as refused:
            await client.run(RUN_INPUT)
    return refused.value.limit


async def by_kit(source: Source, limits: StreamLimits) -> str:
    async with KitClient(source.app, limits=limits) as client:
        with pytest.raises(StreamLimitExceeded) as refused:
            await client.post(RUN_INPUT)
    assert [exchange.reply for exchange in client.exchanges] == [refused.value.run], "the exchange is kept"
    return refused.value.limit


def request() -> ModelRequest:
    return ModelRequest(messages=[], tools=[], thread_id="t", run_id="r")


async def failure(backend: OpenAIChatBackend | AGUIUpstream) -> str:
    with pytest.raises(BackendError) as refused:
        async for _ in backend.stream(request()):
            pass
    assert refused.value.code == "UPSTREAM_LIMIT", refused.value.message
    return named_limit(refused.value.message)


def upstream_limits(limits: StreamLimits) -> UpstreamLimits:
    return UpstreamLimits(**dataclasses.asdict(limits))


async def by_openai(source: Source, limits: StreamLimits) -> str:
    async with httpx.AsyncClient(transport=source.transport()) as http:
        backend = OpenAIChatBackend(
            "http://model.test/v1", "m", api_key="", client=http, max_retries=0, limits=upstream_limits(limits)
        )
        return await failure(backend)


async def by_upstream(source: Source, limits: StreamLimits) -> str:
    async with httpx.AsyncClient(transport=source.transport()) as http:
        return await failure(AGUIUpstream("http://agent.test/", client=http, limits=upstream_limits(limits)))


async def by_upstream_in_process(source: Source, limits: StreamLimits) -> str:
    async with AGUIUpstream(source.app, limits=upstream_limits(limits)) as backend:
        return await failure(backend)


_IN_PROCESS_BUFFER = 66  # StreamingASGITransport's queue (64), and the two chunks in hand
READERS = [
    Reader("client", True, by_client),
    Reader("client-in-process", True, by_client_in_process, _IN_PROCESS_BUFFER),
    Reader("kit", True, by_kit, _IN_PROCESS_BUFFER),
    Reader("openai", False, by_openai),
    Reader("upstream", True, by_upstream),
    Reader("upstream-in-process", True, by_upstream_in_process, _IN_PROCESS_BUFFER),
]


def shapes(reader: Reader) -> st.SearchStrategy[Shape]:
    prelude = AGUI_PRELUDE if reader.agui else b""
    event = agui_event if reader.agui else chat_event
    sizes = st.integers(min_value=1, max_value=2 * KIB)
    return st.one_of(
        sizes.map(lambda n: Shape("events", prelude, event(n), frozenset({"max_bytes", "max_events"}))),
        st.just(Shape("line", b"data: ", b"x" * KIB, frozenset({"max_event_bytes"}))),
        st.just(Shape("event-lines", prelude, b'data: "xxxxxxxxxxxxxxxx"\n', frozenset({"max_event_bytes"}))),
        st.just(Shape("keep-alives", prelude, b": keep-alive\n\n", frozenset({"max_bytes", "max_events"}))),
        st.just(Shape("gzip-bomb", b"", b"", frozenset({"max_bytes", "max_events"}), gzip=True)),
    )


@dataclass
class Inflated:
    """Counts what the readers inflate: the bytes in all, and the largest piece held at once."""

    total: int = 0
    largest: int = 0


@contextmanager
def counted_inflation() -> Iterator[Inflated]:
    """Counts, while the block runs, every piece any reader inflates."""
    counter = Inflated()
    original = limits_module._Inflate.pieces

    def pieces(inflate: Any, data: bytes) -> Iterator[bytes]:
        for piece in original(inflate, data):
            counter.total += len(piece)
            counter.largest = max(counter.largest, len(piece))
            yield piece

    setattr(limits_module._Inflate, "pieces", pieces)  # noqa: B010 - a method the test stands in for
    try:
        yield counter
    finally:
        setattr(limits_module._Inflate, "pieces", original)  # noqa: B010


@pytest.fixture
def inflated() -> Iterator[Inflated]:
    with counted_inflation() as counter:
        yield counter


@dataclass
class Bounds:
    """The limits one example reads within, small enough for a hundred examples."""

    max_event_bytes: int
    max_bytes: int
    max_events: int
    extra: dict[str, float] = field(default_factory=dict)

    @property
    def limits(self) -> StreamLimits:
        return StreamLimits(self.max_event_bytes, self.max_bytes, self.max_events, **self.extra)


BOUNDS = st.builds(
    Bounds,
    max_event_bytes=st.integers(min_value=4 * KIB, max_value=16 * KIB),
    max_bytes=st.integers(min_value=32 * KIB, max_value=128 * KIB),
    max_events=st.integers(min_value=8, max_value=400),
)


@pytest.mark.parametrize("reader", READERS, ids=lambda reader: reader.name)
@given(data=st.data(), bounds=BOUNDS, chunk=st.integers(min_value=256, max_value=8 * KIB))
async def test_every_reader_stops_every_hostile_shape_within_its_limits(
    reader: Reader, data: st.DataObject, bounds: Bounds, chunk: int
) -> None:
    shape = data.draw(shapes(reader), label="shape")
    source = Source(shape, chunk)

    with counted_inflation() as counter:
        limit = await reader.read(source, bounds.limits)

    assert limit in shape.limits, (shape.name, limit)
    held = (reader.buffered + 1) * chunk
    if shape.gzip:
        assert counter.total <= bounds.max_bytes + limits_module.PIECE
        assert counter.largest <= limits_module.PIECE
    else:
        assert source.pulled <= bounds.max_bytes + len(shape.first) + held


@pytest.mark.parametrize("reader", READERS, ids=lambda reader: reader.name)
async def test_a_server_that_goes_silent_is_cut_at_event_timeout(reader: Reader) -> None:
    source = Silent(Shape("silent", AGUI_PRELUDE if reader.agui else chat_event(1), b"", frozenset()), 1 << 20)

    limit = await reader.read(source, StreamLimits(event_timeout=0.05))

    assert limit == "event_timeout"


@pytest.mark.parametrize("reader", READERS, ids=lambda reader: reader.name)
async def test_keep_alives_do_not_hold_a_stream_open_past_event_timeout(reader: Reader) -> None:
    prelude = AGUI_PRELUDE if reader.agui else chat_event(1)
    source = Trickle(Shape("keep-alives", prelude, b": keep-alive\n\n", frozenset()), 1)

    limit = await reader.read(source, StreamLimits(event_timeout=0.1, max_events=1_000_000))

    assert limit == "event_timeout"
    assert source.chunks > 2, "comments kept coming: the stream was cut for want of events, not of bytes"


@pytest.mark.parametrize("reader", READERS, ids=lambda reader: reader.name)
async def test_events_that_keep_coming_stop_at_run_timeout(reader: Reader) -> None:
    event = agui_event(1) if reader.agui else chat_event(1)
    source = Trickle(Shape("events", AGUI_PRELUDE if reader.agui else b"", event, frozenset()), len(event))

    limit = await reader.read(source, StreamLimits(run_timeout=0.1, max_events=1_000_000))

    assert limit == "run_timeout"


class Silent(Source):
    """Sends its first bytes, then nothing, and never ends."""

    async def body(self) -> AsyncIterator[bytes]:
        yield self.shape.first
        await asyncio.Event().wait()


class Trickle(Source):
    """Sends its first bytes, then `then` again and again, letting the loop turn between two."""

    async def body(self) -> AsyncIterator[bytes]:
        yield self.shape.first
        for _ in range(self.shape.times):
            self.chunks += 1
            yield self.shape.then
            await asyncio.sleep(0.001)


async def test_an_agui_client_reading_a_gzip_bomb_over_http_inflates_at_most_max_bytes(
    serve: Serve, inflated: Inflated
) -> None:
    async def answer(request: Request) -> Response:
        await request.body()
        return Response(BOMB, headers={"content-type": "text/event-stream", "content-encoding": "gzip"})

    served = await serve(Starlette(routes=[Route("/", answer, methods=["POST"])]))
    async with AGUIClient(served.url + "/", limits=StreamLimits(max_bytes=256 * KIB, max_events=10**6)) as client:
        with pytest.raises(StreamLimitExceeded) as refused:
            await client.run(RUN_INPUT)

    assert refused.value.limit == "max_bytes"
    assert inflated.total <= 256 * KIB + limits_module.PIECE
    assert inflated.largest <= limits_module.PIECE
    assert len(refused.value.run.body) <= 256 * KIB


async def test_a_model_server_sending_a_gzip_bomb_over_http_is_cut_at_max_bytes(
    serve: Serve, inflated: Inflated
) -> None:
    async def answer(request: Request) -> Response:
        await request.body()
        return Response(BOMB, headers={"content-type": "text/event-stream", "content-encoding": "gzip"})

    served = await serve(Starlette(routes=[Route("/v1/chat/completions", answer, methods=["POST"])]))
    limits = UpstreamLimits(max_bytes=256 * KIB, max_events=10**6)
    async with OpenAIChatBackend(served.url + "/v1", "m", api_key="", limits=limits) as backend:
        assert await failure(backend) == "max_bytes"

    assert inflated.total <= 256 * KIB + limits_module.PIECE
    assert inflated.largest <= limits_module.PIECE


@pytest.mark.parametrize("encoding", ["br", "zstd", "gzip, br"])
async def test_an_encoding_that_was_not_offered_is_refused_before_it_is_read(encoding: str) -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        assert request.headers["accept-encoding"] == "gzip, deflate"
        headers = {"content-type": "text/event-stream", "content-encoding": encoding}
        return httpx.Response(200, headers=headers, content=source.body())

    source = Source(Shape("compressed", b"\x8b\x00", b"\x00", frozenset(), times=1024), 2)

    async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as http:
        client = AGUIClient("http://agent.test/", http=http)
        with pytest.raises(StreamLimitExceeded) as refused:
            await client.run(RUN_INPUT)
        backend = OpenAIChatBackend("http://model.test/v1", "m", api_key="", client=http, max_retries=0)
        assert await failure(backend) == "content_encoding"

    assert refused.value.limit == "content_encoding"
    assert source.pulled == 0


@pytest.mark.parametrize("strict", [True, False])
async def test_a_body_that_does_not_decompress_stops_the_read_as_a_problem(strict: bool) -> None:
    source = Source(Shape("broken", AGUI_PRELUDE, b"not gzip at all", frozenset()), 64)
    headers = {"content-type": "text/event-stream", "content-encoding": "gzip"}
    transport = httpx.MockTransport(lambda request: httpx.Response(200, headers=headers, content=source.body()))

    async with httpx.AsyncClient(transport=transport) as http:
        client = AGUIClient("http://agent.test/", http=http, strict=strict)
        if strict:
            with pytest.raises(ProtocolError) as refused:
                await client.run(RUN_INPUT)
            run = refused.value.run
        else:
            run = await client.run(RUN_INPUT)

    assert run.stopped == "content_encoding"
    assert "does not decompress" in run.problems[-1]
    assert source.chunks == 1


async def test_an_endless_refusal_body_is_kept_only_up_to_its_bound() -> None:
    source = Source(Shape("page", b"<html>", b"x" * KIB, frozenset()), 4 * KIB)

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(500, headers={"content-type": "text/html"}, content=source.body())

    async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as http:
        run = await AGUIClient("http://agent.test/", http=http, strict=False).run(RUN_INPUT)

    assert run.status == 500
    assert len(run.body) == 1024 * KIB
    assert source.pulled <= 1024 * KIB + 4 * KIB


def test_the_backends_limits_are_the_clients_kind_with_the_same_defaults() -> None:
    assert issubclass(UpstreamLimits, StreamLimits)
    assert dataclasses.asdict(UpstreamLimits()) == dataclasses.asdict(StreamLimits())
