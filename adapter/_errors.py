"""Errors, and every error code the adapter reports, in one place.

    InputRejected                the input cannot start a run, refused before any event: HTTP answers its
    │                            `status_code` (INVALID_INPUT, INPUT_TOO_DEEP, ...); nothing was run or stored
    ├── LimitExceeded            over one of the adapter's limits (413, or 422 for the nesting and id rules)
    ├── Draining                 503 DRAINING: the server is shutting down (`Adapter.drain`); send it again
    ├── ToolNameConflict         422 TOOL_NAME_CONFLICT
    └── InvalidClientTool        422 INVALID_TOOL_SCHEMA

    AdapterError                 a run's failure, after RUN_STARTED: `code` and a message safe to show a client
    ├── ResumeError              RESUME_* (the resume gate refused the input; nothing was executed)
    ├── BackendError             BACKEND_ERROR (the backend failed; `code` may be more specific)
    ├── InvalidPage              400 INVALID_PAGE: a thread route's page names nothing the thread holds
    └── ThreadConflict           THREAD_CONFLICT: the thread kept changing; a thread route answers 409

`ConfigurationError` is raised at start-up, never at run time. `Forbidden` refuses a request the
`authorize` policy does not allow, before any event: HTTP answers it with 403. Every refusal carries its
HTTP status as `status_code` (an `AdapterError` with None is a run's failure, never a refusal).
The codes below are the whole vocabulary: `HTTP_CODES` answer a refused request before any stream
opens, `RUN_CODES` end a run as `RUN_ERROR.code`; `STORE_UNAVAILABLE`, `THREAD_CONFLICT` (a rename's 409)
and `INTERNAL_ERROR` are both. docs/resuming.md documents each one (a test keeps the two in step).
"""

from __future__ import annotations

from typing import Any, Final

# Refusals at the HTTP edge: a 4xx with `{"error": {"code", "message"}}`.
UNSUPPORTED_MEDIA_TYPE: Final = "UNSUPPORTED_MEDIA_TYPE"
CONTENT_TOO_LARGE: Final = "CONTENT_TOO_LARGE"
INVALID_INPUT: Final = "INVALID_INPUT"
UNSUPPORTED_PROTOCOL_VERSION: Final = "UNSUPPORTED_PROTOCOL_VERSION"
THREAD_NOT_FOUND: Final = "THREAD_NOT_FOUND"
RUN_NOT_FOUND: Final = "RUN_NOT_FOUND"
INVALID_TITLE: Final = "INVALID_TITLE"
THREAD_FORBIDDEN: Final = "THREAD_FORBIDDEN"
APPROVAL_FORBIDDEN: Final = "APPROVAL_FORBIDDEN"
INPUT_TOO_DEEP: Final = "INPUT_TOO_DEEP"
INVALID_ID: Final = "INVALID_ID"
DUPLICATE_MESSAGE_ID: Final = "DUPLICATE_MESSAGE_ID"
TOO_MANY_TOOLS: Final = "TOO_MANY_TOOLS"
TOOLS_TOO_LARGE: Final = "TOOLS_TOO_LARGE"
TOOL_NAME_CONFLICT: Final = "TOOL_NAME_CONFLICT"
INVALID_TOOL_SCHEMA: Final = "INVALID_TOOL_SCHEMA"
DRAINING: Final = "DRAINING"
RUN_ID_REUSED: Final = "RUN_ID_REUSED"
TOO_MANY_DETACHED_RUNS: Final = "TOO_MANY_DETACHED_RUNS"
# Both: 503 on a route that does not stream, `RUN_ERROR.code` in a run.
STORE_UNAVAILABLE: Final = "STORE_UNAVAILABLE"
INVALID_PAGE: Final = "INVALID_PAGE"

# `RUN_ERROR.code`: the resume gate.
RESUME_REQUIRED: Final = "RESUME_REQUIRED"
RESUME_INCOMPLETE: Final = "RESUME_INCOMPLETE"
RESUME_UNKNOWN_INTERRUPT: Final = "RESUME_UNKNOWN_INTERRUPT"
RESUME_DUPLICATE: Final = "RESUME_DUPLICATE"
RESUME_EXPIRED: Final = "RESUME_EXPIRED"
RESUME_PAYLOAD_INVALID: Final = "RESUME_PAYLOAD_INVALID"
RESUME_CONFLICT: Final = "RESUME_CONFLICT"
RESUME_REASON_TOO_LONG: Final = "RESUME_REASON_TOO_LONG"
RESUME_GRANT_REFUSED: Final = "RESUME_GRANT_REFUSED"
# `RUN_ERROR.code`: the run itself.
RUN_INTERRUPTED: Final = "RUN_INTERRUPTED"
THREAD_CONFLICT: Final = "THREAD_CONFLICT"
THREAD_DELETED: Final = "THREAD_DELETED"
INTERNAL_ERROR: Final = "INTERNAL_ERROR"
STATE_PATCH_TOO_LARGE: Final = "STATE_PATCH_TOO_LARGE"
JOURNAL_LIMIT: Final = "JOURNAL_LIMIT"
RUN_DEADLINE: Final = "RUN_DEADLINE"
# `RUN_ERROR.code`: the backend.
BACKEND_ERROR: Final = "BACKEND_ERROR"
BACKEND_AUTH: Final = "BACKEND_AUTH"
BACKEND_RATE_LIMITED: Final = "BACKEND_RATE_LIMITED"
BACKEND_TIMEOUT: Final = "BACKEND_TIMEOUT"
UPSTREAM_ERROR: Final = "UPSTREAM_ERROR"
UPSTREAM_LIMIT: Final = "UPSTREAM_LIMIT"
UNKNOWN_BACKEND_ITEM: Final = "UNKNOWN_BACKEND_ITEM"

