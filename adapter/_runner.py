"""The turn engine: one run, from the resume gate to the terminal event.

    gate -> (replay | settle answers) -> model loop -> dispatch calls -> suspend or finish

Every run is a fresh `Run` object: nothing about a request lives on the adapter.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from ag_ui.core import (
    PROTOCOL_VERSION,
    BaseEvent,
    Message,
    MessagesSnapshotEvent,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    StateSnapshotEvent,
    TokenUsage,
    ToolCallResultEvent,
    ToolMessage,
)
from pydantic import TypeAdapter

from adapter import _errors as codes
from adapter._conversation import model_view
from adapter._dispatch import Suspension, new_id
from adapter._errors import AdapterError, BackendError
from adapter._resume import Replay, Resume, check_resume
from adapter._settle import Settled, settle_answers, step_calls
from adapter._steps import Step, stream_step
from adapter._thread import ThreadHandle
from adapter._tools import ToolResult, Toolset
from adapter._turns import OpenTurn, dump_messages
from adapter._types import ModelRequest, ToolCall, Usage

if TYPE_CHECKING:
    from adapter._adapter import Adapter

log = logging.getLogger("adapter.runner")

_outcome = TypeAdapter[RunFinishedSuccessOutcome | RunFinishedInterruptOutcome | RunFinishedCancelledOutcome](
    RunFinishedSuccessOutcome | RunFinishedInterruptOutcome | RunFinishedCancelledOutcome
)
Outcome = RunFinishedSuccessOutcome | RunFinishedInterruptOutcome | RunFinishedCancelledOutcome


class Run:
    """One run of the agent for one `RunAgentInput`."""

    def __init__(self, adapter: Adapter, run_input: RunAgentInput) -> None:
        self.adapter = adapter
        self.input = run_input
        self.thread = ThreadHandle(adapter.store, run_input.thread_id)
        self.usage: list[Usage] = []
        self.open_step: Step | None = None
        self.resuming = False

    async def events(self) -> AsyncIterator[BaseEvent]:
        """The run's events, from RUN_STARTED to exactly one terminal event."""
        yield RunStartedEvent(
            thread_id=self.input.thread_id,
            run_id=self.input.run_id,
            parent_run_id=self.input.parent_run_id,
            protocol_version=PROTOCOL_VERSION,
        )
        try:
            async for event in self._run():
                yield event
        except AdapterError as exc:
            for event in self._close_open():
                yield event
            await self._record_failure(exc)
            yield RunErrorEvent(message=exc.message, code=exc.code)
        except Exception:
            log.exception("run %s on thread %s failed", self.input.run_id, self.input.thread_id)
            for event in self._close_open():
                yield event
            yield RunErrorEvent(message="The run failed with an internal error.", code="INTERNAL_ERROR")

    async def _run(self) -> AsyncIterator[BaseEvent]:
        record = await self.thread.load()
        toolset = Toolset(self.adapter.tools, self.input.tools or [])
        gate = check_resume(
            record,
            self.input,
            now=self.adapter.now(),
            claim_lease=self.adapter.claim_lease,
            edited_args_schemas={tool.name: tool.parameters for tool in self.adapter.tools},
        )
        if isinstance(gate, Replay):
            async for event in self._replay(gate):
                yield event
            return
        history: list[Message] = list(self.input.messages)
        state = self.input.state
        if isinstance(gate, Resume):
            self.resuming = True
            history, state = gate.turn.conversation(), gate.turn.state
            yield MessagesSnapshotEvent(messages=history)  # makes the answered calls known (SNAP-1b, RES-2)
            settled = await self._apply(gate, toolset)
            for message in settled.messages:
                history.append(message)
                if message.id not in settled.client_message_ids:
                    yield ToolCallResultEvent(
                        message_id=message.id, tool_call_id=message.tool_call_id, content=message.content, role="tool"
                    )
            if settled.suspensions:
                async for event in self._suspend(history, state, settled.suspensions, []):
                    yield event
                return
        async for event in self._model_loop(history, state, toolset):
            yield event

    async def _apply(self, gate: Resume, toolset: Toolset) -> Settled:
        """Claim the turn, apply the answers and store the result, shielded from client disconnects.

        Once a claim is made the answers are applied to the end, even if the client goes away, so a
        tool never runs half-way through a resume and never runs twice.
        """
        await self.thread.claim(gate, self.input.run_id, self.adapter.now())
        task = asyncio.ensure_future(self._settle_and_store(gate, toolset))
        self.adapter.keep_alive(task)
        return await asyncio.shield(task)

    async def _settle_and_store(self, gate: Resume, toolset: Toolset) -> Settled:
        try:
            settled = await settle_answers(gate, toolset, self.input, self.adapter)
        except BaseException:
            await self.thread.release(gate)
            raise
        await self.thread.close_turn()
        return settled

    async def _model_loop(self, history: list[Message], state: Any, toolset: Toolset) -> AsyncIterator[BaseEvent]:
        for _ in range(self.adapter.max_steps):
            step = Step(message_id=new_id("msg"))
            self.open_step = step
            request = ModelRequest(
                messages=model_view(history),
                tools=toolset.specs(),
                context=self.input.context or [],
                state=state,
                thread_id=self.input.thread_id,
                run_id=self.input.run_id,
            )
            try:
                async for event in stream_step(aiter(self.adapter.backend.stream(request)), step):
                    yield event
            except AdapterError:
                raise
            except Exception as exc:
                log.exception("backend failed on thread %s", self.input.thread_id)
                raise BackendError("The agent backend failed.") from exc
            self.open_step = None
            self.usage.extend(step.usage)
            history.append(step.message())
            if not step.calls:
                await self._finish(RunFinishedSuccessOutcome())
                yield self._finished(RunFinishedSuccessOutcome())
                return
            results, suspensions = await step_calls(step.calls, toolset, self.input, self.adapter)
            for call, result in results:
                message = _tool_message(call, result)
                history.append(message)
                yield ToolCallResultEvent(
                    message_id=message.id, tool_call_id=call.id, content=message.content, role="tool"
                )
            if suspensions:
                async for event in self._suspend(history, state, suspensions, step.calls):
                    yield event
                return
        log.warning("run %s stopped after %d model steps", self.input.run_id, self.adapter.max_steps)
        await self._finish(RunFinishedCancelledOutcome())
        yield self._finished(RunFinishedCancelledOutcome())

    async def _suspend(
        self, history: list[Message], state: Any, suspensions: list[Suspension], calls: list[ToolCall]
    ) -> AsyncIterator[BaseEvent]:
        if all(s.outcome == "pending" for s in suspensions):
            # AG-UI's ordinary frontend-tool path: the run succeeds and the client answers in `messages`.
            waiting = {s.pending.tool_call_id for s in suspensions}
            success = RunFinishedSuccessOutcome(pending_tool_call_ids=[c.id for c in calls if c.id in waiting])
            await self._finish(success)
            yield self._finished(success)
            return
        turn = OpenTurn(
            turn_id=new_id("turn"),
            run_id=self.input.run_id,
            messages=dump_messages(history),
            pending=[s.pending for s in suspensions],
            state=state,
        )
        outcome = RunFinishedInterruptOutcome(interrupts=[s.pending.interrupt() for s in suspensions])
        await self.thread.open_turn(turn, self._outcome_json(outcome) if self.resuming else None)
        yield MessagesSnapshotEvent(messages=history)
        if state is not None:
            yield StateSnapshotEvent(snapshot=state)
        yield self._finished(outcome)

    async def _replay(self, replay: Replay) -> AsyncIterator[BaseEvent]:
        stored = replay.applied.outcome or {}
        if stored.get("type") == "error":
            yield RunErrorEvent(message=str(stored.get("message", "")), code=str(stored.get("code", "")))
            return
        yield self._finished(_outcome.validate_python(stored))

    async def _finish(self, outcome: Outcome) -> None:
        if self.resuming:
            await self.thread.record_outcome(self.input.run_id, self._outcome_json(outcome))

    async def _record_failure(self, exc: AdapterError) -> None:
        if self.resuming and not isinstance(exc, codes.ResumeError):
            outcome = {"type": "error", "code": exc.code, "message": exc.message}
            try:
                await self.thread.record_outcome(self.input.run_id, outcome)
            except Exception:
                log.exception("could not record the failed outcome of run %s", self.input.run_id)

    def _finished(self, outcome: Outcome) -> RunFinishedEvent:
        return RunFinishedEvent(
            thread_id=self.input.thread_id, run_id=self.input.run_id, outcome=outcome, usage=self._usage()
        )

    def _usage(self) -> list[TokenUsage] | None:
        if not self.usage:
            return None
        return [
            TokenUsage(
                provider=u.provider,
                model=u.model,
                input_tokens=u.input_tokens,
                output_tokens=u.output_tokens,
                total_tokens=u.input_tokens + u.output_tokens,
            )
            for u in self.usage
        ]

    def _close_open(self) -> list[BaseEvent]:
        step, self.open_step = self.open_step, None
        return step.close_text() if step else []

    @staticmethod
    def _outcome_json(outcome: Outcome) -> dict[str, Any]:
        return outcome.model_dump(mode="json", by_alias=True, exclude_none=True)


def _tool_message(call: ToolCall, result: ToolResult) -> ToolMessage:
    return ToolMessage(id=new_id("msg"), tool_call_id=call.id, content=result.content, error=result.error)
