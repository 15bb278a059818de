"""The client's errors.

ClientError
 ├── RequestRefused       the server answered with something other than an event stream (a 4xx, a 5xx, JSON),
 │                        or a thread route with other than its success; `code` is the server's error code
 ├── ProtocolError        the stream broke the protocol: framing, lifecycle, or an event that is not AG-UI
 ├── StreamLimitExceeded  the stream passed one of the client's `StreamLimits`: reading stopped there
 └── StreamDropped        the connection dropped before the run's end, and was not (or could not be) reattached;
                          an `httpx.TransportError` too, as it was before the client read ids
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import httpx

if TYPE_CHECKING:
    from adapter.client._run import Run


class ClientError(Exception):
    """Something the client cannot use came back; `run` holds what did."""

    def __init__(self, message: str, run: Run) -> None:
        super().__init__(message)
        self.run = run


class RequestRefused(ClientError):
    """The server answered without an event stream; `status` and `code` say how (`code`: "" without one)."""

    def __init__(self, run: Run, hint: str = "") -> None:
        body = run.body[:200].decode("utf-8", errors="replace")
        told = f"HTTP {run.status} ({run.content_type or 'no content type'}): {body}"
        super().__init__(f"{told}; {hint}" if hint else told, run)
        self.hint = hint
        self.status = run.status
        self.code = error_code(run.body)


class ProtocolError(ClientError):
    """The stream broke the AG-UI protocol; `problems` says how, each with its rule id."""

    def __init__(self, problems: list[str], run: Run) -> None:
        super().__init__("; ".join(problems), run)
        self.problems = problems


class StreamLimitExceeded(ClientError):
    """The stream passed a limit; `limit` names it (`max_bytes`, `event_timeout` ...), `run` holds what was read."""

    def __init__(self, message: str, limit: str, run: Run) -> None:
        super().__init__(message, run)
        self.limit = limit


class StreamDropped(ClientError, httpx.TransportError):
    """The connection dropped before the run's end; `run.last_event_id` is where a reattach goes on from."""


def error_code(body: bytes) -> str:
    """The `code` of the adapter's refusals, `{"error": {"code", "message"}}`; "" for any other body."""
    try:
        answer = json.loads(body)
    except (ValueError, RecursionError):
        return ""
    error = answer.get("error") if isinstance(answer, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    return code if isinstance(code, str) else ""
