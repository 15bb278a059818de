"""What goes wrong with a chat-completions server, as `BackendError`s with safe messages.

    HTTP 401, 403                    BACKEND_AUTH           (the provider's text is not shown)
    HTTP 404 naming the model        BACKEND_ERROR          the server does not know the model
    any other HTTP 404               BACKEND_ERROR          no such path: check `base_url` (it ends with /v1)
    HTTP 429                         BACKEND_RATE_LIMITED   retried before the first item
    HTTP 5xx                         BACKEND_ERROR          retried before the first item
    other HTTP 4xx (400 ...)         BACKEND_ERROR          with the provider's message, sanitised
    connect or read timeout          BACKEND_TIMEOUT
    cannot connect                   BACKEND_ERROR          retried before the first item
    broken connection, not SSE,
    malformed chunk, error chunk,
    a body that does not decompress  BACKEND_ERROR
    a stream past `UpstreamLimits`   UPSTREAM_LIMIT         (`_upstream_limits.read_data`, naming the limit)

A message never carries the api key, a header value, the request or more than `MAX_DETAIL` characters
of what the provider said.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from adapter._errors import BACKEND_AUTH, BACKEND_ERROR, BACKEND_RATE_LIMITED, BACKEND_TIMEOUT, BackendError
from adapter.client._limits import StreamLimitError, UndecodableBody, read_prefix

MAX_DETAIL = 300
"""Characters of a provider's own error message that may reach a client."""
MAX_ERROR_BODY = 64 * 1024
"""Bytes of an error response that are read to find the provider's message."""

_SECRET_PATTERNS = re.compile(
    r"\b(?:bearer|basic)\s+\S+"  # an echoed Authorization header
    r"|\b(?:api[-_]?key|authorization|x-api-key|token)\b\s*[:=]\s*(?:(?:bearer|basic)\s+)?\S+"  # key: value, key=value
    r"|\b(?:sk|pk|rk)-[A-Za-z0-9_\-*]{6,}",  # OpenAI-style keys, masked ones included
    re.IGNORECASE,
)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]+")
_MESSAGE = re.compile(r'"message"\s*:\s*"((?:[^"\\]|\\.)*)')


@dataclass(frozen=True, slots=True)
class Redactor:
    """Removes secrets from text a provider sent before any of it reaches a client."""

    secrets: tuple[str, ...] = ()

    @classmethod
    def of(cls, values: Iterable[str]) -> Redactor:
        """Redact these exact values (header values, the key) besides anything that looks like a secret."""
        return cls(tuple(sorted({v for v in values if len(v) >= 6}, key=len, reverse=True)))

    def __call__(self, text: str) -> str:
        """The text with secrets replaced by "***", one line, at most `MAX_DETAIL` characters."""
        for secret in self.secrets:
            text = text.replace(secret, "***")
        text = _SECRET_PATTERNS.sub("***", text)
        text = " ".join(_CONTROL.sub(" ", text).split())
        return text if len(text) <= MAX_DETAIL else text[: MAX_DETAIL - 1] + "…"


class Retryable(Exception):
    """A failure that may go away: HTTP 429, 5xx, or no connection. Raised only before any item."""

    def __init__(self, error: BackendError, retry_after: float | None = None) -> None:
        super().__init__(error.message)
        self.error = error
        self.retry_after = retry_after


async def status_error(response: httpx.Response, redact: Redactor, model: str) -> BackendError | Retryable:
    """The error for a response that is not a 2xx, from its status and (sanitised) body."""
    status = response.status_code
    if status in (401, 403):
        return BackendError(f"The model server refused the credentials (HTTP {status}).", code=BACKEND_AUTH)
    if status == 404:
        return not_found_error(await read_bounded(response), model)
    if status == 429:
        error = BackendError("The model server is rate limiting requests (HTTP 429).", code=BACKEND_RATE_LIMITED)
        return Retryable(error, retry_after(response.headers.get("retry-after")))
    if status >= 500:
        error = BackendError(f"The model server failed (HTTP {status}).", code=BACKEND_ERROR)
        return Retryable(error, retry_after(response.headers.get("retry-after")))
    suffix = _detail_suffix(await read_bounded(response), redact)
    return BackendError(f"The model server rejected the request (HTTP {status}){suffix}", code=BACKEND_ERROR)


