"""Deciding, call by call, whether a tool call runs now or waits for an answer from outside."""

from __future__ import annotations

import functools
import hashlib
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ag_ui.core import Interrupt

from adapter._forms import FormRequired, UserInputTool
from adapter._resume import approval_schema
from adapter._tools import BaseTool, ClientTool, FrontendOutcome, FunctionTool, InputRequired, ToolContext, ToolResult
from adapter._turns import PendingCall
from adapter._types import ToolCall, wire_json


@dataclass(frozen=True, slots=True)
class DispatchPolicy:
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


def idempotency_key(thread_id: str, tool_call_id: str) -> str:
    """The same key for every execution of one logical call, replays included."""
    return hashlib.sha256(f"{thread_id}\x00{tool_call_id}".encode()).hexdigest()[:32]


def new_id(prefix: str) -> str:
    """An opaque, unique id."""
    return f"{prefix}_{uuid.uuid4().hex}"


def parse_arguments(text: str) -> dict[str, Any] | ToolResult:
    """The call's arguments as an object, or the result that tells the model why they are not one."""
    try:
        arguments = json.loads(text or "{}")
    except ValueError:
        return ToolResult("The arguments are not valid JSON.", error="invalid_arguments")
    if not isinstance(arguments, dict):
        return ToolResult("The arguments must be a JSON object.", error="invalid_arguments")
    return arguments


def suspend(
    call: ToolCall,
    tool: BaseTool,
    policy: DispatchPolicy,
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
        form_key = signal.form.form_key if isinstance(signal, FormRequired) else None
        pending = waiting(
            kind="form" if isinstance(tool, UserInputTool) else "input",
            reason=signal.reason,
            message=signal.message,
            response_schema=signal.response_schema,
            metadata={"formKey": form_key} if form_key else None,
            form_key=form_key,
        )
        return Suspension(pending, "interrupt")
    if tool.external:
        result_schema = tool.result_schema if isinstance(tool, ClientTool) else {}
        pending = waiting(
            kind="frontend",
            reason="tool_call",
            message=f"Run the client tool {call.name} and send back its result.",
            response_schema=dict(result_schema),
        )
        return Suspension(pending, policy.outcome_for(tool))
    pending = waiting(
        kind="approval",
        reason="tool_call",
        message=f"Approve the call to {call.name}?",
        response_schema=approval_schema(with_edits=policy.approve_with_edits),
        metadata={"toolName": call.name},
    )
    return Suspension(pending, "interrupt")


def backend_suspension(interrupt: Interrupt) -> Suspension:
    """A backend's own interrupt, kept as it came: its answer goes back to the backend unchanged."""
    pending = PendingCall(
        interrupt_id=interrupt.id,
        tool_call_id=interrupt.tool_call_id,
        tool_name="",
        arguments="",
        kind="backend",
        reason=interrupt.reason,
        response_schema=interrupt.response_schema or {},
        message=interrupt.message,
        original=wire_json(interrupt),
    )
    return Suspension(pending, "interrupt")


async def execute(
    call: ToolCall, tool: FunctionTool, context: ToolContext, arguments: Mapping[str, Any] | None = None
) -> ToolResult | InputRequired:
    """Run a server tool; an `InputRequired` it raises is returned, as the signal it is."""
    parsed = parse_arguments(call.arguments) if arguments is None else dict(arguments)
    if isinstance(parsed, ToolResult):
        return parsed
    try:
        return await tool.invoke(parsed, context)
    except InputRequired as signal:
        return signal
