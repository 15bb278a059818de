"""The kit's client: `adapter.client`, non-strict, recording every exchange for the stream-wide cases."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from adapter.client import (
    SERVER_ROLES,
    AGUIClient,
    Run,
    StreamLimitExceeded,
    StreamLimits,
    Target,
    Thread,
    cancelled,
    new_id,
    resolved,
)
from adapter.client._client import RunInput

Event: TypeAlias = dict[str, Any]
Reply: TypeAlias = Run

__all__ = ["Client", "Event", "Exchange", "Reply", "Target", "Thread", "cancelled", "new_id", "resolved"]


@dataclass
class Exchange:
    """One request the kit made and what came back, kept for the stream-wide cases."""

    case: str
    body: dict[str, Any]
    reply: Run

    @property
    def resumed(self) -> bool:
        """True when the request carried resume entries or answered calls (AGUI207 is then a false positive)."""
        return bool(self.body.get("resume")) or any(m.get("role") == "tool" for m in self.body.get("messages", []))


class Client(AGUIClient):
    """Posts run inputs to one target and records every exchange.

    It raises for nothing the target answers, but a stream past its `StreamLimits` (by default with the kit's
    `timeout` as `event_timeout`): `StreamLimitExceeded`, which fails the case that sent it.
    """

    def __init__(self, target: Target, *, timeout: float = 60.0, limits: StreamLimits | None = None) -> None:
        limits = limits or StreamLimits(event_timeout=timeout)
        super().__init__(target, timeout=timeout, strict=False, limits=limits)
        self.exchanges: list[Exchange] = []
        self.case = ""

    async def run(self, run_input: RunInput) -> Run:
        """POST one input and read the whole answer; the exchange is recorded under the current case."""
        try:
            run = await super().run(run_input)
        except StreamLimitExceeded as error:
            self.exchanges.append(Exchange(self.case, error.run.input, error.run))
            raise
        self.exchanges.append(Exchange(self.case, run.input, run))
        return run

    async def post(self, body: Mapping[str, Any]) -> Run:
        """POST a body outside any thread's bookkeeping (a replay, a concurrent copy)."""
        return await self.run(body)

    def thread(
        self,
        *,
        tools: Sequence[Mapping[str, Any]] = (),
        thread_id: str | None = None,
        drop_roles: frozenset[str] = SERVER_ROLES,
    ) -> Thread:
        """A conversation on a fresh thread; activity and reasoning messages stay with the server."""
        return super().thread(tools=tools, thread_id=thread_id or new_id("conformance-thread"), drop_roles=drop_roles)
