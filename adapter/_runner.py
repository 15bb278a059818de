"""The turn engine: one run, from the resume gate to the terminal event.

    gate (_gate) -> replay, or apply answers (_answers) -> model loop: translate the backend's
    stream (_translate), run or suspend its calls (_calls, _interrupts) -> suspend or finish (_run_end)

Every run is a fresh `Run` over the adapter's frozen `EngineConfig`: nothing about a request lives
on the adapter. The stored record is read and written through one `RecordHandle`. `Run` takes its
model loop from `ModelLoop` (`adapter._model_loop`) and its endings from `RunEnd` (`adapter._run_end`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, AsyncIterator

from ag_ui.core import (
    PROTOCOL_VERSION,
    BaseEvent,
    Message,
    MessagesSnapshotEvent,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    ToolMessage,
)

from adapter import _errors as codes
from adapter import _telemetry as telemetry
from adapter._answers import Settled, runs_nothing, settle_answers
from adapter._calls import CallBudget
from adapter._config import EngineConfig
from adapter._conversation import declared_tail
from adapter._errors import AdapterError, ResumeError
from adapter._events import activity_event, result_event
from adapter._gate import Replay, Resume, check_resume
from adapter._ids import new_id
from adapter._lifecycle import TurnEventType
from adapter._model_loop import ModelLoop
from adapter._provisional import decided_answers, resumed_provisional
from adapter._record import OpenTurn, ThreadRecord
from adapter._record_handle import RecordHandle
from adapter._state import resumed_state
from adapter._step import Step
from adapter._toolset import Toolset, client_toolset
from adapter._types import Usage
from adapter._view import View
from adapter.stores import StoreUnavailable

log = logging.getLogger("adapter.runner")

_STORE_DOWN = (
    "The store could not be reached; what this run changed may not be stored. Read the thread before retrying."
)


class Run(ModelLoop):
    """One run of the agent for one `RunAgentInput`."""

    def __init__(self, config: EngineConfig, run_input: RunAgentInput, principal: str | None = None) -> None:
        self.config = config
        self.input = run_input
        self.principal = principal
        """Who sent the input (`adapter._access`); a thread this run creates is theirs."""
        self.handle = RecordHandle(
            config.store, run_input.thread_id, principal=principal, access=config.access, parsed=config.parsed
        )
        self.view = View(config.access, principal, None)
        """What the principal may see of this run, and use of its input (`adapter._view`)."""
        self.usage: list[Usage] = []
        self.open_step: Step | None = None
        self.span = telemetry.NULL_SPAN
        """The run's span (`agui.run`), the parent of every span the run starts."""
        self.older_calls: set[str] | None = None
        """The call ids of the thread before the tail this run read (`ModelLoop._check_older_calls`), once read."""
        self.resuming = False
        self.ended = False
        """True once the run's ending is stored: finished, failed or suspended again."""
        self.settling: asyncio.Future[Settled] | None = None
        self.turn_id = new_id("turn")
        self.budget = CallBudget(config.max_tool_calls)
        """The tool calls this turn has made; replaced, never changed, as calls are made."""
        self.deferred: frozenset[str] = frozenset()
        """Calls the backend deferred while its interrupt about them waits: kept unanswered for it."""
        self.provisional: dict[str, ToolMessage] = {}
        """What stands for some of those calls unless the backend answers them (`adapter._provisional`)."""
        self.decided: dict[str, ToolMessage] = {}
        """The person's answers to the interrupts that named those calls: each stands if the backend leaves it open."""
        self.held: OpenTurn | None = None
        """The turn whose answers to the backend's own interrupts are being forwarded, claimed until it accepts them."""
        self.reopened = False
        """The backend refused those answers (or was unreachable): the turn waits again as it was."""
        self.tail = declared_tail(config.history_view) if config.history == "server" else None
        """With a server-kept history and a view that needs only a tail: how many stored messages a new run reads."""

    async def start(self) -> AsyncGenerator[BaseEvent, None]:
        """Authorize the input, read the thread and build the run's tools; then the run's events, not yet started.

        The events go from RUN_STARTED to exactly one terminal event. A failure to read the store, or a
        client tool the run cannot use, is reported in them as the run's RUN_ERROR.

        Raises:
            Forbidden: When the `authorize` policy refuses the input; nothing changed.
            LimitExceeded: When the client's tools are over the adapter's limits; nothing changed.
        """
        loaded = await self._load_checked()
        toolset = await client_toolset(
            self.config.tools,
            self.input.tools or [],
            client_policy=self.config.client_tool_policy,
            limits=self.config.client_tool_limits,
        )
        return self._events(loaded, toolset)

    async def _events(
        self, loaded: ThreadRecord | None | Exception, toolset: Toolset | AdapterError
    ) -> AsyncGenerator[BaseEvent, None]:
        yield RunStartedEvent(
            thread_id=self.input.thread_id,
            run_id=self.input.run_id,
            parent_run_id=self.input.parent_run_id,
            protocol_version=PROTOCOL_VERSION,
        )
        thread_id, run_id = self.input.thread_id, self.input.run_id
        self.span = span = telemetry.start("agui.run", thread_id, run_id)
        outcome, code = "left", None  # the client went away before the end, unless said otherwise below
        try:
            if isinstance(loaded, Exception):
                raise loaded
            if isinstance(toolset, AdapterError):
                raise toolset
            async for event in self._run(loaded, toolset):
                if isinstance(event, RunFinishedEvent):
                    outcome = event.outcome.type if event.outcome is not None else "success"
                shown = await self.view.shown(event, self.handle.record.open_turn)
                if shown is not None:
                    yield shown
        except (GeneratorExit, asyncio.CancelledError):
            self._left_unfinished()
            raise
        except Exception as exc:
            error = self._reported(exc)
            outcome, code = "error", error.code
            async for event in self._error_events(error):
                yield event
        finally:
            telemetry.finish(span, outcome, code)

    def _reported(self, exc: Exception) -> AdapterError:
        """What the client is told of a failure: an `AdapterError` as is, anything else without its internals."""
        if isinstance(exc, StoreUnavailable):
            exc = AdapterError(_STORE_DOWN, code=codes.STORE_UNAVAILABLE)
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
        yield RunErrorEvent(message=exc.message, code=exc.code, metadata=details)

    async def _load_checked(self) -> ThreadRecord | None | Exception:
        """The stored record once the policy allows the input; a failure to read it is reported in the run."""
        try:
            record = await self.handle.load(messages=self.tail is None)  # with a tail: the head, then `_messages`
        except Exception as exc:
            return exc
        await self.config.access.check_input(self.principal, record, self.input)
        self.view = await View.of(self.config.access, self.principal, record)
        self.input = self.view.used(self.input)
        return record

    async def _run(self, record: ThreadRecord | None, toolset: Toolset) -> AsyncIterator[BaseEvent]:
        span = telemetry.start("agui.resume_gate", self.input.thread_id, self.input.run_id, self.span)
        try:
            gate = await check_resume(
                record,
                self.input,
                now=self.config.now(),
                claim_lease=self.config.claim_lease,
                edited_args_schemas=self.config.tool_schemas(),
            )
        except ResumeError as refused:
            telemetry.finish(span, "refused", refused.code)
            raise
        telemetry.finish(span, type(gate).__name__.lower() if gate is not None else "new")
        await self._messages(gate)
        if isinstance(gate, Replay):
            telemetry.duplicates.add(1)
            async for event in self._replay(gate):
                yield event
            return
        if isinstance(gate, Resume):
            stream = self._resume(gate, toolset)
        else:
            history = await self.handle.history(self.input.messages, server_kept=self.config.history == "server")
            await self._notify(TurnEventType.TURN_STARTED)
            stream = self._model_loop(history, self.input.state, toolset)
        async for event in stream:
            yield event

    async def _messages(self, gate: Resume | Replay | None) -> None:
        """With a tail, read the messages the gate's choice needs: a new run the tail, a resume the whole thread."""
        if self.tail is not None and gate is None:
            await self.handle.load_tail(self.tail, self.input.messages)
        elif self.tail is not None and isinstance(gate, Resume):
            await self.handle.load_same()

    async def _resume(self, gate: Resume, toolset: Toolset) -> AsyncIterator[BaseEvent]:
        self.resuming = True
        self.turn_id = gate.turn.turn_id
        self.budget = CallBudget(self.config.max_tool_calls, frozenset(gate.turn.counted_calls))
        self.deferred = frozenset(gate.turn.deferred_calls)
        self.provisional = resumed_provisional(gate.turn, gate.answers)
        self.decided = decided_answers(gate.turn, gate.answers)
        history, held = self.handle.resumed_history(self.input.messages)
        if not held:
            # SNAP-1b: the client's messages lack part of the thread, so the results below would answer calls it
            # does not know (RES-2); a client that sent the whole thread needs no restatement.
            yield MessagesSnapshotEvent(messages=history)
        settled = await self._apply(gate, toolset, history)
        for activity in settled.activities:
            yield activity_event(activity)
        for message in settled.messages:
            if message.id not in settled.client_message_ids:
                yield result_event(message)
        for decision in settled.decisions:  # after the results, as they are stored
            yield activity_event(decision)
        if settled.edited:
            yield MessagesSnapshotEvent(messages=history)  # the calls now show the arguments that ran
        state, changes = resumed_state(gate.turn, settled.kept, self.config.max_state_bytes)
        for change in changes:
            yield change
        if settled.suspensions:
            stream = self._suspend(history, state, settled.suspensions, [])
        else:
            stream = self._model_loop(history, state, toolset, settled.forward)
        async for event in stream:
            yield event

    async def _apply(self, gate: Resume, toolset: Toolset, history: list[Message]) -> Settled:
        """Claim the turn, apply the answers and store the result, shielded from client disconnects.

        Once a claim is made the answers are applied to the end, even if the client goes away, so a
        tool never runs half-way through a resume and never runs twice.
        """
        held = gate.turn.claimed_by is not None  # claimed by a run whose lease ran out: the gate let it pass
        if runs_nothing(gate):  # nothing to order after the claim: claim and store the answers in one save
            task = asyncio.ensure_future(self._settle_pure(gate, toolset, history, held))
            self.config.background.keep(task)
            self.settling = task
            return await asyncio.shield(task)
        await self.handle.claim(gate, self.input.run_id, self.config.now())
        await self._resumed(gate, held)
        task = asyncio.ensure_future(self._settle_and_store(gate, toolset, history))
        self.config.background.keep(task)
        self.settling = task
        return await asyncio.shield(task)

    async def _resumed(self, gate: Resume, held: bool) -> None:
        """Count and announce a stored claim (`held`: it took over a lapsed one)."""
        telemetry.answered.add(len(gate.answers))
        if held:
            telemetry.takeovers.add(1)
        await self._notify(TurnEventType.TURN_RESUMED, [a.call.interrupt_id for a in gate.answers])

    async def _settle_pure(self, gate: Resume, toolset: Toolset, history: list[Message], held: bool) -> Settled:
        """Settle answers that run nothing, then claim the turn and close it in one save (`runs_nothing`)."""
        settled = await settle_answers(gate, toolset, self.input, self.config, self.principal, self.span)
        assert not settled.forward and not settled.suspensions  # what `runs_nothing` promises
        settled.apply_to(history, self.turn_id, self.config.now(), self.principal)
        await self.handle.claim_closed(gate, self.input.run_id, self.config.now(), history, settled.moved)
        await self._resumed(gate, held)  # announced even if the client left meanwhile, as after a claim
        return settled

    async def _settle_and_store(self, gate: Resume, toolset: Toolset, history: list[Message]) -> Settled:
        try:
            settled = await settle_answers(gate, toolset, self.input, self.config, self.principal, self.span)
        except BaseException:
            await self.handle.release()
            raise
        settled.apply_to(history, self.turn_id, self.config.now(), self.principal)
        if settled.forward and not settled.suspensions:
            # Forwarding is part of applying: the turn stays open until the backend accepts its answers.
            backend_calls = [answer.call for answer in gate.answers if answer.call.kind == "backend"]
            self.held = await self.handle.hold_turn(backend_calls, history, settled.moved)
        else:
            await self.handle.close_turn(history, settled.moved)
        return settled

    def _close_open(self) -> list[BaseEvent]:
        step, self.open_step = self.open_step, None
        return step.close_all() if step else []
