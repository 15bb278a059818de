"""The client's errors.

ClientError
 ├── RequestRefused       the server answered with something other than an event stream (a 4xx, a 5xx, JSON)
 ├── ProtocolError        the stream broke the protocol: framing, lifecycle, or an event that is not AG-UI
 └── StreamLimitExceeded  the stream passed one of the client's `StreamLimits`: reading stopped there
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from adapter.client._run import Run


class ClientError(Exception):
    """Something the client cannot use came back; `run` holds what did."""

    def __init__(self, message: str, run: Run) -> None:
        super().__init__(message)
        self.run = run


class RequestRefused(ClientError):
    """The server answered without an event stream."""

    def __init__(self, run: Run, hint: str = "") -> None:
        body = run.body[:200].decode("utf-8", errors="replace")
        told = f"HTTP {run.status} ({run.content_type or 'no content type'}): {body}"
        super().__init__(f"{told}; {hint}" if hint else told, run)
        self.hint = hint


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
