"""What the store keeps for a thread: the open (suspended) turn and the last applied resume.

These records are the server's truth about a suspended turn: which calls wait for an answer, with
which arguments, under which frozen response schema. A client's `messages` can never change them.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any, Literal

from ag_ui.core import Interrupt, Message
from pydantic import BaseModel, TypeAdapter

from adapter._types import JSON

SuspensionKind = Literal["frontend", "approval", "input"]
"""Why a call waits: a client tool, an approval before a server tool runs, or a tool that asked for input."""

_messages = TypeAdapter(list[Message])


class PendingCall(BaseModel):
    """One tool call that waits for an answer, and the interrupt that asks for it."""

    interrupt_id: str
    tool_call_id: str
    tool_name: str
    arguments: str
    """The arguments as the server proposed them: an approval applies to these and nothing else."""
    kind: SuspensionKind
    reason: str
    response_schema: dict[str, Any]
    """Frozen when the turn suspends: later changes to tools or forms affect only new turns."""
    message: str | None = None
    expires_at: datetime | None = None
    metadata: dict[str, Any] | None = None

    def interrupt(self) -> Interrupt:
        """The interrupt as a client sees it."""
        return Interrupt(
            id=self.interrupt_id,
            reason=self.reason,
            message=self.message,
            tool_call_id=self.tool_call_id,
            response_schema=self.response_schema,
            expires_at=self.expires_at.isoformat() if self.expires_at else None,
            metadata=self.metadata,
        )


class OpenTurn(BaseModel):
    """A turn that ended with interrupts and waits for its resume."""

    turn_id: str
    run_id: str
    messages: list[dict[str, Any]]
    """The conversation at suspension, as wire JSON, including the calls that wait."""
    pending: list[PendingCall]
    state: JSON = None
    claimed_by: str | None = None
    """The run applying a resume right now; a second resume is refused while it is set."""
    claimed_at: datetime | None = None

    def conversation(self) -> list[Message]:
        """The stored conversation as protocol messages."""
        return _messages.validate_python(self.messages)

    def find(self, interrupt_id: str) -> PendingCall | None:
        """The pending call an interrupt id names."""
        return next((call for call in self.pending if call.interrupt_id == interrupt_id), None)


class AppliedResume(BaseModel):
    """The last resume applied on a thread, kept so that an identical replay changes nothing."""

    run_id: str
    fingerprints: dict[str, str]
    """interrupt id -> digest of the answer (status and payload)."""
    outcome: dict[str, Any] | None = None
    """The RUN_FINISHED outcome of the resumed run, once it finished."""


class ThreadRecord(BaseModel):
    """Everything the store keeps for one thread."""

    thread_id: str
    open_turn: OpenTurn | None = None
    applied: AppliedResume | None = None


def answer_fingerprint(status: str, payload: JSON) -> str:
    """A digest that is equal exactly when two answers say the same thing."""
    canonical = json.dumps([status, payload], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def dump_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Messages as wire JSON, for storage."""
    return [message.model_dump(mode="json", by_alias=True, exclude_none=True) for message in messages]
