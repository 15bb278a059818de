"""Which tool call an interrupt gates.

The call is linked through the interrupt's metadata, named by its `toolCallId`, or inferred as the only call
the thread left without a result.

`_named` reads what the interrupt itself says, by the same rule as issue 20's `adapter._gated.gated_call_ids`
(not on main yet): once it is, `_named` calls it and only the inference stays here.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

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
    """The call the interrupt itself names: the same rule as the engine's reading of an upstream's interrupt."""
    metadata = interrupt.get("metadata")
    adk = metadata.get("adk") if isinstance(metadata, Mapping) else None
    original = adk.get("originalFunctionCall") if isinstance(adk, Mapping) else None
    linked = original.get("id") if isinstance(original, Mapping) else None
    if isinstance(linked, str) and linked:
        return GatedCall(linked, "metadata")
    named = interrupt.get("toolCallId")
    return GatedCall(named, "toolCallId") if isinstance(named, str) and named else None
