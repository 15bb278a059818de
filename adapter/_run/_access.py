"""Who may do what on a thread: the principal, the thread's owner, the policy between them, and what each sees.

`View` is what a run uses of its input and shows its principal when the policy lets it answer but not
`run` or `read` (a four-eyes approver).

A thread is owned by the principal of the run that created it; a thread created with no principal
stays unowned and open to all. Every request names one action per thing it does:

    read      GET /threads/{id}, Adapter.thread; reattaching to a run (GET .../runs/{runId}/events); each listed thread
    run       a new input (no answers); stopping a run, renaming or deleting the thread (`adapter._sessions._threads`)
    resume    an answer to an interrupt that is not an approval (client tool, form, input); cancel_turn
    approve   an answer to an approval interrupt, approved or not

`Access.check_input` is called once, by the run on the record it loaded (`Run.start`), before any event:
an HTTP run's refusal is still a 403 before the stream opens, and the Python API gets the same policy. A
refusal changes nothing in the store.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

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
from adapter._errors import AdapterError, Forbidden
from adapter._run._gate import answers_missing, answers_required
from adapter._thread._conversation import of_kind
from adapter._thread._record import OpenTurn, PendingCall, ThreadRecord

log = logging.getLogger("adapter.access")

Action: TypeAlias = Literal["read", "run", "resume", "approve"]
Authorize: TypeAlias = Callable[[str | None, str | None, Action], bool | Awaitable[bool]]
"""`authorize(principal, owner, action) -> bool`, sync or async."""


def owner_only(principal: str | None, owner: str | None, action: Action) -> bool:
    """The default policy: an unowned thread is open to all; an owned one only to its owner."""
    return owner is None or principal == owner


@dataclass(frozen=True, slots=True)
class Access:
    """The configured `authorize` policy, applied the same way by every door."""

    authorize: Authorize = owner_only
    _misconfigured: set[str] = field(default_factory=set, init=False, compare=False, repr=False)

    async def allows(self, principal: str | None, owner: str | None, action: Action) -> bool:
        """Ask the policy; only a real `True` allows.

        Anything else refuses: a policy that answers `"no"`, `1` or None is misconfigured, and reading its
        verdict as truthy would open threads to the wrong people. It is logged once per kind of verdict.
        """
        verdict = self.authorize(principal, owner, action)
        if inspect.isawaitable(verdict):
            verdict = await verdict
        if verdict is True:
            return True
        if verdict is not False and type(verdict).__name__ not in self._misconfigured:
            self._misconfigured.add(type(verdict).__name__)
            log.warning("the authorize policy returned a %s, not a bool: refused", type(verdict).__name__)
        return False

    async def require(self, principal: str | None, record: ThreadRecord | None, action: Action) -> None:
        """Raise `Forbidden` unless the policy allows `action` on the thread of `record`.

        A caller that may not read the thread gets one answer, whatever it asked: which action was refused
        would tell it whether an interrupt id is an open or applied approval.

        Raises:
            Forbidden: `APPROVAL_FORBIDDEN` for "approve" on a thread the caller may read, else `THREAD_FORBIDDEN`.
        """
        owner = record.owner if record is not None else None
        if await self.allows(principal, owner, action):
            return
        if action == "read" or not await self.allows(principal, owner, "read"):
            raise Forbidden(f"{_who(principal)} may not use this thread", code=codes.THREAD_FORBIDDEN)
        code = codes.APPROVAL_FORBIDDEN if action == "approve" else codes.THREAD_FORBIDDEN
        raise Forbidden(f"{_who(principal)} may not {action} on this thread", code=code)

    async def admit(self, principal: str | None, record: ThreadRecord | None, actions: Iterable[Action]) -> None:
        """Refuse an outsider before anything of the thread but its owner is read (a door of the thread API).

        An outsider may neither read the thread nor take any of `actions` on it: it gets `require`'s one answer,
        whatever it asked and whatever the thread holds. Which action an answer needs (`answer_action`) depends on
        the open turn, which only an insider may learn about: a door admits first, then asks for each action
        (`check_input`), as a run does.

        Raises:
            Forbidden: `THREAD_FORBIDDEN`, the same for every outsider.
        """
        owner = record.owner if record is not None else None
        for action in ("read", *actions):
            if await self.allows(principal, owner, action):
                return
        raise Forbidden(f"{_who(principal)} may not use this thread", code=codes.THREAD_FORBIDDEN)

    async def check_input(self, principal: str | None, record: ThreadRecord | None, run_input: RunAgentInput) -> None:
        """Check every action `run_input` takes on the thread of `record`.

        Raises:
            Forbidden: The first action the policy refuses.
        """
        await self.check_actions(principal, record, list(input_actions(record, run_input)) or ["run"])

    async def check_actions(
        self, principal: str | None, record: ThreadRecord | None, actions: Iterable[Action]
    ) -> None:
        """Check each of `actions` on the thread of `record`, once each, in the order a refusal names the first.

        Raises:
            Forbidden: The first action the policy refuses.
        """
        for action in sorted(set(actions), key=_ORDER.index):
            await self.require(principal, record, action)


_ORDER: tuple[Action, ...] = ("run", "resume", "approve", "read")


ANSWERS: tuple[Action, ...] = ("resume", "approve")
"""The actions an answer may need: what a door that answers a turn admits a caller for (`Access.admit`)."""


def answer_action(call: PendingCall) -> Action:
    """The permission an answer to `call` needs: "approve" for an approval, "resume" for any other call."""
    return "approve" if call.kind.decided else "resume"


def input_actions(record: ThreadRecord | None, run_input: RunAgentInput) -> Iterator[Action]:
    """The actions of an input's answers: "approve" per approval answered, "resume" for any other answer.

    An entry for an interrupt that is not open is a "resume", unless it replays an applied approval.
    A ToolMessage answers only a non-approval call (approvals come only through `resume`).
    Nothing is yielded for an input without answers: it is a "run".
    """
    turn = record.open_turn if record is not None else None
    replayable = record.applied.approvals if record is not None and record.applied is not None else []
    for entry in run_input.resume or []:
        call = turn.find(entry.interrupt_id) if turn is not None else None
        if call is not None:
            yield answer_action(call)
        else:
            yield "approve" if entry.interrupt_id in replayable else "resume"
    if turn is None:
        return
    answered = {m.tool_call_id for m in of_kind(run_input.messages, ToolMessage)}
    if any(call.tool_call_id in answered and not call.kind.decided for call in turn.pending):
        yield "resume"


def _who(principal: str | None) -> str:
    return "an anonymous caller" if principal is None else "this caller"


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
        if error.code == codes.RESUME_REQUIRED:
            return answers_required(named)
        return answers_missing(named, listed)

    async def _interrupt(self, interrupt: Interrupt, turn: OpenTurn | None) -> Interrupt:
        if await self._answers(turn.find(interrupt.id) if turn is not None else None):
            return interrupt
        return Interrupt(id=interrupt.id, reason=interrupt.reason)

    async def _answers(self, call: PendingCall | None) -> bool:
        """Whether the principal may answer `call`: then it may see what the call asks."""
        if call is None:
            return False
        return await self.access.allows(self.principal, self.owner, answer_action(call))
