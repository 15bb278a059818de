"""What the tests of wrapped AG-UI frameworks share: a switchable, recording link to the upstream."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx


@dataclass
class Exchange:
    """One request we sent the upstream, and the events it answered with."""

    body: dict[str, Any]
    events: list[dict[str, Any]] = field(default_factory=list)

    def snapshots(self) -> list[list[dict[str, Any]]]:
        """The message lists of the upstream's MESSAGES_SNAPSHOT events."""
        return [event["messages"] for event in self.events if event["type"] == "MESSAGES_SNAPSHOT"]


@dataclass
class _Tee(httpx.AsyncByteStream):
    stream: httpx.AsyncByteStream
    exchange: Exchange
    buffer: bytes = b""

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.stream:
            self.buffer += chunk
            *frames, self.buffer = self.buffer.split(b"\n\n")
            for frame in frames:
                for line in frame.decode().splitlines():
                    if line.startswith("data:"):
                        self.exchange.events.append(json.loads(line[5:]))
            yield chunk

    async def aclose(self) -> None:
        await self.stream.aclose()


class Link(httpx.AsyncBaseTransport):
    """The way to the upstream: records every exchange, and refuses to connect while `down`."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner
        self.down = False
        self.exchanges: list[Exchange] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self.down:
            raise httpx.ConnectError("connection refused")
        exchange = Exchange(json.loads(await request.aread()))
        self.exchanges.append(exchange)
        response = await self.inner.handle_async_request(request)
        assert isinstance(response.stream, httpx.AsyncByteStream)
        return httpx.Response(response.status_code, headers=response.headers, stream=_Tee(response.stream, exchange))

    async def aclose(self) -> None:
        await self.inner.aclose()


def tool_call_problems(messages: Iterable[Mapping[str, Any]], *, waiting: Iterable[str] = ()) -> list[str]:
    """What breaks the rule a provider enforces: every tool call made once and answered once.

    `waiting` names calls an interrupt holds open: they may be unanswered, never answered twice.
    """
    messages = list(messages)
    calls = Counter(c["id"] for m in messages if m["role"] == "assistant" for c in m.get("toolCalls") or [])
    answers = Counter(m["toolCallId"] for m in messages if m["role"] == "tool")
    allowed_unanswered = set(waiting)
    problems = [f"{call} is called {count} times" for call, count in calls.items() if count != 1]
    for call in calls:
        if answers[call] > 1 or (answers[call] == 0 and call not in allowed_unanswered):
            problems.append(f"{call} is answered {answers[call]} times")
    problems += [f"{call} is answered but never called" for call in answers if call not in calls]
    return problems
