"""Resume entries (AG-UI 1.0 `RunAgentInput.resume`) as wire JSON: resolved, approved, denied, cancelled."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeAlias

from ag_ui.core import Interrupt

InterruptRef: TypeAlias = "str | Interrupt | Mapping[str, Any]"
"""An interrupt, by id, as the `ag_ui.core` model, or as its wire JSON."""


def interrupt_id(interrupt: InterruptRef) -> str:
    """The id of an interrupt given any way `InterruptRef` allows."""
    if isinstance(interrupt, str):
        return interrupt
    if isinstance(interrupt, Interrupt):
        return interrupt.id
    return str(interrupt["id"])


def resolved(interrupt: InterruptRef, payload: Any = None) -> dict[str, Any]:
    """An entry that answers an interrupt with `payload` (a client tool's result, a form's data, ...)."""
    return {"interruptId": interrupt_id(interrupt), "status": "resolved", "payload": payload}


def approved(interrupt: InterruptRef, *, edited_args: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """An entry that approves a gated call; `edited_args` replaces its arguments (a full replacement)."""
    payload: dict[str, Any] = {"approved": True}
    if edited_args is not None:
        payload["editedArgs"] = dict(edited_args)
    return resolved(interrupt, payload)


def denied(interrupt: InterruptRef) -> dict[str, Any]:
    """An entry that denies a gated call: an answer, so the run goes on without running the tool."""
    return resolved(interrupt, {"approved": False})


def cancelled(interrupt: InterruptRef) -> dict[str, Any]:
    """An entry that abandons an interrupt."""
    return {"interruptId": interrupt_id(interrupt), "status": "cancelled"}
