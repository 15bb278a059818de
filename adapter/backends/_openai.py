"""`OpenAIChatBackend`: any OpenAI-compatible chat-completions server, streamed over httpx.

OpenAI, Azure OpenAI, vLLM, Ollama, llama.cpp server, LiteLLM and DeepSeek all answer
`POST {base_url}/chat/completions` with `stream: true`. How the conversation is mapped is described in
`_openai_messages`, how the stream is read in `_openai_stream`, and how failures are reported in
`_openai_errors`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from typing import Any, Final

import httpx

from adapter._errors import BACKEND_ERROR, BackendError, ConfigurationError
from adapter.backends._http_client import DEFAULT, ClientOwner, UseDefault, http_url, media_type
from adapter.backends._openai_errors import (
    Redactor,
    Retryable,
    not_sse_error,
    read_bounded,
    status_error,
    transport_error,
)
from adapter.backends._openai_messages import (
    ClientDataRole,
    DeveloperRole,
    ReasoningField,
    chat_messages,
    chat_tools,
)
from adapter.backends._openai_stream import StepReader, read_items
from adapter.backends._seam import BackendItem, ModelRequest
from adapter.backends._upstream_limits import UpstreamLimits, read_data
from adapter.client._limits import ACCEPTED_ENCODINGS

log = logging.getLogger("adapter.backends.openai")


MAX_RETRY_AFTER: Final = 20.0
"""A `Retry-After` longer than this many seconds ends the retries: the caller is not kept waiting."""

_RESERVED_BODY_KEYS = frozenset({"model", "messages", "stream"})
_NOT_SSE = frozenset({"application/json", "text/html"})
_PROVIDERS = {"api.openai.com": "openai", "api.deepseek.com": "deepseek", "openai.azure.com": "azure"}


class OpenAIChatBackend(ClientOwner):
    """A backend that streams each step from an OpenAI-compatible `/chat/completions` endpoint.

    Args:
        base_url: The API root, e.g. "https://api.openai.com/v1" or "http://localhost:11434/v1"; a query
            (Azure's `api-version`) is kept.
        model: The model (or Azure deployment) name sent in every request.
        api_key: Sent as `Authorization: Bearer`; None reads `OPENAI_API_KEY`, "" sends no key (local
            servers, or Azure with an `api-key` header in `headers`). Never logged, shown or repr'd.
        client: An `httpx.AsyncClient` the caller owns and closes. Not given: the backend makes one and
            closes it in `aclose()`.
        headers: Extra headers for every request; their values are redacted from error messages too.
        timeout: Per-request timeout. Not given: the client's own, or `DEFAULT_TIMEOUT` for an owned one.
        max_retries: Retries of HTTP 429, 5xx and failed connections, only before the first item.
        retry_backoff: Seconds before the first retry; doubled for each next one, with jitter.
        strict_tools: Send the tools in OpenAI strict mode (`schema_tools.strict_schema`).
        parallel_tool_calls: Sent as `parallel_tool_calls` when set (and there are tools).
        temperature: Sent when set.
        extra_body: Other request fields (`max_tokens`, `seed`, `reasoning_effort` ...), sent as given.
        developer_role: The role developer messages are sent with; "system" works with every server.
        stream_usage: Ask for the usage chunk (`stream_options.include_usage`); some old servers refuse it.
        provider: The provider label of the reported usage; guessed from the host when not given.
        send_state: Send `ModelRequest.state` (the shared state) with the context, so the model reads what the
            page and the tools wrote; False keeps it from the model.
        client_data_role: Where the run's context and state go. "user" (the default): one user message after
            the instructions, a one-line note that it is data from the client, then one delimited data block.
            "system": system messages, the placement before issue 42. Risky: both come from the browser, so
            whoever can post to the page writes instructions the model follows (docs/security.md).
        limits: What one step's stream may send (line and event size, bytes after decompression, events,
            time without an event, the whole step); past a limit the step fails with `UPSTREAM_LIMIT`. Not
            given: `UpstreamLimits()`'s defaults.
        reasoning_field: The assistant message field that takes the model's reasoning back on later requests:
            "reasoning_content" (vLLM, DeepSeek, Qwen) or "reasoning" (OpenRouter, Ollama). None (the default):
            reasoning streams and is stored, but is not sent back, as OpenAI and older servers refuse a field
            they do not know.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        client: httpx.AsyncClient | UseDefault = DEFAULT,
        headers: Mapping[str, str] | None = None,
        timeout: float | httpx.Timeout | None | UseDefault = DEFAULT,
        max_retries: int = 2,
        retry_backoff: float = 0.5,
        strict_tools: bool = False,
        parallel_tool_calls: bool | None = None,
        temperature: float | None = None,
        extra_body: Mapping[str, Any] | None = None,
        developer_role: DeveloperRole = "system",
        stream_usage: bool = True,
        provider: str | None = None,
        send_state: bool = True,
        limits: UpstreamLimits | None = None,
        reasoning_field: ReasoningField | None = None,
        client_data_role: ClientDataRole = "user",
    ) -> None:
        if max_retries < 0 or retry_backoff < 0:
            raise ConfigurationError("max_retries and retry_backoff must not be negative")
        if client_data_role not in ("user", "system"):
            raise ConfigurationError(f"client_data_role must be 'user' or 'system', not {client_data_role!r}")
        if reasoning_field not in (None, "reasoning_content", "reasoning"):
            raise ConfigurationError(
                f"reasoning_field must be 'reasoning_content', 'reasoning' or None, not {reasoning_field!r}"
            )
        self._url = _endpoint(base_url)
        self.extra_body = _extra_body(extra_body or {})
        self.model = model
        self.provider = provider if provider is not None else _provider(self._url.host)
        key = os.environ.get("OPENAI_API_KEY", "") if api_key is None else api_key
        self._headers = _headers(key, headers or {})
        self._redact = Redactor.of([key, *(headers or {}).values()])
        self._use_client(client, timeout)
        self.max_retries = max_retries
        self.retry_backoff = retry_backoff
        self.strict_tools = strict_tools
        self.parallel_tool_calls = parallel_tool_calls
        self.temperature = temperature
        self.developer_role: DeveloperRole = developer_role
        self.stream_usage = stream_usage
        self.send_state = send_state
        self.limits = limits or UpstreamLimits()
        self.reasoning_field: ReasoningField | None = reasoning_field
        self.client_data_role: ClientDataRole = client_data_role

    def __repr__(self) -> str:
        return f"OpenAIChatBackend(base_url={_shown(self._url)!r}, model={self.model!r})"

    async def stream(self, request: ModelRequest) -> AsyncIterator[BackendItem]:
        """Stream one assistant step; retry before the first item only, never after."""
        body = self.request_body(request)
        for attempt in range(self.max_retries + 1):
            started = False
            try:
                sent = asyncio.get_running_loop().time()
                async with self._client.stream(
                    "POST", self._url, json=body, headers=self._headers, timeout=self._timeout
                ) as response:
                    await self._check(response)
                    reader = StepReader(self.model, self.provider)
                    async for item in read_items(self._events(response, sent), reader, self._redact):
                        started = True
                        yield item
                return
            except (Retryable, httpx.ConnectError) as exc:
                failure = exc if isinstance(exc, Retryable) else Retryable(transport_error(exc))
                if started or attempt == self.max_retries:
                    raise failure.error from exc
                await self._backoff(failure, attempt, exc)
            except httpx.HTTPError as exc:
                raise transport_error(exc) from exc

    def request_body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body of the chat-completions request for one step."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": chat_messages(
                request.messages,
                request.context,
                developer_role=self.developer_role,
                state=request.state if self.send_state else None,
                reasoning_field=self.reasoning_field,
                client_data_role=self.client_data_role,
            ),
            "stream": True,
        }
        if self.stream_usage:
            body["stream_options"] = {"include_usage": True}
        if request.tools:
            body["tools"] = chat_tools(request.tools, strict=self.strict_tools)
            if self.parallel_tool_calls is not None:
                body["parallel_tool_calls"] = self.parallel_tool_calls
        if self.temperature is not None:
            body["temperature"] = self.temperature
        return body | self.extra_body

    def _events(self, response: httpx.Response, sent: float) -> AsyncGenerator[str, None]:
        """The data of each event of the step's stream, within `limits`; a line that is no SSE refuses the body."""

        def refuse(line: str) -> None:
            raise not_sse_error(line.encode(), self._redact)

        undecodable = BackendError("The model server sent a body that does not decompress.", code=BACKEND_ERROR)
        return read_data(
            response, self.limits, sent, sender="The model server", undecodable=undecodable, on_other_line=refuse
        )

    async def _check(self, response: httpx.Response) -> None:
        if not response.is_success:
            raise await status_error(response, self._redact, self.model)
        if media_type(response) in _NOT_SSE:
            raise not_sse_error(await read_bounded(response), self._redact)

    async def _backoff(self, failure: Retryable, attempt: int, cause: Exception) -> None:
        if failure.retry_after is not None and failure.retry_after > MAX_RETRY_AFTER:
            raise failure.error from cause
        delay = failure.retry_after
        if delay is None:
            delay = self.retry_backoff * 2**attempt * random.uniform(0.5, 1.0)
        log.warning("%s Retry %d of %d in %.2fs.", failure.error.message, attempt + 1, self.max_retries, delay)
        await asyncio.sleep(delay)


def _endpoint(base_url: str) -> httpx.URL:
    url = http_url(base_url, name="base_url")
    return url.copy_with(path=url.path.rstrip("/") + "/chat/completions")


def _headers(key: str, extra: Mapping[str, str]) -> dict[str, str]:
    headers = {"accept": "text/event-stream", "accept-encoding": ACCEPTED_ENCODINGS}
    if key:
        headers["authorization"] = f"Bearer {key}"
    return headers | dict(extra)


def _extra_body(extra: Mapping[str, Any]) -> dict[str, Any]:
    clash = sorted(_RESERVED_BODY_KEYS & set(extra))
    if clash:
        raise ConfigurationError(f"extra_body may not set {', '.join(clash)}")
    return dict(extra)


def _provider(host: str) -> str | None:
    return next((name for suffix, name in _PROVIDERS.items() if host == suffix or host.endswith("." + suffix)), None)


def _shown(url: httpx.URL) -> str:
    """The endpoint without credentials or query, for repr."""
    root = url.path.removesuffix("/chat/completions")
    return f"{url.scheme}://{url.netloc.decode('ascii')}{root}"
