"""Errors that end a run with `RUN_ERROR`, each with a stable code.

    AdapterError                 base; `code` and a message that is safe to show a client
    ├── ToolNameConflict         TOOL_NAME_CONFLICT
    ├── ResumeError              RESUME_* (the resume gate refused the input; nothing was executed)
    └── BackendError             BACKEND_ERROR (the backend failed; `code` may be more specific)

`ConfigurationError` is raised at start-up, never at run time.
"""

from __future__ import annotations

from typing import Any


class ConfigurationError(ValueError):
    """The adapter was set up wrong: a duplicate tool, a bad schema, an unknown option."""


class AdapterError(Exception):
    """A failure reported to the client as `RUN_ERROR` with a stable `code`."""

    code = "INTERNAL_ERROR"

    def __init__(self, message: str, *, code: str | None = None, details: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details
        if code is not None:
            self.code = code


class ToolNameConflict(AdapterError):
    """A client tool has the name of a server tool; it is refused, never silently shadowed."""

    code = "TOOL_NAME_CONFLICT"

    def __init__(self, names: list[str]) -> None:
        listed = ", ".join(sorted(names))
        super().__init__(f"client tools clash with server tools of the same name: {listed}", details=sorted(names))


class InvalidClientTool(AdapterError):
    """A client tool's parameter schema is not acceptable."""

    code = "INVALID_TOOL_SCHEMA"


class ResumeError(AdapterError):
    """The resume gate refused the input. The stored turn is exactly as it was."""

    code = "RESUME_INVALID"


class BackendError(AdapterError):
    """The agent backend failed."""

    code = "BACKEND_ERROR"


# Codes as constants, so tests and clients can refer to one spelling.
INVALID_INPUT = "INVALID_INPUT"
RESUME_REQUIRED = "RESUME_REQUIRED"
RESUME_UNKNOWN_INTERRUPT = "RESUME_UNKNOWN_INTERRUPT"
RESUME_DUPLICATE = "RESUME_DUPLICATE"
RESUME_INCOMPLETE = "RESUME_INCOMPLETE"
RESUME_EXPIRED = "RESUME_EXPIRED"
RESUME_PAYLOAD_INVALID = "RESUME_PAYLOAD_INVALID"
RESUME_CONFLICT = "RESUME_CONFLICT"
