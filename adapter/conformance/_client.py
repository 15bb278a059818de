"""The kit's client: `adapter.client`, non-strict, recording every exchange for the stream-wide cases.

What it records is bounded in total by what it really holds (`held`), not only per stream: past `KEPT_BYTES`, the
oldest exchanges are forgotten down to what the stream-wide cases read of them (the run's lifecycle events and its
problems), so a target that answers every case with 64 MiB keeps the kit near that figure, not 20 times it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

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
from adapter.conformance._held import held

KEPT_BYTES: Final = 256 * 1024 * 1024
"""What the recorded exchanges may hold in all, measured as held; the case in progress holds its own runs too."""
_LIFECYCLE = frozenset({"RUN_STARTED", "RUN_FINISHED", "RUN_ERROR"})

Event: TypeAlias = dict[str, Any]
Reply: TypeAlias = Run

__all__ = ["Client", "Event", "Exchange", "Reply", "Target", "Thread", "cancelled", "new_id", "resolved"]


@dataclass
class Exchange:
    """One request the kit made and what came back, kept for the stream-wide cases."""

    case: str
    body: dict[str, Any]
    reply: Run
    size: int = 0
    """What the exchange holds (`held`), counted once it is recorded."""
    forgotten: bool = False
    """True once only its lifecycle events and problems are kept (past `KEPT_BYTES`)."""

    @property
    def resumed(self) -> bool:
        """True when the request carried resume entries or answered calls (AGUI207 is then a false positive)."""
        return bool(self.body.get("resume")) or any(m.get("role") == "tool" for m in self.body.get("messages", []))

    def forget(self) -> None:
        """Keep only what the stream-wide cases read without the events: the lifecycle events and the problems."""
        reply = self.reply
        kept = Run({}, status=reply.status, headers=reply.headers, problems=list(reply.problems))
        kept.wire = [event for event in reply.wire if event.get("type") in _LIFECYCLE]
        kept.stopped = reply.stopped
        self.body = {"resume": [True]} if self.resumed else {}
        self.reply, self.forgotten = kept, True
        self.size = held(self.body) + held(kept)


class Client(AGUIClient):
    """Posts run inputs to one target and records every exchange.

    It raises for nothing the target answers, but a stream past its `StreamLimits` (by default with the kit's
    `timeout` as `event_timeout`): `StreamLimitExceeded`, which fails the case that sent it.
    """

    def __init__(
        self, target: Target, *, timeout: float = 60.0, limits: StreamLimits | None = None, kept_bytes: int = 0
    ) -> None:
        limits = limits or StreamLimits(event_timeout=timeout)
        super().__init__(target, timeout=timeout, strict=False, limits=limits)
        self.exchanges: list[Exchange] = []
        self.case = ""
        self.kept_bytes = kept_bytes or KEPT_BYTES
        self.kept = 0
        """What the exchanges hold, in all."""

    async def run(self, run_input: RunInput) -> Run:
        """POST one input and read the whole answer; the exchange is recorded under the current case."""
        try:
            run = await super().run(run_input)
        except StreamLimitExceeded as error:
            self._record(Exchange(self.case, error.run.input, error.run))
            raise
        self._record(Exchange(self.case, run.input, run))
        return run

    def _record(self, exchange: Exchange) -> None:
        """Keep the exchange; past `kept_bytes`, forget the oldest ones (the newest last, once it is no longer new)."""
        exchange.size = held(exchange.body) + held(exchange.reply)
        self.exchanges.append(exchange)
        self.kept += exchange.size
        for older in self.exchanges:
            if self.kept <= self.kept_bytes:
                break
            if not older.forgotten:
                self.kept -= older.size
                older.forget()
                self.kept += older.size

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
