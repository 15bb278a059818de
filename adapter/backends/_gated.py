"""Which tool calls an upstream's interrupt gates: the one place that reads a framework's link to them.

An interrupt may name its gated call by `toolCallId` (Pydantic AI, Strands, LangGraph), through its
metadata (ag-ui-adk names a separate `adk_request_confirmation` call in `toolCallId` and the gated
call in `metadata.adk.originalFunctionCall.id`), or not at all (ag-ui-crewai). The engine's rule
does not depend on it (every call an upstream leaves open when it interrupts stays open), but what
to answer a separate confirmation call with does, and so do the conformance checks.
"""

from __future__ import annotations

from typing import Any

from ag_ui.core import Interrupt


def gated_call_ids(interrupt: Interrupt) -> list[str]:
    """The ids of the tool calls `interrupt` holds for a person's answer, as far as it says.

    The metadata link wins over `toolCallId`: there `toolCallId` names the confirmation call the
    upstream opened to ask. An interrupt that names no call gates none that can be told (an empty
    list); the calls its upstream left open stay open all the same.
    """
    linked = _adk_original_call(interrupt.metadata)
    if linked is not None:
        return [linked]
    return [interrupt.tool_call_id] if interrupt.tool_call_id else []


def confirmation_call_id(interrupt: Interrupt) -> str | None:
    """The call the upstream opened only to ask for this answer, when its interrupt names one apart."""
    if interrupt.tool_call_id and interrupt.tool_call_id not in gated_call_ids(interrupt):
        return interrupt.tool_call_id
    return None


def _adk_original_call(metadata: Any) -> str | None:
    """ag-ui-adk's link: `metadata.adk.originalFunctionCall.id` (ag-ui-adk 0.11, `emit_interrupt_outcome`)."""
    adk = metadata.get("adk") if isinstance(metadata, dict) else None
    original = adk.get("originalFunctionCall") if isinstance(adk, dict) else None
    call_id = original.get("id") if isinstance(original, dict) else None
    return call_id if isinstance(call_id, str) and call_id else None
