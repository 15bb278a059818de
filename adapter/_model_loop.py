"""The model loop of a run: model steps, each streamed and its calls run or suspended.

It ends when the model answers without calls (finished), when a call or the backend's interrupt waits
(suspended, `adapter._run_end`), or after `max_steps` steps (cancelled).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from typing import Any

from ag_ui.core import (
    AssistantMessage,
    BaseEvent,
    Message,
    ResumeEntry,
    RunFinishedCancelledOutcome,
    RunFinishedSuccessOutcome,
    ToolMessage,
)

from adapter import _telemetry as telemetry
from adapter._calls import StepCalls, run_calls
from adapter._errors import BackendError
from adapter._events import result_event
from adapter._ids import new_id
from adapter._interrupts import Suspension, backend_suspension, open_call_suspension
from adapter._predict import Predictor
from adapter._run_end import RunEnd
from adapter._state import commit
from adapter._step import Step
from adapter._toolset import Toolset
from adapter._translate import model_request, stream_step
from adapter._types import ModelRequest, ToolCall

log = logging.getLogger("adapter.runner")


class ModelLoop(RunEnd):
    """The model steps of one run; `Run.__init__` sets what they read (each is documented there)."""

    principal: str | None
    open_step: Step | None
    older_calls: set[str] | None
    span: telemetry.Span

    async def _model_loop(
        self, history: list[Message], state: Any, toolset: Toolset, resume: Sequence[ResumeEntry] = ()
    ) -> AsyncIterator[BaseEvent]:
        for _ in range(self.config.max_steps):
            step = self._open_step(history, state)
            async for event in self._stream(step, self._request(history, state, toolset, resume)):
                yield event
            resume = ()  # answers for the backend's own interrupts go with the first request only
            state = step.state
            await self._close_step(step, history)
            if not step.calls and not step.interrupts and not step.left_open:
                yield await self._complete(RunFinishedSuccessOutcome(), history)
                return
            done, suspensions = await self._dispatch(step, toolset, state, history)
            for message in done.results:
                history.append(message)
                yield result_event(message)
            state, changes = commit(state, done.kept, resync=done.dropped, max_bytes=self.config.max_state_bytes)
            for change in changes:
                yield change
            if suspensions:
                async for event in self._suspend(history, state, suspensions, step.calls):
                    yield event
                return
        log.warning("run %s stopped after %d model steps", self.input.run_id, self.config.max_steps)
        yield await self._complete(RunFinishedCancelledOutcome(), history)

    def _open_step(self, history: list[Message], state: Any) -> Step:
        """A new model step, with its own copies of what the turn's earlier steps left.

        A deferred call the history answers (the client answered a call the backend left open) waits no more.
        """
        called = {call.id for m in history if isinstance(m, AssistantMessage) for call in m.tool_calls or []}
        answered = {m.tool_call_id for m in history if isinstance(m, ToolMessage)}
        self.open_step = Step(
            new_id("msg"),
            deferred=set(self.deferred - answered),
            provisional=dict(self.provisional),
            decided=dict(self.decided),
            predictor=Predictor(self.config.predictions, state),
            taken={m.id for m in history},
            called=called | answered,
            state=state,
            max_state_bytes=self.config.max_state_bytes,
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
            unanswered=self.deferred,
            provisional=list(self.provisional.values()),
            view=self.config.history_view,
        )

    async def _stream(self, step: Step, request: ModelRequest) -> AsyncIterator[BaseEvent]:
        """The step's events; a held turn is given back if the backend fails."""
        span = telemetry.start("agui.model_step", self.input.thread_id, self.input.run_id, self.span)
        try:
            async for event in stream_step(self.config.backend, request, step):
                yield event
        except Exception:
            await self._reopen()
            raise
        finally:
            telemetry.finish(span, "calls" if step.calls or step.interrupts else "text")

    async def _close_step(self, step: Step, history: list[Message]) -> None:
        """Take over what the step said and left: its messages, usage, deferred calls and provisional results."""
        await self._check_older_calls(step)
        self.open_step = None
        self.usage.extend(step.usage)
        self.deferred, self.provisional = frozenset(step.deferred), dict(step.provisional)
        history.extend(step.messages())
        if self.held is not None:
            self.held = None
            await self.handle.close_turn(history)  # the backend took its answers: they are spent

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
        self.budget, over_limit = self.budget.spend(step.calls)
        predicted = step.predictor.operations()
        done = await run_calls(
            step.calls, toolset, self.input, self.config, over_limit, self.principal, state, predicted, self.span
        )
        left_open = _calls_named(history, step.left_open)
        now = self.config.now()
        return done, [
            *done.suspensions,
            *(backend_suspension(interrupt) for interrupt in step.interrupts),
            *(open_call_suspension(call, self.config.policy, now) for call in left_open),
        ]


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
