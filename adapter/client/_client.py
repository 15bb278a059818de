"""The client: posts a `RunAgentInput` to a URL or an in-process ASGI app and reads the run as it streams.

It also reattaches to a run (its events route, `_reattach`) and asks the thread routes (`_threads`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from contextlib import aclosing, asynccontextmanager
from dataclasses import dataclass
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
from adapter.client._enforce import known_operations
from adapter.client._errors import ProtocolError, RequestRefused, StreamLimitExceeded
from adapter.client._limits import ACCEPTED_ENCODINGS, StreamLimitError, StreamLimits, UndecodableBody, read_prefix
from adapter.client._messages import fold_messages
from adapter.client._reattach import MAX_REATTACHES, Reattach, events_request, events_url, pieces
from adapter.client._run import Run, RunReader, wire_input
from adapter.client._threads import ThreadRoutes

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
            says, reading stops and `StreamLimitExceeded` is raised with the `Run` read so far. They hold for the
            whole read of a run, over every connection a reattach makes.
        reattach: Take up a run's POST stream that drops before the run's end (a reset, a read timeout, a silence
            past `event_timeout`) from the run's events route, after the last event id read: the run reads as one
            stream, each event once. Without it, such a drop raises `StreamDropped`, whose `run.last_event_id` is
            where `reattach(thread_id, run_id, after=...)` goes on from.
        max_reattaches: Reattaches in a row that may bring no new event (the first at once, then after a pause of
            0.1 s doubling to 2 s: the default 8 ride out some 7 s of a server that cannot answer) before a dropped
            stream is given up; for `reattach`, `follow` and, with `reattach`, `run` and `stream`.
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
        reattach: bool = False,
        max_reattaches: int = MAX_REATTACHES,
    ) -> None:
        if path is not None and not path.startswith("/"):
            raise ValueError(f"path must start with '/', as a mount path does: {path!r}")
        if isinstance(max_reattaches, bool) or not isinstance(max_reattaches, int) or max_reattaches < 0:
            raise ValueError(f"max_reattaches must be a whole number from 0, not {max_reattaches!r}")
        self.in_process = not isinstance(target, str)
        self.url = _joined(target if isinstance(target, str) else _IN_PROCESS, path)
        transport = None if isinstance(target, str) else StreamingASGITransport(target)
        self._owns_http = http is None
        self.http = http if http is not None else httpx.AsyncClient(transport=transport, timeout=timeout)
        self._routes = _mount_paths(target)
        self.strict = strict
        self.limits = limits or StreamLimits()
        self.max_reattaches = max_reattaches
        self._reattach_dropped = reattach
        self._threads = ThreadRoutes(self.http, self.url, self.limits.max_bytes)

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
        return await self._whole(self._posting(run_input))

    async def stream(self, run_input: RunInput) -> AsyncIterator[BaseEvent]:
        """POST one input and yield its events as they arrive; with `strict`, raise at the first problem."""
        async with aclosing(self._events(self._posting(run_input))) as events:
            async for event in events:
                yield event

    async def reattach(self, thread_id: str, run_id: str, *, after: int | str | None = None) -> Run:
        """Read a run from its events route: its events after the id `after` (all without), to its end.

        Where the run is live, the read follows it as it streams. A connection that drops before the run's end is
        reattached from the last event id read (`max_reattaches`): the `Run` holds each event once, in order.
        A run that ended with nothing after `after` answers 204: the `Run` has that status and no event.
        """
        return await self._whole(self._reattaching(thread_id, run_id, after))

    async def follow(self, thread_id: str, run_id: str, *, after: int | str | None = None) -> AsyncIterator[BaseEvent]:
        """`reattach`, yielding each event as it arrives; with `strict`, raise at the first problem."""
        async with aclosing(self._events(self._reattaching(thread_id, run_id, after))) as events:
            async for event in events:
                yield event

    async def threads(self, *, before: str | None = None, limit: int | None = None) -> dict[str, Any]:
        """One page of the caller's threads, newest first: `{"threads": [...], "next"}` (`GET /threads`).

        Each thread is `{"threadId", "title", "updatedAt", "interrupts"}`; `next`, the `before` of the page after
        (None at the end). `limit`: 1 to 100 (the server's default: 20).
        """
        return await self._threads.page(before=before, limit=limit)

    def all_threads(self, *, limit: int | None = None) -> AsyncIterator[dict[str, Any]]:
        """Every thread of the caller, newest first, read a page of `limit` at a time."""
        return self._threads.every(limit=limit)

    async def rename_thread(self, thread_id: str, title: str | None) -> None:
        """Set a thread's title (`PATCH /threads/{threadId}`); None clears it."""
        await self._threads.rename(thread_id, title)

    async def delete_thread(self, thread_id: str) -> None:
        """Delete a thread, its messages, its open turn and its runs' journals (`DELETE /threads/{threadId}`)."""
        await self._threads.delete(thread_id)

    async def revoke_grant(self, thread_id: str, tool: str) -> None:
        """Revoke a thread's grant of `tool` (`DELETE /threads/{threadId}/grants/{tool}`): its next call asks again.

        Raises:
            RequestRefused: 403 `APPROVAL_FORBIDDEN` for a caller who may read the thread but not approve on it,
                404 `THREAD_NOT_FOUND` for an unknown thread (or one the caller may not see).
        """
        await self._threads.revoke_grant(thread_id, tool)

    async def stop(self, thread_id: str, run_id: str) -> bool:
        """Ask a run to stop, on whichever replica runs it: True once asked, False when it had already ended.

        The run ends with RUN_FINISHED and the outcome `{"type": "cancelled"}` at its next safe point.
        """
        return await self._threads.stop(thread_id, run_id)

    def thread(
        self,
        *,
        tools: Sequence[Mapping[str, Any]] = (),
        thread_id: str | None = None,
        drop_roles: frozenset[str] = frozenset(),
    ) -> Thread:
        """A conversation on a thread (a fresh one by default), kept the way a client keeps it."""
        return Thread(self, thread_id or new_id("thread"), tools=tools, drop_roles=drop_roles)

    def _posting(self, run_input: RunInput) -> _Ask:
        content = run_input if isinstance(run_input, bytes) else json.dumps(wire_input(run_input)).encode()
        run = Run(_decoded(content))
        request = self.http.build_request("POST", self.url, content=content, headers=_HEADERS)
        thread_id, run_id = run.input.get("threadId"), run.input.get("runId")
        again = None
        if self._reattach_dropped and isinstance(thread_id, str) and isinstance(run_id, str):
            again = Reattach(self.http, events_url(self.url, thread_id, run_id), self.max_reattaches)
        return _Ask(request, run, again)

    def _reattaching(self, thread_id: str, run_id: str, after: int | str | None) -> _Ask:
        position = None if after is None else str(after)
        run = Run({"threadId": thread_id, "runId": run_id}, last_event_id=position)
        url = events_url(self.url, thread_id, run_id)
        request = events_request(self.http, url, position)
        return _Ask(request, run, Reattach(self.http, url, self.max_reattaches), joined=position not in (None, "0"))

    async def _whole(self, ask: _Ask) -> Run:
        async with self._exchange(ask) as (reader, chunks):
            async for chunk in chunks:
                reader.feed(chunk)
            if ask.run.is_stream:
                reader.close()
        self._judge(ask)
        return ask.run

    async def _events(self, ask: _Ask) -> AsyncGenerator[BaseEvent, None]:
        run = ask.run
        async with self._exchange(ask) as (reader, chunks):
            if not run.is_stream:
                if ask.nothing_after:
                    return
                raise RequestRefused(run, self._hint(ask))
            async for chunk in chunks:
                for event in self._checked(run, reader.feed(chunk)):
                    yield event
            for event in self._checked(run, reader.close()):
                yield event
        self._judge(ask)

    @asynccontextmanager
    async def _exchange(self, ask: _Ask) -> AsyncIterator[tuple[RunReader, AsyncIterator[bytes]]]:
        """The request, and its body read within `limits`; a refusal while reading carries the run read so far."""
        run = ask.run
        started = asyncio.get_running_loop().time()
        response = await self.http.send(ask.request, stream=True)
        try:
            run.status, run.headers = response.status_code, response.headers
            reader = RunReader(run, self.limits, joined=ask.joined, numbered=ask.again is not None)
            try:
                if run.is_stream:
                    async with aclosing(pieces(response, reader, started, ask.again)) as chunks:
                        yield reader, chunks
                else:
                    run.chunks.append(await _refusal(response))
                    yield reader, _nothing()
            except StreamLimitError as error:
                message = error.told("The server")
                run.stopped = error.limit
                run.problems.append(f"reading stopped: {message}")
                raise StreamLimitExceeded(message, error.limit, run) from error
            except UndecodableBody:  # a broken body, not a limit: judged as any problem is, after the exchange
                run.stopped = "content_encoding"
                run.problems.append("reading stopped: the body does not decompress as its content-encoding says")
        finally:
            await response.aclose()

    def _checked(self, run: Run, events: list[BaseEvent]) -> list[BaseEvent]:
        if self.strict and (run.problems or run.invalid):
            raise ProtocolError(run.problems + run.invalid, run)
        return events

    def _judge(self, ask: _Ask) -> None:
        run = ask.run
        if not self.strict or ask.nothing_after:
            return
        if not run.is_stream:
            raise RequestRefused(run, self._hint(ask))
        if run.problems or run.invalid:
            raise ProtocolError(run.problems + run.invalid, run)

    def _hint(self, ask: _Ask) -> str:
        """What to do about an answer that says the run route is elsewhere (HTTP 404, 405, a redirect)."""
        run = ask.run
        if ask.request.method != "POST":
            return ""  # the events route's 404 is the run's (RUN_NOT_FOUND), not a wrong path
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


@dataclass(frozen=True, slots=True)
class _Ask:
    """One request for a run's stream (a POST of its input, or a reattach's GET), and the `Run` it fills.

    `again`: where the stream is read again if it drops (None: nowhere); `joined`: it starts after an event id.
    """

    request: httpx.Request
    run: Run
    again: Reattach | None
    joined: bool = False

    @property
    def nothing_after(self) -> bool:
        """The events route's 204: the run ended, and nothing is after the id asked after."""
        return self.request.method == "GET" and self.run.status == 204


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
        if run.outcome is not None or (run.finished is not None and run.error is not None):
            # a late RUN_ERROR fails the run, and what it delivered before stays delivered (AG-UI 1.0 and 1.1)
            handed = run.handed()  # what the processing model left of each event
            self.messages = fold_messages(self.messages, handed, drop_roles=self.drop_roles)
            self.state = _state(self.state, run, handed)
        return run


def _state(state: Any, run: Run, events: Sequence[Mapping[str, Any]]) -> Any:
    """The state after the run's STATE_SNAPSHOTs and STATE_DELTAs; a delta that does not apply changes nothing."""
    for index, event in enumerate(events):
        if event.get("type") == "STATE_SNAPSHOT":
            state = event.get("snapshot")
        elif event.get("type") == "STATE_DELTA":
            delta, _ = known_operations(event.get("delta") or [])  # the reader said what it left out
            try:
                state = apply_patch(state, delta)
            except PatchError as error:  # applied whole or not at all (AG-UI 1.1, snapshots), and said
                run.warnings.append(f"event {index} (STATE_DELTA): Failed to apply state patch: {error}")
    return state
