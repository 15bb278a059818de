"""Which tool call an interrupt gates.

The call is linked through the interrupt's metadata, named by its `toolCallId`, or inferred as the only call
the thread left without a result.

One function, so that the adapter's own version (issue 20, in adapter/backends) can replace it in one place.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

How: TypeAlias = Literal["toolCallId", "metadata", "only open call"]

_LINKS = ("originalFunctionCall", "originalToolCall", "toolCall", "functionCall")
"""Metadata members that hold the gated call, e.g. ADK's `metadata.adk.originalFunctionCall.id`."""


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
    """The call `interrupt` gates, among `calls` (the ids the thread's runs streamed, in order).

    A call linked through metadata wins over `toolCallId`: ADK's interrupt names a confirmation call of its own
    and links the gated one in `metadata.adk.originalFunctionCall.id`. Failing both, the only call in `calls`
    that is not in `answered` (no result yet) and is not the interrupt's own call is taken, marked inferred.
    """
    linked = list(_linked_ids(interrupt.get("metadata")))
    if linked:
        return GatedCall(next((each for each in linked if each in calls), linked[0]), "metadata")
    named = interrupt.get("toolCallId")
    if isinstance(named, str) and named:
        return GatedCall(named, "toolCallId")
    left = [call for call in dict.fromkeys(calls) if call not in answered]
    return GatedCall(left[0], "only open call") if len(left) == 1 else None


def _linked_ids(metadata: Any) -> Iterator[str]:
    if isinstance(metadata, Mapping):
        for key, value in metadata.items():
            if key in _LINKS and isinstance(value, Mapping) and isinstance(value.get("id"), str):
                yield value["id"]
            else:
                yield from _linked_ids(value)
    elif isinstance(metadata, list):
        for value in metadata:
            yield from _linked_ids(value)
