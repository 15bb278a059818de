"""Applying answers and running tool calls: every path that ends in a ToolMessage or a suspension."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ag_ui.core import RunAgentInput, ToolMessage

from adapter._dispatch import Suspension, execute, gather_in_order, idempotency_key, new_id, parse_arguments, suspend
from adapter._resume import Answer, Resume
from adapter._tools import FunctionTool, InputRequired, ToolContext, ToolResult, Toolset
from adapter._types import ToolCall

if TYPE_CHECKING:
    from adapter._adapter import Adapter

log = logging.getLogger("adapter.settle")

INPUT_REQUIRED_AGAIN = "INPUT_REQUIRED_AGAIN"


@dataclass(slots=True)
class Settled:
    """The ToolMessages that answer a resumed turn's calls, and any call that must wait again."""

    messages: list[ToolMessage] = field(default_factory=list)
    client_message_ids: set[str] = field(default_factory=set)
    """Messages the client sent itself: already on its side, so not streamed back."""
    suspensions: list[Suspension] = field(default_factory=list)


def _context(run_input: RunAgentInput, call_id: str, *, answer: Any = None, answered: bool = False) -> ToolContext:
    return ToolContext(
        thread_id=run_input.thread_id,
        run_id=run_input.run_id,
        tool_call_id=call_id,
        idempotency_key=idempotency_key(run_input.thread_id, call_id),
        answer=answer,
        answered=answered,
        state=run_input.state,
    )


async def step_calls(
    calls: Sequence[ToolCall], toolset: Toolset, run_input: RunAgentInput, adapter: Adapter
) -> tuple[list[tuple[ToolCall, ToolResult]], list[Suspension]]:
    """Run what can run now, concurrently; suspend the rest. Results keep the calls' order."""
    now = adapter.now()
    results: list[tuple[ToolCall, ToolResult]] = []
    suspensions: list[Suspension] = []
    runnable: list[tuple[ToolCall, FunctionTool]] = []
    for call in calls:
        tool = toolset.get(call.name)
        if tool is None:
            results.append((call, ToolResult(f"There is no tool named {call.name}.", error="unknown_tool")))
        elif tool.external or tool.requires_approval:
            suspensions.append(suspend(call, tool, adapter.policy, now))
        elif isinstance(tool, FunctionTool):
            runnable.append((call, tool))
    outcomes = await gather_in_order([execute(call, tool, _context(run_input, call.id)) for call, tool in runnable])
    for (call, tool), outcome in zip(runnable, outcomes, strict=True):
        if isinstance(outcome, InputRequired):
            suspensions.append(suspend(call, tool, adapter.policy, now, signal=outcome))
        else:
            results.append((call, outcome))
    order = {call.id: index for index, call in enumerate(calls)}
    results.sort(key=lambda pair: order[pair[0].id])
    suspensions.sort(key=lambda s: order[s.pending.tool_call_id])
    return results, suspensions


async def settle_answers(gate: Resume, toolset: Toolset, run_input: RunAgentInput, adapter: Adapter) -> Settled:
    """Turn each answer into the ToolMessage for its call, running the tools an answer allows."""
    settled = Settled()
    for answer in gate.answers:
        if answer.message is not None and answer.call.kind == "frontend":
            settled.messages.append(answer.message)
            settled.client_message_ids.add(answer.message.id)
            continue
        outcome = await _settle_one(answer, toolset, run_input)
        if isinstance(outcome, InputRequired):
            call = ToolCall(answer.call.tool_call_id, answer.call.tool_name, _executed_arguments(answer))
            tool = toolset.get(call.name)
            assert tool is not None
            settled.suspensions.append(suspend(call, tool, adapter.policy, adapter.now(), signal=outcome))
            continue
        settled.messages.append(
            ToolMessage(
                id=new_id("msg"), tool_call_id=answer.call.tool_call_id, content=outcome.content, error=outcome.error
            )
        )
    return settled


def _executed_arguments(answer: Answer) -> str:
    """The arguments the call ran with: an approval's `editedArgs` replaced the proposal whole (RES-3)."""
    payload = answer.payload if isinstance(answer.payload, dict) else {}
    edited = payload.get("editedArgs") if answer.call.kind == "approval" else None
    return json.dumps(edited) if isinstance(edited, dict) else answer.call.arguments


async def _settle_one(answer: Answer, toolset: Toolset, run_input: RunAgentInput) -> ToolResult | InputRequired:
    call = answer.call
    name = call.tool_name
    if answer.status == "cancelled":
        return ToolResult(f"The user cancelled {name}; it was not executed.", error="cancelled")
    if call.kind == "frontend":
        return ToolResult.of(answer.payload)
    tool = toolset.get(name)
    if not isinstance(tool, FunctionTool) or tool.external:
        return ToolResult(f"The tool {name} is no longer available.", error="unknown_tool")
    as_call = ToolCall(call.tool_call_id, name, call.arguments)
    if call.kind == "approval":
        return await _approved(answer, as_call, tool, run_input)
    outcome = await execute(as_call, tool, _context(run_input, call.tool_call_id, answer=answer.payload, answered=True))
    if isinstance(outcome, InputRequired):
        log.error("%s: tool %s asked for input again after receiving it", INPUT_REQUIRED_AGAIN, name)
        return ToolResult(
            f"{name} asked for input again after receiving it; this is a protocol error.", error=INPUT_REQUIRED_AGAIN
        )
    return outcome


async def _approved(
    answer: Answer, call: ToolCall, tool: FunctionTool, run_input: RunAgentInput
) -> ToolResult | InputRequired:
    payload = answer.payload if isinstance(answer.payload, dict) else {}
    if payload.get("approved") is not True:
        return ToolResult(f"The user declined {call.name}; it was not executed.", error="declined")
    edited = payload.get("editedArgs")
    # editedArgs replaces the proposal whole (RES-3); the gate has validated it already.
    arguments = edited if isinstance(edited, dict) else parse_arguments(call.arguments)
    if isinstance(arguments, ToolResult):
        return arguments
    return await execute(call, tool, _context(run_input, call.id), arguments)