HTTP_CODES: Final = frozenset(
    {
        UNSUPPORTED_MEDIA_TYPE,
        CONTENT_TOO_LARGE,
        INVALID_INPUT,
        UNSUPPORTED_PROTOCOL_VERSION,
        THREAD_NOT_FOUND,
        RUN_NOT_FOUND,
        INVALID_TITLE,
        THREAD_FORBIDDEN,
        APPROVAL_FORBIDDEN,
        STORE_UNAVAILABLE,
        INPUT_TOO_DEEP,
        INVALID_ID,
        DUPLICATE_MESSAGE_ID,
        TOO_MANY_TOOLS,
        TOOLS_TOO_LARGE,
        TOOL_NAME_CONFLICT,
        INVALID_TOOL_SCHEMA,
        DRAINING,
        RUN_ID_REUSED,
        TOO_MANY_DETACHED_RUNS,
        INVALID_PAGE,
        THREAD_CONFLICT,
        INTERNAL_ERROR,
    }
)
RUN_CODES: Final = frozenset(
    {
        RESUME_REQUIRED,
        RESUME_INCOMPLETE,
        RESUME_UNKNOWN_INTERRUPT,
        RESUME_DUPLICATE,
        RESUME_EXPIRED,
        RESUME_PAYLOAD_INVALID,
        RESUME_CONFLICT,
        RESUME_REASON_TOO_LONG,
        RESUME_GRANT_REFUSED,
        RUN_INTERRUPTED,
        THREAD_CONFLICT,
        THREAD_DELETED,
        INTERNAL_ERROR,
        STORE_UNAVAILABLE,
        STATE_PATCH_TOO_LARGE,
        JOURNAL_LIMIT,
        RUN_DEADLINE,
        BACKEND_ERROR,
        BACKEND_AUTH,
        BACKEND_RATE_LIMITED,
        BACKEND_TIMEOUT,
        UPSTREAM_ERROR,
        UPSTREAM_LIMIT,
        UNKNOWN_BACKEND_ITEM,
    }
)


class ConfigurationError(ValueError):
    """The adapter was set up wrong: a duplicate tool, a bad schema, an unknown option."""


class Forbidden(PermissionError):
    """The `authorize` policy refused the request; nothing was run or stored. `code` says which check."""

    status_code: Final = 403
    details: Final = None

    def __init__(self, message: str, *, code: str = THREAD_FORBIDDEN) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


class InputRejected(ValueError):
    """The input cannot start a run; nothing was run or stored. HTTP answers `status_code` with `body()`."""

    def __init__(self, status_code: int, code: str, message: str, details: list[Any] | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.code = code
        self.message = message
        self.details = details

    def body(self) -> dict[str, Any]:
        """The JSON error body: `{"error": {code, message, details}}`."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.details is not None:
            error["details"] = self.details
        return {"error": error}


class LimitExceeded(InputRejected):
    """The input is over one of the adapter's limits; nothing was run or stored. HTTP answers `status_code`."""

    def __init__(self, message: str, *, code: str, status_code: int = 413) -> None:
        super().__init__(status_code, code, message)


class Draining(InputRejected):
    """The adapter is draining (`Adapter.drain`): it starts no run, so that a balancer sends the input elsewhere."""

    retry_after: Final = 1
    """Seconds a client waits before it sends the input again (HTTP's `Retry-After`): another replica takes it."""

    def __init__(self) -> None:
        super().__init__(503, DRAINING, "This server is shutting down and starts no run; send the input again.")


class ToolNameConflict(InputRejected):
    """A client tool has the name of a server tool, or of another client tool; refused, never silently shadowed."""

    def __init__(self, names: list[str]) -> None:
        listed = ", ".join(sorted(names))
        message = f"client tools clash with server tools of the same name: {listed}"
        super().__init__(422, TOOL_NAME_CONFLICT, message, details=sorted(names))


class InvalidClientTool(InputRejected):
    """A client tool's parameter or result schema is not acceptable."""

    def __init__(self, message: str, *, details: list[Any] | None = None) -> None:
        super().__init__(422, INVALID_TOOL_SCHEMA, message, details)


class AdapterError(Exception):
    """A failure reported to the client as `RUN_ERROR` with a stable `code`."""

    code: str = INTERNAL_ERROR
    status_code: int | None = None
    """The HTTP status a route answers when this error refuses its request; None: a run's failure, not a refusal."""

    def __init__(self, message: str, *, code: str | None = None, details: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details
        if code is not None:
            self.code = code


class ResumeError(AdapterError):
    """The resume gate refused the input. The stored turn is exactly as it was; `code` says why (RESUME_*)."""

    def __init__(self, message: str, *, code: str, details: Any = None) -> None:
        super().__init__(message, code=code, details=details)


class BackendError(AdapterError):
    """The agent backend failed."""

    code = BACKEND_ERROR


class InvalidPage(AdapterError):
    """A page of a thread or of the threads names what no listing gave (an unknown `after` or `before`)."""

    code = INVALID_PAGE
    status_code = 400


class ThreadConflict(AdapterError):
    """The thread kept changing while it was changed; nothing of this change is stored. Try again."""

    code = THREAD_CONFLICT
    status_code = 409
