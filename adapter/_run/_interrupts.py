"""Suspensions: the pending call a waiting tool call leaves in the stored turn, and the interrupt that asks for it."""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ag_ui.core import Interrupt

from adapter._ids import new_id
from adapter._limits import MAX_REASON_CHARS
from adapter._run._forms import FormRequired, UserInputTool
from adapter._run._tools import BaseTool, ClientTool, FrontendOutcome, InputRequired
from adapter._thread._record import CallKind, PendingCall
from adapter._types import wire_json
from adapter.backends._seam import ToolCall


@dataclass(frozen=True, slots=True)
class InterruptPolicy:
    """The adapter options that shape suspensions."""

    frontend_outcome: FrontendOutcome
    frontend_outcome_overrides: Mapping[str, FrontendOutcome]
    approve_with_edits: bool
    interrupt_ttl: timedelta | None

    def outcome_for(self, tool: BaseTool) -> FrontendOutcome:
        """How a call to this external tool ends the run."""
        return self.frontend_outcome_overrides.get(tool.name) or tool.outcome or self.frontend_outcome


@dataclass(frozen=True, slots=True)
class Suspension:
    """A call that waits, and how its run should end: with an interrupt, or as a pending frontend call."""

    pending: PendingCall
    outcome: FrontendOutcome


def approval_schema(
    parameters: Mapping[str, Any] | None = None, *, with_edits: bool = True, grantable: bool = True
) -> dict[str, Any]:
    """The response schema of a tool approval; `editedArgs` advertises approve-with-edits (INT-7).

    `editedArgs` is the tool's own parameter schema (as the model sees it, and as the resume gate checks
    edits against), so a client can draw an edit form from it. Its `$defs` move to the root, where its
    `#/$defs/...` references resolve. `reason` is the person's words for the model; `remember`, offered
    only for a grantable tool, allows the tool for the rest of the thread.
    """
    properties: dict[str, Any] = {
        "approved": {"type": "boolean"},
        "reason": {"type": "string", "maxLength": MAX_REASON_CHARS},
    }
    if grantable:
        properties["remember"] = {"type": "string", "enum": ["thread"]}
    schema: dict[str, Any] = {"type": "object", "properties": properties, "required": ["approved"]}
    if with_edits:
        edited = copy.deepcopy(dict(parameters)) if parameters else {"type": "object"}
        if "$defs" in edited:
            schema["$defs"] = edited.pop("$defs")
        properties["editedArgs"] = edited
    return schema


def suspend(
    call: ToolCall,
    tool: BaseTool,
    policy: InterruptPolicy,
    now: datetime,
    signal: InputRequired | None = None,
) -> Suspension:
    """Build the pending call, and its interrupt, for a call that cannot finish in this run."""
    waiting = functools.partial(
        PendingCall,
        interrupt_id=new_id("int"),
        tool_call_id=call.id,
        tool_name=call.name,
        arguments=call.arguments,
        expires_at=now + policy.interrupt_ttl if policy.interrupt_ttl else None,
    )
    if signal is not None:
        return Suspension(_input_request(waiting, tool, signal), "interrupt")
    if tool.external:
        result_schema = tool.result_schema if isinstance(tool, ClientTool) else {}
        pending = waiting(
            kind=CallKind.FRONTEND,
            reason="tool_call",
            message=f"Run the client tool {call.name} and send back its result.",
            response_schema=dict(result_schema),
        )
        return Suspension(pending, policy.outcome_for(tool))
    pending = waiting(
        kind=CallKind.APPROVAL,
        reason="tool_call",
        message=f"Approve the call to {call.name}?",
        response_schema=approval_schema(
            tool.parameters, with_edits=policy.approve_with_edits, grantable=tool.grantable
        ),
        metadata={"toolName": call.name},
    )
    return Suspension(pending, "interrupt")


def open_call_suspension(call: ToolCall, policy: InterruptPolicy, now: datetime) -> Suspension:
    """A call the backend deferred and left open without an interrupt: the client answers it, as a client tool's call.

    The engine never answers a call it did not run (AG-UI FE-1). The run ends as a frontend call's
    does (`frontend_outcome`); the answer, a resume entry or a ToolMessage, goes back to the backend.
    """
    pending = PendingCall(
        interrupt_id=new_id("int"),
        tool_call_id=call.id,
        tool_name=call.name,
        arguments=call.arguments,
        expires_at=now + policy.interrupt_ttl if policy.interrupt_ttl else None,
        kind=CallKind.FRONTEND,
        reason="tool_call",
        message=f"The agent left its call to {call.name} open: send back its result.",
        response_schema={},
    )
    outcome = policy.frontend_outcome_overrides.get(call.name) or policy.frontend_outcome
    return Suspension(pending, outcome)


def _input_request(waiting: Callable[..., PendingCall], tool: BaseTool, signal: InputRequired) -> PendingCall:
    """The pending call of a tool that asked for input, or of the `request_user_input` control tool."""
    form_key = signal.form.form_key if isinstance(signal, FormRequired) else None
    return waiting(
        kind=CallKind.FORM if isinstance(tool, UserInputTool) else CallKind.INPUT,
        reason=signal.reason,
        message=signal.message,
        response_schema=signal.response_schema,
        metadata={"formKey": form_key} if form_key else None,
        form_key=form_key,
    )


def backend_suspension(interrupt: Interrupt) -> Suspension:
    """A backend's own interrupt, kept as it came: its answer goes back to the backend unchanged."""
    pending = PendingCall(
        interrupt_id=interrupt.id,
        tool_call_id=interrupt.tool_call_id,
        tool_name="",
        arguments="",
        kind=CallKind.BACKEND,
        reason=interrupt.reason,
        response_schema=interrupt.response_schema or {},
        message=interrupt.message,
        original=wire_json(interrupt),
    )
    return Suspension(pending, "interrupt")
