"""What a run uses of its input and shows its principal, when that principal may answer but not read or run.

An "approve" or "resume" right implies neither "read" nor "run" (`adapter._access`, the four-eyes
policy of docs/security.md):

- a principal that may not "run" on the thread only answers: its input's messages (tool answers aside),
  context, tools, state and forwarded props are dropped before anything uses them, so they never reach
  the model or the store;
- a principal that may not "read" it sees no content of the thread: of the run's events it gets
  RUN_STARTED and the terminal event; an interrupt it may not answer is shown by id and reason alone; a
  refusal names no interrupt it may not answer.
"""

from __future__ import annotations

from dataclasses import dataclass

from ag_ui.core import (
    BaseEvent,
    Interrupt,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunStartedEvent,
    ToolMessage,
)

from adapter import _errors as codes
from adapter._access import Access, Action
from adapter._errors import AdapterError
from adapter._record import OpenTurn, PendingCall, ThreadRecord

_LIFECYCLE = (RunStartedEvent, RunFinishedEvent, RunErrorEvent)


@dataclass(frozen=True, slots=True)
class View:
    """The principal's rights on the thread of one run, as the policy answered when the run loaded it."""

    access: Access
    principal: str | None
    owner: str | None
    reads: bool = True
    runs: bool = True

    @classmethod
    async def of(cls, access: Access, principal: str | None, record: ThreadRecord | None) -> View:
        """The view of `principal` on the thread of `record`; a new thread is theirs to read and run."""
        if record is None:
            return cls(access, principal, None)
        reads = await access.allows(principal, record.owner, "read")
        runs = await access.allows(principal, record.owner, "run")
        return cls(access, principal, record.owner, reads, runs)

    def used(self, run_input: RunAgentInput) -> RunAgentInput:
        """The input as the run may use it: only its answers, unless the principal may run on the thread."""
        if self.runs:
            return run_input
        answers = [message for message in run_input.messages if isinstance(message, ToolMessage)]
        update = {"messages": answers, "tools": [], "context": [], "state": None, "forwarded_props": None}
        return run_input.model_copy(update=update)

    async def shown(self, event: BaseEvent, turn: OpenTurn | None) -> BaseEvent | None:
        """The event as the principal may see it, or None."""
        if self.reads:
            return event
        if not isinstance(event, _LIFECYCLE):
            return None
        outcome = event.outcome if isinstance(event, RunFinishedEvent) else None
        if not isinstance(outcome, RunFinishedInterruptOutcome):
            return event
        interrupts = [await self._interrupt(interrupt, turn) for interrupt in outcome.interrupts]
        return event.model_copy(update={"outcome": RunFinishedInterruptOutcome(interrupts=interrupts)})

    async def refusal(self, error: AdapterError, turn: OpenTurn | None) -> AdapterError:
        """The error as the principal may see it: no interrupt it may not answer is listed."""
        if self.reads or turn is None or error.code not in (codes.RESUME_INCOMPLETE, codes.RESUME_REQUIRED):
            return error
        wanted = error.details if error.code == codes.RESUME_INCOMPLETE else [c.interrupt_id for c in turn.pending]
        listed = [i for i in wanted or [] if await self._answers(turn.find(str(i)))]
        hidden = len(wanted or []) - len(listed)
        named = ", ".join([*listed, *([f"{hidden} this caller may not see"] if hidden else [])])
        message = f"every open interrupt needs an answer; missing: {named}"
        if error.code == codes.RESUME_REQUIRED:
            message = f"this thread waits for answers to: {named}"
        details = listed if error.code == codes.RESUME_INCOMPLETE else None
        return type(error)(message, code=error.code, details=details)

    async def _interrupt(self, interrupt: Interrupt, turn: OpenTurn | None) -> Interrupt:
        if await self._answers(turn.find(interrupt.id) if turn is not None else None):
            return interrupt
        return Interrupt(id=interrupt.id, reason=interrupt.reason)

    async def _answers(self, call: PendingCall | None) -> bool:
        """Whether the principal may answer `call`: then it may see what the call asks."""
        if call is None:
            return False
        action: Action = "approve" if call.kind == "approval" else "resume"
        return await self.access.allows(self.principal, self.owner, action)
