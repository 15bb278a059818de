"""The turn engine: one run, from the resume gate to the terminal event.

    gate (_gate) -> replay, or apply answers (_answers) -> model loop: translate the backend's
    stream (_translate), run or suspend its calls (_calls, _interrupts) -> suspend or finish

Every run is a fresh `Run` over the adapter's frozen `EngineConfig`: nothing about a request lives
on the adapter. The stored record is read and written through one `RecordHandle`. `Run` is one class:
its start (`start`: the load, the policy, the tools, each refusal raised before any event), its gate
and resume, its model loop (model steps, each streamed and its calls run or suspended, until the model
answers without calls, a call waits, or `max_steps` runs out) and its endings. Where it is is one named
`Phase` (settling, running, suspended, finished, failed, given back, left); what its turn carries from
phase to phase is one immutable `Turn`, replaced as the run moves on.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Final, Protocol

from ag_ui.core import (
    PROTOCOL_VERSION,
    AssistantMessage,
    BaseEvent,
    CustomEvent,
    Message,
    MessagesSnapshotEvent,
    ResumeEntry,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    StateSnapshotEvent,
    ToolMessage,
)
from pydantic import TypeAdapter

from adapter import _errors as codes
from adapter import _telemetry as telemetry
from adapter._compat import CARRY_1_1, downgraded, speaks_1_1, without_1_1
from adapter._errors import AdapterError, BackendError, Forbidden, InputRejected, ResumeError
from adapter._ids import new_id
from adapter._jsonpatch import WORK_FACTOR, StateWork
from adapter._run._access import View
from adapter._run._answers import (
    Settled,
    decided_answers,
    granted_record,
    resumed_provisional,
    runs_nothing,
    settle_answers,
)
from adapter._run._calls import CallBudget, CallScope, StepCalls, run_calls, tool_message
from adapter._run._config import EngineConfig
from adapter._run._events import TurnEvent, TurnEventType, activity_event, notify, result_event, token_usage
from adapter._run._forms import pending_form
from adapter._run._gate import Replay, Resume, check_resume, passed_over, with_lapsed_outcome
from adapter._run._interrupts import Suspension, backend_suspension, open_call_suspension
from adapter._run._stop import StopSignal, stopped_before
from adapter._run._tools import Toolset, client_toolset
from adapter._run._translate import Step, backend_items, model_request, step_end, step_events
from adapter._state._predict import Predictor
from adapter._state._shared import commit, resumed_state, shown_state
from adapter._thread._conversation import declared_tail, of_kind
from adapter._thread._handle import RecordHandle
from adapter._thread._record import Grant, OpenTurn, ThreadRecord, default_title
from adapter._types import wire_json
from adapter._wire import event_json
from adapter.backends._seam import ModelRequest, ToolCall, Usage
from adapter.stores import JournalAppend, JournalEvent, StoreUnavailable
from adapter.stores._protocol import merges_appends

log = logging.getLogger("adapter.runner")

WARNING_EVENT: Final = "adapter.warning"
"""The name of the CUSTOM event that carries a warning about the input (a 1.0 client passes CUSTOM events by)."""
_STORE_DOWN = "The store could not be used; what this run changed may not be stored. Read the thread before retrying."

Outcome = RunFinishedSuccessOutcome | RunFinishedInterruptOutcome | RunFinishedCancelledOutcome
_outcome = TypeAdapter[Outcome](Outcome)

JournalNamer = Callable[[str, str | None], str | None]
"""Names the journal a run id opens first in a life of its thread (`Journals.first_name`); None: none is kept."""


class Phase(enum.Enum):
    """Where a run is. A run moves forward only; each ending is stored once and told to the listeners."""

    STARTING = "starting"
    """Before the gate: nothing of the thread changed yet."""
    SETTLING = "settling"
    """A resume's answers are being applied under a claim; they are applied to the end, whoever reads the run."""
    RUNNING = "running"
    """The model loop: model steps, each streamed and its calls run or suspended."""
    SUSPENDED = "suspended"
    """Ended: the turn waits for its answers (stored as an open turn)."""
    FINISHED = "finished"
    """Ended: the model answered, or ran out of steps (stored as finished)."""
    FAILED = "failed"
    """Ended with a RUN_ERROR (a resume's failure is stored as its outcome)."""
    GIVEN_BACK = "given back"
    """The backend refused the answers forwarded to its interrupts, or was unreachable: the turn waits as before."""
    LEFT = "left"
    """Cut before an ending (the adapter closing, the journal full); a resume records it once its answers applied."""
    STOPPED = "stopped"
    """Ended by a stop request before a resume applied its answers: none were, and the turn waits as before."""

    @property
    def ended(self) -> bool:
        """Whether the run's ending is stored (or, stopped before it applied anything, has nothing to store)."""
        return self in (Phase.SUSPENDED, Phase.FINISHED, Phase.FAILED, Phase.STOPPED)


_NO_MESSAGES: Final[Mapping[str, ToolMessage]] = MappingProxyType({})
"""The one empty mapping every `Turn` without provisional or decided answers shares: a read-only view of nothing."""


def _frozen(messages: Mapping[str, ToolMessage] | None = None) -> Mapping[str, ToolMessage]:
    return MappingProxyType(dict(messages)) if messages else _NO_MESSAGES


