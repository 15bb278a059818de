"""Which tool call an interrupt gates.

The call is linked through the interrupt's metadata, named by its `toolCallId`, or inferred as the only call
the thread left without a result.

What the interrupt itself says is read by the engine's one rule (`adapter.backends._gated.gated_call_ids`, the
backends' door names it); only the inference is the client's.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from ag_ui.core import Interrupt

from adapter.backends._gated import gated_call_ids

How: TypeAlias = Literal["toolCallId", "metadata", "only open call"]


@dataclass(frozen=True, slots=True)
class GatedCall:
    """The call an interrupt is about, and how it was found; `inferred` when it had to be guessed."""

    id: str
    how: How

    @property
    def inferred(self) -> bool:
        """True when no member of the interrupt names the call: it is the only one left open."""
        return self.how == "only open call"


def gated_call(interrupt: Mapping[str, Any], calls: Sequence[str], answered: Collection[str] = ()) -> GatedCall | None:
    """The call `interrupt` (wire JSON) gates, among `calls` (the ids the thread's runs streamed, in order).

    A call linked through metadata wins over `toolCallId`: ADK's interrupt names a confirmation call of its own
    and links the gated one in `metadata.adk.originalFunctionCall.id`. Failing both, the only call in `calls`
    that is not in `answered` (no result yet) is taken, marked inferred.
    """
    named = _named(interrupt)
    if named is not None:
        return named
    left = [call for call in dict.fromkeys(calls) if call not in answered]
    return GatedCall(left[0], "only open call") if len(left) == 1 else None


def _named(interrupt: Mapping[str, Any]) -> GatedCall | None:
    """The call the interrupt itself names, read by the engine's own rule (`adapter.backends.gated_call_ids`)."""
    metadata, tool_call_id = interrupt.get("metadata"), interrupt.get("toolCallId")
    # Built without validation: an interrupt the models refuse (no reason, say) still names its call.
    shape = Interrupt.model_construct(
        id=str(interrupt.get("id")),
        reason=str(interrupt.get("reason")),
        metadata=metadata if isinstance(metadata, dict) else None,
        tool_call_id=tool_call_id if isinstance(tool_call_id, str) and tool_call_id else None,
    )
    named = gated_call_ids(shape)
    if not named:
        return None
    return GatedCall(named[0], "toolCallId" if named[0] == shape.tool_call_id else "metadata")
