"""What the tests of wrapped AG-UI frameworks share: a switchable, recording link to the upstream."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections import Counter
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from externals import framework_python, missing_framework

from adapter.client import SSEDecoder


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
    decoder: SSEDecoder = field(default_factory=SSEDecoder)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self.stream:
            for frame in self.decoder.feed(chunk):
                if frame.text is not None:
                    self.exchange.events.append(json.loads(frame.text))
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


SERVERS = Path(__file__).parent


@dataclass
class UpstreamServer:
    """A framework's agent server process (`<name>_server.py` in its own virtualenv), started once for the session."""

    process: subprocess.Popen[str]
    url: str

    @classmethod
    def start(cls, name: str = "strands", *, ready_within: float = 300) -> UpstreamServer:
        problem = missing_framework(name)
        if problem is not None:
            raise RuntimeError(problem)
        script = SERVERS / f"{name}_server.py"
        process = subprocess.Popen([str(framework_python(name)), str(script)], stdout=subprocess.PIPE, text=True,
                                   env=_clean_env())  # fmt: skip
        assert process.stdout is not None
        ready = threading.Event()
        port: list[int] = []

        def read() -> None:
            assert process.stdout is not None
            for line in process.stdout:
                if line.startswith("PORT "):
                    port.append(int(line.split()[1]))
                    ready.set()
            ready.set()

        threading.Thread(target=read, daemon=True).start()
        if not ready.wait(ready_within) or not port:
            process.kill()
            raise RuntimeError(f"the {name} server did not start (exit code {process.poll()})")
        return cls(process, f"http://127.0.0.1:{port[0]}/")

    def deleted(self) -> list[str]:
        deleted: list[str] = httpx.get(f"{self.url}deleted").json()
        return deleted

    def clear(self) -> None:
        httpx.post(f"{self.url}deleted").raise_for_status()

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


StrandsServer = UpstreamServer
"""The name the Strands tests knew it by."""


def _clean_env() -> dict[str, str]:
    """Our environment without what points into our virtualenv, so the framework's one stands alone."""
    return {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