@dataclass(frozen=True, slots=True)
class Turn:
    """What one turn carries from phase to phase: replaced as the run moves on, never changed."""

    turn_id: str
    budget: CallBudget
    """The tool calls this turn has made."""
    resumed: bool = False
    """The run resumes a stored turn: its ending is recorded, so replaying the resume tells what happened."""
    deferred: frozenset[str] = frozenset()
    """Calls the backend deferred while its interrupt about them waits: kept unanswered for it."""
    provisional: Mapping[str, ToolMessage] = field(default_factory=_frozen)
    """What stands for some of those calls unless the backend answers them (`adapter._run._answers`)."""
    decided: Mapping[str, ToolMessage] = field(default_factory=_frozen)
    """The person's answers to the interrupts that named those calls: each stands if the backend leaves it open."""
    held: OpenTurn | None = None
    """The turn whose answers to the backend's own interrupts are being forwarded, claimed until it accepts them."""

    @classmethod
    def resuming(cls, gate: Resume, max_tool_calls: int | None) -> Turn:
        """The stored turn that `gate` lets this run resume, with the answers' bearing on its deferred calls."""
        stored = gate.turn
        return cls(
            stored.turn_id,
            CallBudget(max_tool_calls, frozenset(stored.counted_calls)),
            resumed=True,
            deferred=frozenset(stored.deferred_calls),
            provisional=_frozen(resumed_provisional(stored, gate.answers)),
            decided=_frozen(decided_answers(stored, gate.answers)),
        )

    def after(self, step: Step) -> Turn:
        """The turn once `step` is taken over: its deferred calls and provisional results; forwarded answers spent."""
        # Built directly: `dataclasses.replace` reads the fields' plan at every call (twice a round trip).
        return Turn(
            self.turn_id,
            self.budget,
            resumed=self.resumed,
            deferred=frozenset(step.deferred),
            provisional=_frozen(step.provisional),
            decided=self.decided,
        )


class EndingJournal(Protocol):
    """What a run asks of the journal that drives it (`adapter._sessions._journal.LiveRun`), at its ends only.

    The journal holds the ending back from every reader until the run's last save is done, and hands that save
    its last batch: one store call. A resume's journal opens likewise with its claim (`opening`). A protocol,
    because the journal drives the run, not the other way round.
    """

    async def opening(self) -> JournalAppend | None:
        """The journal's first batch for the resume's claim; None when the journal is open already."""
        ...

    def opened(self, stored: bool | None) -> None:
        """The claim is done: its batch stored (True), not (False), or unknown (None)."""
        ...

    async def open_alone(self) -> None:
        """Open the journal with an append of its own, if it is not open yet (the run claims nothing)."""
        ...

    async def seal(self, ending: Sequence[BaseEvent]) -> JournalAppend | None:
        """The journal's last batch for the last save; None when the journal cannot seal (two calls then)."""
        ...

    def unseal(self, stored: bool | None) -> None:
        """The last save is done: its batch stored (True), not (False), or unknown (None)."""
        ...


