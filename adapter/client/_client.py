"""The client: posts a `RunAgentInput` to a URL or an in-process ASGI app and reads the run as it streams."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import aclosing, asynccontextmanager
from itertools import islice
from types import TracebackType
from typing import Any, Self, TypeAlias

import httpx
from ag_ui.core import BaseEvent, Interrupt, RunAgentInput
from starlette.routing import Mount
from starlette.types import ASGIApp

from adapter._ids import new_id
from adapter._jsonpatch import PatchError, apply_patch
from adapter.client._asgi import StreamingASGITransport
from adapter.client._errors import ProtocolError, RequestRefused, StreamLimitExceeded
from adapter.client._limits import (
    ACCEPTED_ENCODINGS,
    StreamLimitError,
    StreamLimits,
    UndecodableBody,
    body_pieces,
    read_prefix,
)
from adapter.client._messages import fold_messages
from adapter.client._run import Run, RunReader, wire_input
from adapter.client._sse import paced

Target: TypeAlias = "str | ASGIApp"
"""An AG-UI endpoint URL, or an ASGI app served in-process (its run route at `/`)."""
RunInput: TypeAlias = "RunAgentInput | Mapping[str, Any] | bytes"
"""What `run` posts: the model, its wire JSON, or raw bytes (sent as they are)."""

_IN_PROCESS = "http://agui.invalid/"
_HEADERS = {"content-type": "application/json", "accept": "text/event-stream", "accept-encoding": ACCEPTED_ENCODINGS}
MAX_REFUSAL_BYTES = 1024 * 1024
"""Bytes of an answer that is not an event stream (a 4xx page, JSON) kept in `Run.body`; the rest is not read."""


class AGUIClient:
    """Runs an AG-UI agent: `await client.run(input)` reads a whole run, `client.stream(input)` yields its events.

    Args:
        target: The endpoint's URL, or an ASGI app (served in-process, its response streamed as the app sends
            it): the adapter's sub-app (`create_app(...)`), or a whole app that mounts it, with `path`.
        path: Where the run route is on the target: the mount path of the adapter's sub-app in a whole app
            (`AGUIClient(app, path="/agui")`), or a path appended to the URL. Not given: the app's `/`, the URL
            as it is.
        http: An `httpx.AsyncClient` to send through; its owner closes it. By default the client makes one.
        timeout: Seconds to connect, and between two reads of the body, for the client it makes.
        strict: Raise `ProtocolError` when a stream breaks the protocol, and `RequestRefused` when the server
            answers without a stream. With `strict=False`, `run` returns the `Run` and its `problems` instead.
        limits: What one run's stream may send (`StreamLimits()` by default); past a limit, whatever `strict`
            says, reading stops and `StreamLimitExceeded` is raised with the `Run` read so far.
    """

    def __init__(
        self,
        target: Target,
        *,
        path: str | None = None,
        http: httpx.AsyncClient | None = None,
        timeout: float = 60.0,
        strict: bool = True,
        limits: StreamLimits | None = None,
    ) -> None:
        if path is not None and not path.startswith("/"):
            raise ValueError(f"path must start with '/', as a mount path does: {path!r}")
        self.in_process = not isinstance(target, str)
        self.url = _joined(target if isinstance(target, str) else _IN_PROCESS, path)
        transport = None if isinstance(target, str) else StreamingASGITransport(target)
        self._owns_http = http is None
        self.http = http if http is not None else httpx.AsyncClient(transport=transport, timeout=timeout)
        self._routes = _mount_paths(target)
        self.strict = strict
        self.limits = limits or StreamLimits()

    async def aclose(self) -> None:
        """Close the HTTP client, if this client made it."""
        if self._owns_http:
            await self.http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def run(self, run_input: RunInput) -> Run:
        """POST one input and read the whole answer."""
        async with self._exchange(run_input) as (run, reader, chunks):
            async for chunk in chunks:
                reader.feed(chunk)
            if run.is_stream:
                reader.close()
        self._judge(run)
        return run

    async def stream(self, run_input: RunInput) -> AsyncIterator[BaseEvent]:
        """POST one input and yield its events as they arrive; with `strict`, raise at the first problem."""
        async with self._exchange(run_input) as (run, reader, chunks):
            if not run.is_stream:
                raise RequestRefused(run, self._hint(run))
            async for chunk in chunks:
                for event in self._checked(run, reader.feed(chunk)):
                    yield event
            for event in self._checked(run, reader.close()):
                yield event
        self._judge(run)

    def thread(
        self,
        *,
        tools: Sequence[Mapping[str, Any]] = (),
        thread_id: str | None = None,
        drop_roles: frozenset[str] = frozenset(),
    ) -> Thread:
        """A conversation on a thread (a fresh one by default), kept the way a client keeps it."""
        return Thread(self, thread_id or new_id("thread"), tools=tools, drop_roles=drop_roles)

    @asynccontextmanager
    async def _exchange(self, run_input: RunInput) -> AsyncIterator[tuple[Run, RunReader, AsyncIterator[bytes]]]:
        """The request, and its body read within `limits`; a refusal while reading carries the run read so far."""
        content = run_input if isinstance(run_input, bytes) else json.dumps(wire_input(run_input)).encode()
        body = _decoded(content)
        started = asyncio.get_running_loop().time()
        async with self.http.stream("POST", self.url, content=content, headers=_HEADERS) as response:
            run = Run(body, response.status_code, response.headers)
            reader = RunReader(run, self.limits)
            try:
                if run.is_stream:
                    async with aclosing(paced(body_pieces(response), reader.decoder, started)) as chunks:
                        yield run, reader, chunks
                else:
                    run.chunks.append(await _refusal(response))
                    yield run, reader, _nothing()
            except StreamLimitError as error:
                message = error.told("The server")
                run.stopped = error.limit
                run.problems.append(f"reading stopped: {message}")
                raise StreamLimitExceeded(message, error.limit, run) from error
            except UndecodableBody:  # a broken body, not a limit: judged as any problem is, after the exchange
                run.stopped = "content_encoding"
                run.problems.append("reading stopped: the body does not decompress as its content-encoding says")

    def _checked(self, run: Run, events: list[BaseEvent]) -> list[BaseEvent]:
        if self.strict and (run.problems or run.invalid):
            raise ProtocolError(run.problems + run.invalid, run)
        return events

    def _judge(self, run: Run) -> None:
        if not self.strict:
            return
        if not run.is_stream:
            raise RequestRefused(run, self._hint(run))
        if run.problems or run.invalid:
            raise ProtocolError(run.problems + run.invalid, run)

    def _hint(self, run: Run) -> str:
        """What to do about an answer that says the run route is elsewhere (HTTP 404, 405, a redirect)."""
        where = httpx.URL(self.url).path
        if run.status in (307, 308) and "location" in run.headers:
            moved = httpx.URL(self.url).join(run.headers["location"])
            return f"the server redirects {where!r} to {moved.path!r}, which the client does not follow: post there"
        if run.status not in (404, 405):
            return ""
        if not self.in_process:
            return "check the URL: it is where the adapter's sub-app is mounted, e.g. http://127.0.0.1:8000/agui"
        mounted = f" (this app mounts {', '.join(map(repr, self._routes))})" if self._routes else ""
        return (
            f"nothing serves an AG-UI run at {where!r} of this app: AGUIClient(app) wants the adapter's sub-app "
            f'(create_app(...)), or, for an app that mounts it, its mount path: AGUIClient(app, path="/agui"){mounted}'
        )


def _joined(url: str, path: str | None) -> str:
    return url if path is None else url.rstrip("/") + path


def _mount_paths(target: Target, most: int = 5) -> tuple[str, ...]:
    """The first paths an ASGI app (Starlette's, FastAPI's) mounts other apps at, to name in a hint."""
    routes = getattr(target, "routes", None)
    if isinstance(target, str) or not isinstance(routes, list):
        return ()
    return tuple(islice((route.path for route in routes if isinstance(route, Mount)), most))


async def _refusal(response: httpx.Response) -> bytes:
    """The start of an answer that is not an event stream; one that does not decode reads as empty."""
    try:
        return await read_prefix(response, MAX_REFUSAL_BYTES)
    except (StreamLimitError, UndecodableBody):
        return b""  # the status says enough


async def _nothing() -> AsyncIterator[bytes]:
    return
    yield b""  # pragma: no cover - makes this an async generator


def _decoded(content: bytes) -> dict[str, Any]:
    try:
        body = json.loads(content)
    except (ValueError, RecursionError):  # raw bytes are sent as they are, hostile ones included
        return {}
    return body if isinstance(body, dict) else {}


class Thread:
    """One thread's conversation as a client keeps it: `messages` and `state` follow each finished run."""

    def __init__(
        self,
        client: AGUIClient,
        thread_id: str,
        *,
        tools: Sequence[Mapping[str, Any]] = (),
        drop_roles: frozenset[str] = frozenset(),
    ) -> None:
        self.client = client
        self.id = thread_id
        self.tools = [dict(tool) for tool in tools]
        self.messages: list[dict[str, Any]] = []
        self.state: Any = {}
        self.runs: list[Run] = []
        self.drop_roles = drop_roles

    @property
    def last(self) -> Run | None:
        """The latest run."""
        return self.runs[-1] if self.runs else None

    @property
    def interrupts(self) -> list[Interrupt]:
        """The interrupts the latest run left open."""
        return self.last.interrupts if self.last else []

    @property
    def pending_tool_call_ids(self) -> list[str]:
        """The client-tool calls the latest run left for the client to answer with a ToolMessage."""
        return (self.last.pending_tool_call_ids or []) if self.last else []

    def input(self, *, resume: Sequence[Mapping[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
        """The next `RunAgentInput` as wire JSON, with a fresh run id; `extra` sets or overrides members."""
        body: dict[str, Any] = {
            "threadId": self.id,
            "runId": new_id("run"),
            "messages": [dict(message) for message in self.messages],
            "tools": [dict(tool) for tool in self.tools],
            "context": [],
            "state": self.state,
            "forwardedProps": {},
            "protocolVersion": "1.0",
        }
        if resume is not None:
            body["resume"] = [dict(entry) for entry in resume]
        body.update(extra)
        return body

    async def say(self, text: str, **extra: Any) -> Run:
        """Send a new user message."""
        self.messages.append({"id": new_id("user"), "role": "user", "content": text})
        return await self.send(self.input(**extra))

    async def resume(self, *entries: Mapping[str, Any], **extra: Any) -> Run:
        """Answer interrupts with resume entries (`resolved`, `approved`, `denied`, `cancelled`)."""
        return await self.send(self.input(resume=entries, **extra))

    async def answer(self, tool_call_id: str, content: Any, *, error: str | None = None, **extra: Any) -> Run:
        """Answer a pending client-tool call with a ToolMessage; content that is not a string is sent as JSON."""
        text = content if isinstance(content, str) else json.dumps(content)
        message = {"id": new_id("tool"), "role": "tool", "toolCallId": tool_call_id, "content": text}
        if error is not None:
            message["error"] = error
        self.messages.append(message)
        return await self.send(self.input(**extra))

    async def send(self, body: RunInput) -> Run:
        """POST `body`; a run that finishes moves the conversation and the state on."""
        run = await self.client.run(body)
        self.runs.append(run)
        if run.outcome is not None:
            self.messages = fold_messages(self.messages, run.wire, drop_roles=self.drop_roles)
            self.state = _state(self.state, run.wire)
        return run


def _state(state: Any, events: Sequence[Mapping[str, Any]]) -> Any:
    for event in events:
        if event.get("type") == "STATE_SNAPSHOT":
            state = event.get("snapshot")
        elif event.get("type") == "STATE_DELTA":
            try:
                state = apply_patch(state, event.get("delta") or [])
            except PatchError:
                continue  # a delta that does not apply leaves the state as it was
    return state
