"""`AGUIUpstream`: an agent that already speaks AG-UI (LangGraph, Pydantic AI, CrewAI ...), wrapped.

Each step is one upstream run. The upstream gets the conversation and every tool of the request as
client tools: it calls them and ends its run leaving them pending, and the engine then runs the
server tools or suspends on the client ones. Its answer comes back as a ToolMessage in the next
upstream run's `messages`. The upstream's own tools run upstream; their calls and results are recorded.
How its events become items is described in `_upstream_events`.

    HTTP status other than 2xx, a body that is not an event stream,
    a broken connection, a timeout, an invalid event, no terminal event,
    the upstream's RUN_ERROR or a cancelled outcome                        -> UPSTREAM_ERROR
    a line, an event or the body too large, too many events, no event for
    `event_timeout`, a run longer than `run_timeout` (`UpstreamLimits`)    -> UPSTREAM_LIMIT
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping, Sequence

import httpx
from ag_ui.core import PROTOCOL_VERSION, AssistantMessage, Message, RunAgentInput, ToolMessage, UserMessage

from adapter._errors import ConfigurationError
from adapter._ids import new_id
from adapter.backends._http_client import DEFAULT, ClientOwner, UseDefault, http_url, media_type
from adapter.backends._openai_errors import MAX_ERROR_BODY, Redactor
from adapter.backends._seam import BackendItem, ModelRequest
from adapter.backends._upstream_events import EventReader, content_text, upstream_error
from adapter.backends._upstream_limits import UpstreamLimits, read_data
from adapter.backends._upstream_read import read_items
from adapter.client._asgi import ASGIApp, StreamingASGITransport
from adapter.client._limits import ACCEPTED_ENCODINGS, StreamLimitError, UndecodableBody, read_prefix

log = logging.getLogger("adapter.backends.upstream")

_APP_URL = "http://upstream/"


class AGUIUpstream(ClientOwner):
    """A backend that forwards each step to an AG-UI agent and streams its events back.

    Args:
        target: The agent's run endpoint, e.g. "https://agents.internal/support", or an ASGI app in this
            process (run at its root path, `/`; its response streams as it is sent).
        client: An `httpx.AsyncClient` the caller owns and closes; only with a URL target. Not given: the
            backend makes one and closes it in `aclose()`.
        headers: Extra headers for every request (credentials for the upstream); their values are redacted
            from error messages.
        timeout: Per-request timeout. Not given: the client's own, or `DEFAULT_TIMEOUT` for an owned one.
        limits: What one upstream run may send (sizes, event count, time without events, whole-run time);
            past a limit the step fails with `UPSTREAM_LIMIT`. Not given: `UpstreamLimits()`'s defaults.
    """

    def __init__(
        self,
        target: str | ASGIApp,
        *,
        client: httpx.AsyncClient | UseDefault = DEFAULT,
        headers: Mapping[str, str] | None = None,
        timeout: float | httpx.Timeout | None | UseDefault = DEFAULT,
        limits: UpstreamLimits | None = None,
    ) -> None:
        self._limits = limits or UpstreamLimits()
        self._headers = {
            "accept": "text/event-stream",
            "accept-encoding": ACCEPTED_ENCODINGS,
            "content-type": "application/json",
        } | dict(headers or {})
        self._redact = Redactor.of(_secrets(headers or {}))
        self._app = None if isinstance(target, str) else target
        if isinstance(target, str):
            self._url = _endpoint(target)
        elif not isinstance(client, UseDefault):
            raise ConfigurationError("an injected client needs a URL target; an ASGI app target gets its own client")
        else:
            self._url = httpx.URL(_APP_URL)
        self._use_client(client, timeout, transport=StreamingASGITransport(self._app) if self._app else None)

    def __repr__(self) -> str:
        if self._app is not None:
            return f"AGUIUpstream(app={self._app!r})"
        return f"AGUIUpstream(url={_shown(self._url)!r})"

    async def stream(self, request: ModelRequest) -> AsyncIterator[BackendItem]:
        """Run the upstream agent once and stream its step: text, calls, passthrough events, interrupts."""
        body = self.run_input(request).model_dump_json(by_alias=True, exclude_none=True)
        tools = frozenset(t.name for t in request.tools)
        reader = EventReader(
            tools, self._redact, _unanswered(request.messages), _sent(request.messages), _calls(request.messages)
        )
        started = asyncio.get_running_loop().time()
        try:
            async with self._client.stream(
                "POST", self._url, content=body, headers=self._headers, timeout=self._timeout
            ) as response:
                await self._check(response)
                undecodable = upstream_error("The upstream agent sent a body that does not decompress.")
                data = read_data(response, self._limits, started, sender="The upstream agent", undecodable=undecodable)
                async for item in read_items(data, reader):
                    yield item
        except httpx.TimeoutException as exc:
            raise upstream_error("The upstream agent did not answer in time.") from exc
        except httpx.HTTPError as exc:
            raise upstream_error("The connection to the upstream agent failed.") from exc

    def run_input(self, request: ModelRequest) -> RunAgentInput:
        """The input of the upstream run for one step, under a fresh run id of its own.

        `forwardedProps` is the client's, or `{}` when it sent none: AG-UI 0.1 agents require the field.
        """
        return RunAgentInput(
            thread_id=request.thread_id,
            run_id=f"{request.run_id}.{new_id('run')}" if request.run_id else new_id("run"),
            parent_run_id=request.run_id or None,
            protocol_version=PROTOCOL_VERSION,
            messages=list(request.messages),
            tools=list(request.tools),
            context=list(request.context),
            state=request.state,
            resume=list(request.resume) or None,
            forwarded_props=request.forwarded_props if request.forwarded_props is not None else {},
        )

    async def _check(self, response: httpx.Response) -> None:
        status = response.status_code
        received = media_type(response)
        if response.is_success and received == "text/event-stream":
            return
        detail = self._redact((await _error_body(response)).decode("utf-8", errors="replace"))
        log.warning("the upstream agent answered HTTP %d (%s): %s", status, received or "no content type", detail)
        if status in (401, 403):
            raise upstream_error(f"The upstream agent refused the credentials (HTTP {status}).")
        if 400 <= status < 500:
            raise upstream_error(f"The upstream agent rejected the request (HTTP {status}).")
        if not response.is_success:
            raise upstream_error(f"The upstream agent failed (HTTP {status}).")
        raise upstream_error("The upstream agent did not answer with an event stream.")


async def _error_body(response: httpx.Response) -> bytes:
    """The start of a body that is not an event stream, decoded in bounded pieces (a gzip bomb stays small)."""
    try:
        return await read_prefix(response, MAX_ERROR_BODY)
    except (StreamLimitError, UndecodableBody):
        return b""  # an encoding it may not use, or one that does not decode: the status says enough


def _unanswered(messages: Sequence[Message]) -> set[str]:
    """The calls in `messages` without an answer: the ones the upstream deferred and may answer now."""
    called = {call.id for m in messages if isinstance(m, AssistantMessage) for call in m.tool_calls or []}
    return called - {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}


def _calls(messages: Sequence[Message]) -> dict[str, str]:
    """The tool name of each call of the current turn (after the last user message) in `messages`, by call id.

    An upstream that continues a paused call may stream it again; a call of an earlier turn is no
    continuation, and an upstream that opens a call under its id is refused by the engine.
    """
    start = next((i + 1 for i in range(len(messages) - 1, -1, -1) if isinstance(messages[i], UserMessage)), 0)
    turn = messages[start:]
    return {call.id: call.function.name for m in turn if isinstance(m, AssistantMessage) for call in m.tool_calls or []}


def _sent(messages: Sequence[Message]) -> dict[str, set[str]]:
    """The answers `messages` give each call, by call id."""
    sent: dict[str, set[str]] = {}
    for message in messages:
        if isinstance(message, ToolMessage):
            sent.setdefault(message.tool_call_id, set()).add(content_text(message.content))
    return sent


def _secrets(headers: Mapping[str, str]) -> list[str]:
    """Each header value, and its credential alone ("Bearer tok" -> "tok"), as the upstream might echo it."""
    return [part for value in headers.values() for part in (value, *value.split()[1:])]


def _endpoint(target: str) -> httpx.URL:
    return http_url(target, name="target", alternative=", or an ASGI app")


def _shown(url: httpx.URL) -> str:
    """The endpoint without credentials or query, for repr."""
    return f"{url.scheme}://{url.host}{f':{url.port}' if url.port else ''}{url.path}"
