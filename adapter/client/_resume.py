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


def approved(
    interrupt: InterruptRef,
    *,
    edited_args: Mapping[str, Any] | None = None,
    reason: str | None = None,
    remember: bool = False,
) -> dict[str, Any]:
    """An entry that approves a gated call.

    `edited_args` replaces its arguments (a full replacement); `reason` is the person's words for the model (with
    edits it explains them); `remember` allows the tool for the rest of the thread (`"remember": "thread"`), where
    the approval's `responseSchema` offers it.
    """
    payload: dict[str, Any] = {"approved": True}
    if edited_args is not None:
        payload["editedArgs"] = dict(edited_args)
    if reason is not None:
        payload["reason"] = reason
    if remember:
        payload["remember"] = "thread"
    return resolved(interrupt, payload)


def denied(interrupt: InterruptRef, *, reason: str | None = None) -> dict[str, Any]:
    """An entry that denies a gated call: an answer, so the run goes on without running the tool.

    `reason` tells the model why, quoted as data in the call's ToolMessage, so that it does not try the same again.
    """
    return resolved(interrupt, {"approved": False} if reason is None else {"approved": False, "reason": reason})


def cancelled(interrupt: InterruptRef) -> dict[str, Any]:
    """An entry that abandons an interrupt."""
    return {"interruptId": interrupt_id(interrupt), "status": "cancelled"}