def not_found_error(body: bytes, model: str) -> BackendError:
    """The error for an HTTP 404: an unknown model when the server's message names it, else a wrong path.

    OpenAI, vLLM, Ollama and LiteLLM name the model in their own error message; a 404 for a path the server
    does not serve (a `base_url` without `/v1`) is bare, an HTML page or another JSON body.
    """
    if names_model(provider_message(body), model):
        return BackendError(f"The model server does not know the model {model!r} (HTTP 404).", code=BACKEND_ERROR)
    return BackendError(
        "The model server has no chat completions endpoint at `base_url` + /chat/completions (HTTP 404): check "
        "`base_url`; an OpenAI-compatible server usually serves under /v1 (e.g. http://localhost:11434/v1).",
        code=BACKEND_ERROR,
    )


def names_model(message: str, model: str) -> bool:
    """Whether a provider's message names `model` where providers name one: as the name after the word "model".

    OpenAI and vLLM write "The model `x` does not exist", Ollama `model "x" not found`, LiteLLM `model=x`, Gemini
    `models/x`. The name anywhere else is prose, not a name ("do" in "you do not have access"). It is a whole
    name (`gpt-4o` is not named by `gpt-4o-mini`): a sentence's full stop may follow it, but a dot that goes on
    (`llama3` in `llama3.1`) makes another name.
    """
    if not model:
        return False
    named = rf"(?i:\bmodels?)(?:\s*[:=]\s*|\s+|/)[`'\"]?{re.escape(model)}(?![\w:/-]|\.[\w-])"
    return re.search(named, message) is not None


def not_sse_error(body: bytes, redact: Redactor) -> BackendError:
    """The error for a 2xx response that is not an event stream (a JSON or HTML page)."""
    suffix = _detail_suffix(body, redact)
    return BackendError(f"The model server did not answer with an event stream{suffix}", code=BACKEND_ERROR)


def _detail_suffix(body: bytes, redact: Redactor) -> str:
    """The end of an error message: `: ` and the provider's own message, redacted; "." when it gave none."""
    detail = provider_message(body)
    return f": {redact(detail)}" if detail else "."


def transport_error(exc: httpx.HTTPError) -> BackendError:
    """The error for a failed connection; the exception's own text (URLs, hosts) is not shown."""
    if isinstance(exc, httpx.TimeoutException):
        return BackendError("The model server did not answer in time.", code=BACKEND_TIMEOUT)
    if isinstance(exc, httpx.ConnectError):
        return BackendError("Could not connect to the model server.", code=BACKEND_ERROR)
    return BackendError("The connection to the model server failed.", code=BACKEND_ERROR)


async def read_bounded(response: httpx.Response, limit: int = MAX_ERROR_BODY) -> bytes:
    """Up to `limit` bytes of a streamed response's body, decoded in bounded pieces (a gzip bomb stays small)."""
    try:
        return await read_prefix(response, limit)
    except (StreamLimitError, UndecodableBody):
        return b""  # an encoding it may not use, or one that does not decode: the status says enough


def provider_message(body: bytes) -> str:
    """The provider's own error text from a JSON error body (`error.message`, `message`, `detail`), if any."""
    try:
        document = json.loads(body)
    except ValueError:
        found = _MESSAGE.search(body.decode("utf-8", errors="replace"))  # a body cut at MAX_ERROR_BODY
        return found.group(1) if found else ""
    return error_text(document)


def error_text(document: Any) -> str:
    """The message of an OpenAI-style error object, or of the shapes vLLM and proxies send."""
    if not isinstance(document, dict):
        return ""
    error = document.get("error", document)
    if isinstance(error, str):
        return error
    if isinstance(error, dict):
        for key in ("message", "detail"):
            if isinstance(error.get(key), str):
                return str(error[key])
    return ""


def retry_after(value: str | None) -> float | None:
    """Seconds from a `Retry-After` header (delta-seconds or an HTTP date); None when absent or unreadable."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())