class Run:
    """One run of the agent for one `RunAgentInput`."""

    def __init__(self, config: EngineConfig, run_input: RunAgentInput, principal: str | None = None) -> None:
        self.config = config
        self.input = run_input
        self.principal = principal
        """Who sent the input (`adapter._run._access`); a thread this run creates is theirs."""
        self.handle = RecordHandle(config.threads, run_input.thread_id, principal=principal, may_join=self._may_join)
        self.view = View(config.access, principal, None)
        """What the principal may see of this run, and use of its input (`adapter._run._access`)."""
        self.usage: list[Usage] = []
        self.open_step: Step | None = None
        self.span = telemetry.NULL_SPAN
        """The run's span (`agui.run`), the parent of every span the run starts."""
        self.older_calls: set[str] | None = None
        """The call ids of the thread before the tail this run read (`_check_older_calls`), once read."""
        self.phase = Phase.STARTING
        self.turn = Turn(new_id("turn"), CallBudget(config.max_tool_calls))
        self.state_work = StateWork(WORK_FACTOR * config.max_state_bytes)
        """The state copying no patch accounts for, over the whole run (`adapter._jsonpatch`)."""
        self.tail = declared_tail(config.history_view) if config.history == "server" else None
        """With a server-kept history and a view that needs only a tail: how many stored messages a new run reads."""
        self.speaks_1_1 = speaks_1_1(run_input.protocol_version)
        """Whether the peer reads what AG-UI 1.1 adds; else its events go without it (`adapter._compat`)."""
        self.unversioned = run_input.protocol_version is None
        """The peer is older than AG-UI 1.0 (its input names no version): its events are downgraded (`_compat`)."""
        self.as_made = self.speaks_1_1 and not self.unversioned
        """The peer reads every event as the run made it (`_sent` changes none): the usual case."""
        self.journal: EndingJournal | None = None
        """The run's journal, as this replica drives it (`bind_journal`): the run's last save carries its last batch."""
        self.stop = StopSignal()
        """Raised by a stop request (`adapter._run._stop`): the run ends, cancelled, at its next safe point."""
        self.started = RunStartedEvent(
            thread_id=run_input.thread_id,
            run_id=run_input.run_id,
            parent_run_id=run_input.parent_run_id,
            protocol_version=PROTOCOL_VERSION,
        )
        """The run's first event: stored with the thread this run creates, when it does (`_read_or_create`)."""
        self.opened: str | None = None
        """The journal whose RUN_STARTED the store call that created the thread wrote (`open_journal`)."""
        self.stored = 0
        """How many of the history's first messages the store holds as they are: each save is given the rest."""

    async def _may_join(self, owner: str | None) -> bool:
        """Whether this run may store into the thread another request created meanwhile (owned by `owner`)."""
        return await self.config.access.allows(self.principal, owner, "run")

    async def start(self, journal_of: JournalNamer | None = None) -> AsyncGenerator[list[BaseEvent], None]:
        """Read the thread, authorize the input and build the run's tools; then the run's events, not yet started.

        The events come in runs (lists), RUN_STARTED alone first: the journal's reader takes each run in a plain loop,
        not one generator step per event through each of the run's layers (docs/benchmarks.md, "The stream, round
        three"). `journal_of` names the journal the run opens first in a life of its thread (`Journals.first_name`):
        a thread this run creates is stored with its RUN_STARTED in the store call that reads it (`_read_or_create`).

        Everything that can refuse the run happens here, before any event and before anything is stored; the events
        then go from RUN_STARTED to exactly one terminal event, and fail only after RUN_STARTED.

        Raises:
            StoreUnavailable: When the thread cannot be read (or created: then it may have been); nothing changed.
            Forbidden: When the `authorize` policy refuses the input; nothing changed.
            InputRejected: When the client's tools are over the adapter's limits (`LimitExceeded`), clash by
                name (`ToolNameConflict`) or have a schema the policy refuses (`InvalidClientTool`); nothing changed.
        """
        messages = self.tail is None  # with a tail: the head, then `_messages`
        if self.input.resume:  # a resume never creates its thread
            record = await self.handle.load(messages=messages)
            return self._events(record, await self._admit(record))
        record, toolset = await self._read_or_create(messages, journal_of)
        return self._events(record, toolset)

    async def _admit(self, record: ThreadRecord | None, built: Toolset | None = None) -> Toolset:
        """Decide what can refuse the run on the thread of `record`: the policy, the view, the client's tools.

        `built` is the toolset already built from this input's tools, used again when the view leaves them in it.

        Raises:
            Forbidden, InputRejected: As `start`.
        """
        asked = self.input
        await self.config.access.check_input(self.principal, record, asked)
        self.view = await View.of(self.config.access, self.principal, record)
        self.input = self.view.used(asked)
        if built is not None and self.input is asked:
            return built
        return await client_toolset(
            self.config.tools,
            self.input.tools or [],
            client_policy=self.config.client_tool_policy,
            limits=self.config.client_tool_limits,
        )

    async def _read_or_create(
        self, messages: bool, journal_of: JournalNamer | None
    ) -> tuple[ThreadRecord | None, Toolset]:
        """A new run's thread, read; or, when it is absent, created by the same store call (docs/stores.md).

        The run is decided first as on a thread not there yet, which is what it meets when it creates the thread:
        only then is anything stored, and nothing of a refused run is. A thread found is decided again, as it is (the
        policy is asked of the absent thread, then of the stored one), and the run goes on as on a thread it read:
        its journal opens with a call of its own. When the absent thread's decision refuses, the thread is only
        read: a thread found is decided as it is, and a thread not there is refused as it was.
        """
        asked = self.input
        try:
            toolset = await self._admit(None)
        except (Forbidden, InputRejected) as refusal:
            self.input = asked
            record = await self.handle.load(messages=messages)
            if record is None:
                raise refusal from None
            return record, await self._admit(record)
        # Stored before the first event, so that a reattach anywhere knows whose the thread is, and a listing shows
        # it while its first answer streams: its journal's RUN_STARTED in the same call, unless nothing is journaled.
        name = journal_of(self.input.run_id, self.handle.incarnation) if journal_of is not None else None
        opening = None if name is None else JournalAppend(name, [JournalEvent(1, event_json(self.started))])
        title = default_title(self.input.messages)
        record, created = await self.handle.load_or_create(title, opening, messages=messages)
        if record is None:
            self.opened = name if created else None
            return None, toolset
        return record, await self._admit(record, toolset)

    async def open_journal(self, journal: str, first: JournalEvent) -> bool:
        """Write the journal's first event (`Journals.begin`), unless the store call that created the thread did.

        A resume of a waiting turn writes nothing here (False): its claim carries the event (`_claim_opening`),
        or, when it claims nothing, it opens the journal alone once its gate decided.

        Raises:
            ValueError: That journal exists (a run id used again); nothing was stored.
            StoreUnavailable: As the store's calls; the run's events are closed then, and it never started.
        """
        if journal == self.opened:
            return True  # written with the thread's creation (`_read_or_create`)
        if self._claims_later():
            return False
        await self.config.store.append_events(self.input.thread_id, journal, [first])
        return True

    def _claims_later(self) -> bool:
        """Whether the run answers a waiting turn, and may carry its journal's opening with its claim.

        Not under the waiting run's own id (CopilotKit resumes so): its first attempt is that run's journal, and
        the merged call would be refused for it.
        """
        waiting = self.handle.record.open_turn
        resumes = bool(self.input.resume) and waiting is not None and waiting.run_id != self.input.run_id
        return resumes and merges_appends(self.config.store)

    def bind_journal(self, live: EndingJournal) -> None:
        """Take the journal `Journals.begin` opened for this run: its ending is stored with its last save."""
        self.journal = live

    async def _events(self, record: ThreadRecord | None, toolset: Toolset) -> AsyncGenerator[list[BaseEvent], None]:
        yield [self.started]
        thread_id, run_id = self.input.thread_id, self.input.run_id
        self.span = span = telemetry.start("agui.run", thread_id, run_id)
        outcome, code = "left", None  # cut before the end, unless said otherwise below
        try:
            # Closed here, not left to the collector: a generator dropped suspended costs the loop a task to close.
            async with aclosing(await self._run(record, toolset)) as stream:
                async for made in stream:
                    run = made if self.as_made else [self._sent(event) for event in made]
                    last = run[-1] if run else None
                    if isinstance(last, RunFinishedEvent):  # a run's terminal event is the last of its last run
                        outcome = last.outcome.type if last.outcome is not None else "success"
                    if self.view.reads:  # the usual case: every event as it is, without a call per event
                        yield run
                        continue
                    open_turn = self.handle.record.open_turn
                    yield [shown for event in run if (shown := await self.view.shown(event, open_turn)) is not None]
        except (GeneratorExit, asyncio.CancelledError):
            await self._leave()
            raise
        except Exception as exc:
            await self._open_alone()
            error = self._reported(exc)
            outcome, code = "error", error.code
            async for event in self._error_events(error):
                yield [self._sent(event)]
        finally:
            telemetry.finish(span, outcome, code)

    def _sent(self, event: BaseEvent) -> BaseEvent:
        """`event` as this run's peer reads it: without what AG-UI 1.1 adds for a 1.0 peer, downgraded for an older one.

        Applied to an event twice, it gives the same event (a sealed ending passes here again: `_store_ending`).
        """
        if event.type in CARRY_1_1 and not self.speaks_1_1:
            event = without_1_1(event)
        return downgraded(event) if self.unversioned else event

    def _reported(self, exc: Exception) -> AdapterError:
        """What the client is told of a failure: an `AdapterError` as is, anything else without its internals."""
        if isinstance(exc, StoreUnavailable):  # its message says which failure, never a path or a DSN
            log.warning("run %s on thread %s: %s", self.input.run_id, self.input.thread_id, exc)
            exc = AdapterError(f"{_STORE_DOWN} ({exc})", code=codes.STORE_UNAVAILABLE)
        if not isinstance(exc, AdapterError):
            log.exception("run %s on thread %s failed", self.input.run_id, self.input.thread_id)
            exc = AdapterError("The run failed with an internal error.")  # internals never reach the client
        if isinstance(exc, ResumeError):
            telemetry.refusals.add(1, {"agui.error_code": exc.code})
            if exc.code == codes.RESUME_EXPIRED:
                telemetry.expired.add(1)
        return exc

    async def _error_events(self, exc: AdapterError) -> AsyncIterator[BaseEvent]:
        """End what the failed step left open, store the failure, and end the run with its RUN_ERROR."""
        for event in self._close_open():
            if self.view.reads:
                yield event
        await self._failed(exc)
        exc = await self.view.refusal(exc, self.handle.record.open_turn)
        details = {"details": exc.details} if exc.details is not None else None
        yield RunErrorEvent(message=exc.message, code=exc.code, metadata=details, usage=token_usage(self.usage))

    async def _run(self, record: ThreadRecord | None, toolset: Toolset) -> AsyncGenerator[list[BaseEvent], None]:
        """Pass the resume gate and load what the run needs; then its events, which `_events` reads directly.

        It returns the stream rather than yielding from it: one generator less for every event to pass through.
        """
        passed: tuple[str, ...] = ()
        if self.config.unknown_resume_entries == "warn":
            self.input, passed = passed_over(record, self.input)
        if passed:
            return _warned(passed, await self._gated(record, toolset))
        return await self._gated(record, toolset)

    async def _gated(self, record: ThreadRecord | None, toolset: Toolset) -> AsyncGenerator[list[BaseEvent], None]:
        """The resume gate's verdict on the input, and the stream it leads to."""
        span = telemetry.start("agui.resume_gate", self.input.thread_id, self.input.run_id, self.span)
        try:
            gate = await check_resume(
                record,
                self.input,
                now=self.config.now(),
                claim_lease=self.config.claim_lease,
                edited_args_schemas=self.config.tool_schemas(),
                grantable=self.config.grantable(),
            )
        except ResumeError as refused:
            telemetry.finish(span, "refused", refused.code)
            raise
        telemetry.finish(span, type(gate).__name__.lower() if gate is not None else "new")
        gate = await with_lapsed_outcome(gate, self.handle)  # a replay past the lease records its final outcome, once
        if not isinstance(gate, Resume):
            await self._open_alone()
        await self._messages(gate)
        if isinstance(gate, Replay):
            telemetry.duplicates.add(1)
            return self._replay(gate)
        if isinstance(gate, Resume):
            return self._resume(gate, toolset)
        history, self.stored = await self.handle.history(
            self.input.messages, server_kept=self.config.history == "server"
        )
        await self._notify(TurnEventType.TURN_STARTED)
        self.phase = Phase.RUNNING
        return self._model_loop(history, self.input.state, toolset)

    async def _messages(self, gate: Resume | Replay | None) -> None:
        """With a tail, read the messages the gate's choice needs: a new run the tail, a resume the whole thread."""
        if self.tail is not None and gate is None:
            await self.handle.load_tail(self.tail, self.input.messages)
        elif self.tail is not None and isinstance(gate, Resume):
            await self.handle.load_same()

    async def _resume(self, gate: Resume, toolset: Toolset) -> AsyncGenerator[list[BaseEvent], None]:
        self.turn = Turn.resuming(gate, self.config.max_tool_calls)
        if self.stop.requested:  # stopped before it applied anything: it applies nothing, and the turn waits
            await self._open_alone()
            self.phase = Phase.STOPPED
            yield [self._stop_event(self._finished_event(RunFinishedCancelledOutcome()))]
            return
        history, held = self.handle.resumed_history(self.input.messages)
        self.stored = len(history)
        if not held:
            # SNAP-1b: the client's messages lack part of the thread, so the results below would answer calls it
            # does not know (RES-2); a client that sent the whole thread needs no restatement.
            yield [MessagesSnapshotEvent(messages=history)]
        self.phase = Phase.SETTLING
        settled = await self._apply(gate, toolset, history)
        self.phase = Phase.RUNNING
        for activity in settled.activities:
            yield [activity_event(activity)]
        for message in settled.messages:
            if message.id not in settled.client_message_ids:
                yield [result_event(message)]
        for decision in settled.decisions:  # after the results, as they are stored
            yield [activity_event(decision)]
        if settled.edited:
            yield [MessagesSnapshotEvent(messages=history)]  # the calls now show the arguments that ran
        state, changes = resumed_state(gate.turn, settled.kept, self.config.max_state_bytes)
        for change in changes:
            yield [change]
        if settled.suspensions:
            yield await self._suspend(history, state, settled.suspensions, [])
            return
        async with aclosing(self._model_loop(history, state, toolset, settled.forward)) as stream:
            async for run in stream:
                yield run

    async def _apply(self, gate: Resume, toolset: Toolset, history: list[Message]) -> Settled:
        """Claim the turn, apply the answers and store the result.

        The run's driver owns the run past its client (`adapter._sessions._journal`), and a stop waits for the next safe
        point, so once a claim is made the answers are applied to the end: a tool never runs half-way through a
        resume and never runs twice.
        """
        held = gate.turn.claimed_by is not None  # claimed by a run whose lease ran out: the gate let it pass
        if runs_nothing(gate):  # nothing to order after the claim: claim and store the answers in one save
            return await self._settle_pure(gate, toolset, history, held)
        now = self.config.now()
        claimed, applied = gate.claimed(self.input.run_id, now)
        made = gate.grants(self.principal, now)
        await self._claim_opening(lambda journal: self.handle.claim(claimed, applied, made, journal))
        await self._resumed(gate, held)
        return await self._settle_and_store(gate, toolset, history)

    async def _claim_opening(self, claim: Callable[[JournalAppend | None], Awaitable[None]]) -> None:
        """Store the claim, with the journal's first batch when the run put its opening off: one store call.

        Its RUN_STARTED reaches no reader before the claim commits, so a client that saw it finds the journal (a
        stop, a reattach) on every replica. A refused claim wrote nothing of the batch: the journal opens alone
        then, before the refusal's RUN_ERROR. An attempt an earlier run of this id holds (a run id used again)
        refuses the batch too: the journal opens alone, under the next attempt, and the claim is stored alone.
        """
        journal = self.journal
        opening = await journal.opening() if journal is not None else None
        if journal is None or opening is None:
            await claim(None)
            return
        stored: bool | None = None  # cut while it waited for the store: it may have landed
        try:
            await claim(opening)
            stored = True
        except ValueError:  # the journal's attempt is an earlier run's: nothing was stored
            stored = False
        except StoreUnavailable:
            raise
        except Exception:  # refused: nothing was stored
            stored = False
            raise
        finally:
            journal.opened(stored)
        if not stored:
            await journal.open_alone()
            await claim(None)

    async def _open_alone(self) -> None:
        """Open the journal the run put off for its claim, with an append of its own: it claims nothing."""
        if self.journal is not None:
            await self.journal.open_alone()

    async def _resumed(self, gate: Resume, held: bool) -> None:
        """Count and announce a stored claim (`held`: it took over a lapsed one)."""
        telemetry.answered.add(len(gate.answers))
        if held:
            telemetry.takeovers.add(1)
        await self._notify(TurnEventType.TURN_RESUMED, [a.call.interrupt_id for a in gate.answers])

    async def _settle_pure(self, gate: Resume, toolset: Toolset, history: list[Message], held: bool) -> Settled:
        """Settle answers that run nothing, then claim the turn and close it in one save (`runs_nothing`)."""
        settled = await settle_answers(gate, self._scope(toolset))
        assert not settled.forward and not settled.suspensions  # what `runs_nothing` promises
        settled.apply_to(history, self.turn.turn_id, self.config.now(), self.principal)
        applied = gate.applied(self.input.run_id, self.config.now())
        new = self._unstored(history)
        await self._claim_opening(lambda journal: self.handle.claim_closed(applied, new, settled.moved, journal))
        await self._resumed(gate, held)
        return settled

    async def _settle_and_store(self, gate: Resume, toolset: Toolset, history: list[Message]) -> Settled:
        try:
            settled = await settle_answers(gate, self._scope(toolset))
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                # The driver cut, which only a draining adapter past its grace does (`Adapter.drain`): as if
                # its replica died, but without the wait, another takes the turn over now, as after a lease.
                await self.handle.lapse_claim()
            else:  # a tool's own CancelledError is its failure, as any other
                await self.handle.release()
            raise
        except BaseException:
            await self.handle.release()
            raise
        settled.apply_to(history, self.turn.turn_id, self.config.now(), self.principal)
        if settled.forward and not settled.suspensions:
            # Forwarding is part of applying: the turn stays open until the backend accepts its answers.
            backend_calls = [answer.call for answer in gate.answers if answer.call.kind.forwarded]
            held = await self.handle.hold_turn(backend_calls, self._unstored(history), settled.moved)
            self.turn = replace(self.turn, held=held)
        else:
            await self.handle.close_turn(self._unstored(history), settled.moved)
        return settled

    def _unstored(self, history: list[Message]) -> list[Message]:
        """The history's messages past `stored`, counted as stored from now on: the save they are given to stores them.

        A save that fails ends the run, so no message is given to the store twice.
        """
        new, self.stored = history[self.stored :], len(history)
        return new

    def _close_open(self) -> list[BaseEvent]:
        """The events that end what a failed step left open; what it spent is reported all the same."""
        step, self.open_step = self.open_step, None
        if step is None:
            return []
        self.usage.extend(step.usage)
        return step.close_all()

    # The model loop: model steps, each streamed and its calls run or suspended.

    async def _model_loop(
        self, history: list[Message], state: Any, toolset: Toolset, resume: Sequence[ResumeEntry] = ()
    ) -> AsyncGenerator[list[BaseEvent], None]:
        for _ in range(self.config.max_steps):
            if self.stop.requested:
                async for run in self._stopped(history, []):
                    yield run
                return
            step = self._open_step(history, state)
            cut = False
            async for run in self._stream(step, self._request(history, state, toolset, resume)):
                if run and run[-1] is _CUT:  # the last run
                    cut = True
                    run.pop()
                if run:
                    yield run
            resume = ()  # answers for the backend's own interrupts go with the first request only
            state = step.state
            if cut:  # cut before the backend finished with the answers forwarded to it: they wait as before
                await self._give_back()
            await self._close_step(step, history)
            waiting = [call.id for call in step.calls] + step.left_open
            if self.stop.requested and (cut or waiting or step.interrupts):
                async for run in self._stopped(history, waiting):
                    yield run
                return
            if not step.calls and not step.interrupts and not step.left_open:
                # The step's pieces (its text as streamed, its id sets) are in the history now: not held while the
                # ending waits for the store, where a burst of runs queues (docs/benchmarks.md, "Memory, round two").
                del step
                yield [await self._complete(RunFinishedSuccessOutcome(), history)]
                return
            done, suspensions = await self._dispatch(step, toolset, state, history)
            for message in done.results:
                history.append(message)
                yield [result_event(message)]
            for call, grant in done.granted:  # after the results, as a person's decisions are
                record = granted_record(self.turn.turn_id, call, grant, self.config.now())
                history.append(record)
                yield [activity_event(record)]
            state, changes = commit(state, done.kept, resync=done.dropped, max_bytes=self.config.max_state_bytes)
            for change in changes:
                yield [change]
            if self.stop.requested:  # it came while the step's tools ran: those that wait are never run
                async for run in self._stopped(history, [s.pending.call_id for s in suspensions]):
                    yield run
                return
            if suspensions:
                yield await self._suspend(history, state, suspensions, step.calls)
                return
        log.warning("run %s stopped after %d model steps", self.input.run_id, self.config.max_steps)
        yield [await self._complete(RunFinishedCancelledOutcome(), history)]

    def _open_step(self, history: list[Message], state: Any) -> Step:
        """A new model step, with its own copies of what the turn's earlier steps left.

        A deferred call the history answers (the client answered a call the backend left open) waits no more.
        Where the history starts with the loaded record, only what follows it is walked: the record's ids are
        `held_ids`, built once per load, and a long thread's steps cost what the run added to it.
        """
        held_messages, held_calls, held_answers = self.handle.held_ids()
        walked = self.handle.past_loaded(history)
        called = {call.id for m in of_kind(walked, AssistantMessage) for call in m.tool_calls or ()}
        answered = {m.tool_call_id for m in of_kind(walked, ToolMessage)}
        if len(walked) < len(history):
            answered |= held_answers  # the answers the loaded part of the history holds
        turn = self.turn
        sent = {m.id for m in [*turn.provisional.values(), *turn.decided.values()]}  # named in what the backend gets
        self.open_step = Step(
            new_id("msg"),
            deferred=set(turn.deferred - answered),
            provisional=dict(turn.provisional),
            decided=dict(turn.decided),
            predictor=Predictor(self.config.predictions, state),
            taken={m.id for m in walked} | held_messages | sent,
            called=called | answered | held_calls,
            answered=answered | held_answers,
            elsewhere=self.handle.find if self.handle.base > 0 else None,
            state=state,
            max_state_bytes=self.config.max_state_bytes,
            state_work=self.state_work,
        )
        return self.open_step

    def _request(
        self, history: list[Message], state: Any, toolset: Toolset, resume: Sequence[ResumeEntry]
    ) -> ModelRequest:
        return model_request(
            self.input,
            history,
            state,
            toolset.specs(),
            resume,
            unanswered=self.turn.deferred,
            provisional=list(self.turn.provisional.values()),
            view=self.config.history_view,
        )

    async def _stream(self, step: Step, request: ModelRequest) -> AsyncIterator[list[BaseEvent]]:
        """The step's events, in the runs the stop race hands over; a held turn is given back if the backend fails.

        A stop cuts the step short between two events, or while the backend is silent (the stream raced against
        the stop: `StopSignal.until_stopped`): what it said so far is sent and stays, what it left open is ended,
        and `_CUT` ends the last run. Runs, not events: the loop walks each in a plain loop, one generator step
        fewer per event.
        """
        span = telemetry.start("agui.model_step", self.input.thread_id, self.input.run_id, self.span)
        cut = False
        try:
            # The race reads the backend's items ahead, small; the step makes their events a slice at a time.
            stream: AsyncIterator[Any] = backend_items(self.config.backend, request)
            async with aclosing(self.stop.until_stopped(stream, _CUT)) as runs:
                async for run in runs:
                    if run and run[-1] is _CUT:  # the last run, after a stop: the step's open messages end first
                        cut = True
                        run.pop()
                    async with aclosing(step_events(run, step)) as slices:
                        async for events in slices:
                            yield events
            yield [*step.close_all(), _CUT] if cut else step_end(step)  # `_CUT`: the loop's, never sent
        except Exception:
            await self._give_back()
            raise
        finally:
            telemetry.finish(span, "stopped" if cut else "calls" if step.calls or step.interrupts else "text")

    async def _close_step(self, step: Step, history: list[Message]) -> None:
        """Take over what the step said and left: its messages, usage, deferred calls and provisional results."""
        await self._check_older_calls(step)
        self.open_step = None
        self.usage.extend(step.usage)
        history.extend(step.messages())
        forwarded, self.turn = self.turn.held, self.turn.after(step)
        if forwarded is not None:
            await self.handle.close_turn(self._unstored(history))  # the backend took its answers: they are spent

    async def _check_older_calls(self, step: Step) -> None:
        """A run that read only the thread's tail checks the step's new call ids against the older part too.

        The step already refused an id of the tail or of itself as it streamed (`Step.called`); the older
        messages are read once per run, and only when a step made calls.

        Raises:
            BackendError: BACKEND_ERROR, before anything of the step is stored.
        """
        if self.handle.base == 0:
            return
        made = {call.id for segment in step.segments for call in segment.calls}
        if not made:
            return
        if self.older_calls is None:
            older = await self.handle.older_conversation()
            self.older_calls = {c.id for m in older if isinstance(m, AssistantMessage) for c in m.tool_calls or []}
        reused = sorted(made & self.older_calls)
        if reused:
            shown = ascii(reused[0][:40])
            raise BackendError(f"The agent backend opened a tool call under an id the thread already uses: {shown}.")

    async def _dispatch(
        self, step: Step, toolset: Toolset, state: Any, history: list[Message]
    ) -> tuple[StepCalls, list[Suspension]]:
        """Run the step's calls that can run now; the calls that wait: the backend's interrupts and open calls too."""
        budget, over_limit = self.turn.budget.spend(step.calls)
        self.turn = replace(self.turn, budget=budget)
        predicted = step.predictor.operations()
        grants = await self._grants()
        done = await run_calls(
            step.calls, self._scope(toolset), state=state, predicted=predicted, over_limit=over_limit, grants=grants
        )
        left_open = _calls_named(history, step.left_open)
        now = self.config.now()
        return done, [
            *done.suspensions,
            *(backend_suspension(interrupt) for interrupt in step.interrupts),
            *(open_call_suspension(call, self.config.policy, now) for call in left_open),
        ]

    def _scope(self, toolset: Toolset) -> CallScope:
        """What this run's tool calls run within: its input, its principal, its span and its stop."""
        return CallScope(self.config, toolset, self.input, self.principal, self.span, self.stop)

    async def _grants(self) -> dict[str, Grant]:
        """The thread's grants, by tool, whose makers the policy lets approve on it now.

        A grant is never more than its maker's word: one whose maker may no longer approve lets nothing through.
        """
        record = self.handle.record
        allowed = [await self.config.access.allows(g.granted_by, record.owner, "approve") for g in record.grants]
        return {grant.tool: grant for grant, ok in zip(record.grants, allowed, strict=True) if ok}

    # The endings: each stored once and told to the listeners.

    async def _suspend(
        self, history: list[Message], state: Any, suspensions: list[Suspension], calls: list[ToolCall]
    ) -> list[BaseEvent]:
        """Store the turn waiting for `suspensions`; its last events, as the peer reads them."""
        if all(s.outcome == "pending" for s in suspensions):
            # AG-UI's ordinary frontend-tool path: the run succeeds and the client answers in `messages`.
            waiting = [s.pending.call_id for s in suspensions]
            made = [c.id for c in calls if c.id in waiting]
            success = RunFinishedSuccessOutcome(pending_tool_call_ids=[*made, *(c for c in waiting if c not in made)])
            return [await self._complete(success, history)]
        pending = [s.pending for s in suspensions]
        turn_id = self.turn.turn_id
        turn = OpenTurn(
            turn_id=turn_id,
            run_id=self.input.run_id,
            pending=pending,
            state=state,
            counted_calls=sorted(self.turn.budget.counted),
            deferred_calls=sorted(self.turn.deferred),
            provisional_results=list(self.turn.provisional.values()),
        )
        forms = [pending_form(turn_id, p.call_id, p.form_key, p.response_schema) for p in pending if p.form_key]
        history.extend(forms)
        outcome = RunFinishedInterruptOutcome(interrupts=[p.interrupt() for p in pending])
        ending: list[BaseEvent] = [activity_event(form) for form in forms]
        # SNAP-1a: the whole history before an interrupt's RUN_FINISHED (SNAP-2: a snapshot is complete, so a
        # run that read only the tail reads the older messages for it).
        older = await self.handle.older_conversation()
        ending.append(MessagesSnapshotEvent(messages=[*older, *history]))
        # What the client shows, predictions of waiting calls included.
        shown = shown_state(state, pending, self.config.max_state_bytes)
        if shown is not None:
            ending.append(StateSnapshotEvent(snapshot=shown))
        ending.append(self._finished_event(outcome))
        resumed = wire_json(outcome) if self.turn.resumed else None

        new = self._unstored(history)

        async def save(journal: JournalAppend | None) -> bool:
            await self.handle.open_turn(turn, new, resumed, journal)
            return True

        sent = await self._store_ending(ending, save)
        telemetry.opened.add(len(pending))
        self.phase = Phase.SUSPENDED
        await self._notify(TurnEventType.TURN_SUSPENDED, [p.interrupt_id for p in pending])
        return sent

    async def _stopped(self, history: list[Message], waiting: Sequence[str]) -> AsyncGenerator[list[BaseEvent], None]:
        """End a stopped run, cancelled: each call it leaves without an answer is answered, once; nothing more runs.

        `waiting` names the calls of the last step that have no answer (run nor suspended); the calls the backend
        deferred this turn are answered too, since no interrupt will wait for them. A held turn whose answers never
        reached the backend is given back: its interrupts wait as before.
        """
        if self.turn.held is not None:
            await self._give_back()
        answered = {m.tool_call_id for m in history if isinstance(m, ToolMessage)}
        unique = list(dict.fromkeys([*waiting, *sorted(self.turn.deferred)]))
        for call in _calls_named(history, [call_id for call_id in unique if call_id not in answered]):
            message = tool_message(call.id, stopped_before(call.name))
            history.append(message)
            yield [result_event(message)]
        self.turn = replace(self.turn, deferred=frozenset(), provisional=_frozen())
        recorded = _CLIENT_LEFT if self.stop.reason == codes.RUN_INTERRUPTED else None
        yield [await self._complete(RunFinishedCancelledOutcome(), history, recorded, stopped=True)]

    def _stop_event(self, finished: RunFinishedEvent) -> BaseEvent:
        """How a stopped run ends: cancelled for a person's stop; a stop no person asked for says its code."""
        reason = self.stop.reason
        if reason is None:
            return finished
        said = _STOPPED_BY.get(reason, "The run was stopped; what it did is stored.")
        return RunErrorEvent(message=said, code=reason)

    async def _replay(self, replay: Replay) -> AsyncGenerator[list[BaseEvent], None]:
        stored = replay.applied.outcome or {}
        if stored.get("type") == "error":
            yield [RunErrorEvent(message=str(stored.get("message", "")), code=str(stored.get("code", "")))]
            return
        yield [self._finished_event(_outcome.validate_python(stored))]

    async def _complete(
        self,
        outcome: Outcome,
        history: list[Message],
        recorded: dict[str, Any] | None = None,
        *,
        stopped: bool = False,
    ) -> BaseEvent:
        """Store the finished conversation, tell the listeners; the run's RUN_FINISHED (or a stop's own ending).

        A coroutine, not a generator: the stream's last event is yielded by the generator it ends, so no
        generator is left suspended behind it when the stream is closed at its terminal event.

        A resumed run records `outcome` for replays of its resume, or `recorded` when given (a stop's own).
        A `stopped` run ends as its stop says (`_stop_event`).
        """
        resumed = (recorded or wire_json(outcome)) if self.turn.resumed else None
        finished = self._finished_event(outcome)

        new = self._unstored(history)

        async def save(journal: JournalAppend | None) -> bool:
            return await self.handle.finish(new, self.input.run_id, resumed, journal)

        (terminal,) = await self._store_ending([self._stop_event(finished) if stopped else finished], save)
        self.phase = Phase.FINISHED
        done = TurnEventType.TURN_CANCELLED if outcome.type == "cancelled" else TurnEventType.TURN_COMPLETED
        await self._notify(done)
        return terminal

    async def _store_ending(
        self, ending: list[BaseEvent], save: Callable[[JournalAppend | None], Awaitable[bool]]
    ) -> list[BaseEvent]:
        """Store the run's ending and its last events in one store call; the events, as the peer reads them.

        `save` stores the ending, with the journal's last batch when given, and says whether it did. The journal
        holds the events back from every reader until the save is done (`LiveRun.seal`), as sending them after it
        did: no one hears of a turn, finished or waiting, that the store does not hold. A principal whose view
        filters the events one by one (`adapter._run._access.View`), or a journal that cannot seal, gets the save first
        and the events after, as two store calls.
        """
        sent = [self._sent(event) for event in ending]
        journal = self.journal if self.view.reads else None
        batch = await journal.seal(sent) if journal is not None else None
        if journal is None or batch is None:
            await save(None)
            return sent
        try:
            stored = await save(batch)
        except (StoreUnavailable, asyncio.CancelledError):
            journal.unseal(None)  # it may have landed: the writer's next append finds out
            raise
        except BaseException:
            journal.unseal(False)
            raise
        journal.unseal(stored)
        return sent

    async def _failed(self, exc: AdapterError) -> None:
        if isinstance(exc, ResumeError) or self.phase is Phase.GIVEN_BACK:
            return  # the turn was refused, not failed: it still waits exactly as before
        if self.turn.resumed and exc.code != codes.THREAD_DELETED:  # a deleted thread has no record to keep it
            outcome = {"type": "error", "code": exc.code, "message": exc.message}
            try:
                await self.handle.record_outcome(self.input.run_id, outcome)
            except StoreUnavailable as down:
                log.warning("could not record the failed outcome of run %s: %s", self.input.run_id, down)
            except Exception:
                log.exception("could not record the failed outcome of run %s", self.input.run_id)
        self.phase = Phase.FAILED
        await self._notify(TurnEventType.TURN_FAILED, code=exc.code)

    async def _leave(self) -> None:
        """The run was cut before an ending (its adapter closing, its journal full): a held turn is given back.

        A resume whose answers were applied records `RUN_INTERRUPTED`: replaying that resume then says what
        happened, instead of waiting for an outcome that will never come.
        Answers cut while they were applied record nothing: their claim was released or lapsed (`_settle_and_store`).
        """
        was, self.phase = self.phase, Phase.LEFT
        try:
            if self.turn.held is not None:
                await self._give_back()
            elif self.turn.resumed and not was.ended and was not in (Phase.GIVEN_BACK, Phase.SETTLING):
                await self.handle.record_outcome(self.input.run_id, _CLIENT_LEFT)
        except Exception:  # the cut goes on: a replay past the claim lease records the outcome instead
            log.warning("run %s could not record how it was cut", self.input.run_id, exc_info=True)

    async def _give_back(self) -> None:
        """Give the held turn back: the same interrupts wait, and the same or a corrected resume may come."""
        held = self.turn.held
        if held is not None:
            self.turn = replace(self.turn, held=None)
            await self.handle.reopen_turn(held)
            if self.phase is not Phase.LEFT:
                self.phase = Phase.GIVEN_BACK

    async def _notify(
        self, kind: TurnEventType, interrupt_ids: list[str] | None = None, code: str | None = None
    ) -> None:
        if not self.config.listeners:
            return  # no one to tell: the event is not built (four times a round trip)
        turn_id = self.turn.turn_id
        event = TurnEvent(kind, self.input.thread_id, turn_id, self.input.run_id, tuple(interrupt_ids or ()), code)
        await notify(self.config.listeners, event)

    def _finished_event(self, outcome: Outcome) -> RunFinishedEvent:
        """The RUN_FINISHED event for `outcome`, with the run's token usage."""
        return RunFinishedEvent(
            thread_id=self.input.thread_id, run_id=self.input.run_id, outcome=outcome, usage=token_usage(self.usage)
        )


