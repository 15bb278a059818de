"""How a run ends, each ending stored once and told to the listeners.

It finishes (`_complete`), suspends again with new interrupts (`_suspend`), fails (`_failed`), or its
client leaves (`_left_unfinished`); a replay repeats an ending already stored (`_replay`). `Run` takes
these from `RunEnd`, which names what of the run they read and set.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

from ag_ui.core import (
    BaseEvent,
    Message,
    MessagesSnapshotEvent,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    StateSnapshotEvent,
    ToolMessage,
)
from pydantic import TypeAdapter

from adapter import _errors as codes
from adapter import _telemetry as telemetry
from adapter._answers import Settled
from adapter._calls import CallBudget
from adapter._config import EngineConfig
from adapter._errors import AdapterError, ResumeError
from adapter._events import activity_event, token_usage
from adapter._forms import pending_form
from adapter._gate import Replay
from adapter._interrupts import Suspension
from adapter._lifecycle import TurnEvent, TurnEventType, notify
from adapter._record import OpenTurn
from adapter._record_handle import RecordHandle
from adapter._state import shown_state
from adapter._types import ToolCall, Usage, wire_json

log = logging.getLogger("adapter.runner")

Outcome = RunFinishedSuccessOutcome | RunFinishedInterruptOutcome | RunFinishedCancelledOutcome
_outcome = TypeAdapter[Outcome](Outcome)


class RunEnd:
    """The endings of one run; `Run.__init__` sets what they read (each is documented there)."""

    config: EngineConfig
    input: RunAgentInput
    handle: RecordHandle
    usage: list[Usage]
    resuming: bool
    ended: bool
    settling: asyncio.Future[Settled] | None
    turn_id: str
    budget: CallBudget
    deferred: frozenset[str]
    provisional: dict[str, ToolMessage]
    decided: dict[str, ToolMessage]
    held: OpenTurn | None
    reopened: bool

    async def _suspend(
        self, history: list[Message], state: Any, suspensions: list[Suspension], calls: list[ToolCall]
    ) -> AsyncIterator[BaseEvent]:
        if all(s.outcome == "pending" for s in suspensions):
            # AG-UI's ordinary frontend-tool path: the run succeeds and the client answers in `messages`.
            waiting = [s.pending.call_id for s in suspensions]
            made = [c.id for c in calls if c.id in waiting]
            success = RunFinishedSuccessOutcome(pending_tool_call_ids=[*made, *(c for c in waiting if c not in made)])
            yield await self._complete(success, history)
            return
        pending = [s.pending for s in suspensions]
        turn = OpenTurn(
            turn_id=self.turn_id,
            run_id=self.input.run_id,
            pending=pending,
            state=state,
            counted_calls=sorted(self.budget.counted),
            deferred_calls=sorted(self.deferred),
            provisional_results=list(self.provisional.values()),
        )
        forms = [pending_form(self.turn_id, p.call_id, p.form_key, p.response_schema) for p in pending if p.form_key]
        history.extend(forms)
        outcome = RunFinishedInterruptOutcome(interrupts=[p.interrupt() for p in pending])
        await self.handle.open_turn(turn, history, wire_json(outcome) if self.resuming else None)
        telemetry.opened.add(len(pending))
        self.ended = True
        await self._notify(TurnEventType.TURN_SUSPENDED, [p.interrupt_id for p in pending])
        for form in forms:
            yield activity_event(form)
        # SNAP-1a: the whole history before an interrupt's RUN_FINISHED (SNAP-2: a snapshot is complete, so a
        # run that read only the tail reads the older messages for it).
        older = await self.handle.older_conversation()
        yield MessagesSnapshotEvent(messages=[*older, *history])
        # What the client shows, predictions of waiting calls included.
        shown = shown_state(state, pending, self.config.max_state_bytes)
        if shown is not None:
            yield StateSnapshotEvent(snapshot=shown)
        yield self._finished_event(outcome)

    async def _replay(self, replay: Replay) -> AsyncIterator[BaseEvent]:
        stored = replay.applied.outcome or {}
        if stored.get("type") == "error":
            yield RunErrorEvent(message=str(stored.get("message", "")), code=str(stored.get("code", "")))
            return
        yield self._finished_event(_outcome.validate_python(stored))

    async def _complete(self, outcome: Outcome, history: list[Message]) -> RunFinishedEvent:
        """Store the finished conversation, tell the listeners, and return the RUN_FINISHED that ends the run."""
        resumed = wire_json(outcome) if self.resuming else None
        await self.handle.finish(history, self.input.run_id, resumed)
        self.ended = True
        done = TurnEventType.TURN_CANCELLED if outcome.type == "cancelled" else TurnEventType.TURN_COMPLETED
        await self._notify(done)
        return self._finished_event(outcome)

    async def _failed(self, exc: AdapterError) -> None:
        if isinstance(exc, ResumeError) or self.reopened:
            return  # the turn was refused, not failed: it still waits exactly as before
        if self.resuming:
            outcome = {"type": "error", "code": exc.code, "message": exc.message}
            try:
                await self.handle.record_outcome(self.input.run_id, outcome)
            except Exception:
                log.exception("could not record the failed outcome of run %s", self.input.run_id)
        self.ended = True
        await self._notify(TurnEventType.TURN_FAILED, code=exc.code)

    def _left_unfinished(self) -> None:
        """The client went away mid-run: a resume records that, once its answers are applied.

        Replaying that resume then says what happened, instead of waiting for an outcome that will never come.
        """
        if self.held is not None:
            self.config.background.keep(asyncio.ensure_future(self._reopen()))
            return
        if not self.resuming or self.ended:
            return
        outcome = {
            "type": "error",
            "code": codes.RUN_INTERRUPTED,
            "message": "The answers were applied, but the client left before the run finished. Send a new message.",
        }

        async def record_once_settled() -> None:
            if self.settling is not None:
                await asyncio.wait({self.settling})  # one writer at a time on this run's record
            await self.handle.record_outcome(self.input.run_id, outcome)

        self.config.background.keep(asyncio.ensure_future(record_once_settled()))

    async def _reopen(self) -> None:
        """Give the held turn back: the same interrupts wait, and the same or a corrected resume may come."""
        held, self.held = self.held, None
        if held is not None:
            await self.handle.reopen_turn(held)
            self.reopened = True

    async def _notify(
        self, kind: TurnEventType, interrupt_ids: list[str] | None = None, code: str | None = None
    ) -> None:
        event = TurnEvent(kind, self.input.thread_id, self.turn_id, self.input.run_id, tuple(interrupt_ids or ()), code)
        await notify(self.config.listeners, event)

    def _finished_event(self, outcome: Outcome) -> RunFinishedEvent:
        """The RUN_FINISHED event for `outcome`, with the run's token usage."""
        return RunFinishedEvent(
            thread_id=self.input.thread_id, run_id=self.input.run_id, outcome=outcome, usage=token_usage(self.usage)
        )