_CLIENT_LEFT: Final = {
    "type": "error",
    "code": codes.RUN_INTERRUPTED,
    "message": "The answers were applied, but the client left before the run finished. Send a new message.",
}
"""What a resume records when its run ended without its client (a replay of it ends so)."""
_STOPPED_BY: Final = {
    codes.RUN_DEADLINE: "The run was stopped at its deadline; what it did is stored.",
    codes.RUN_INTERRUPTED: "The run was stopped when its client left; what it did is stored.",
}
"""The message of a stop no person asked for, by its code."""

_CUT: Any = object()
"""What `Run._stream` yields last when a stop cut its step short: never an event, never sent."""


async def _warned(
    passed: tuple[str, ...], stream: AsyncIterator[list[BaseEvent]]
) -> AsyncGenerator[list[BaseEvent], None]:
    """The run's events after a warning that names the resume entries it left out (AG-UI 1.1, unrecognised entry)."""
    ids = ", ".join(passed)
    message = f"resume entries left out, no such interrupt on this thread: {ids}"
    value = {"code": codes.RESUME_UNKNOWN_INTERRUPT, "message": message, "interruptIds": list(passed)}
    yield [CustomEvent(name=WARNING_EVENT, value=value)]
    async for run in stream:
        yield run


def _calls_named(history: list[Message], call_ids: list[str]) -> list[ToolCall]:
    """The calls with these ids, in the order given, as the history holds them."""
    wanted = set(call_ids)
    found = {
        call.id: ToolCall(call.id, call.function.name, call.function.arguments)
        for message in history
        if isinstance(message, AssistantMessage)
        for call in message.tool_calls or []
        if call.id in wanted
    }
    return [found[call_id] for call_id in call_ids if call_id in found]
