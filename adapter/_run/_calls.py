"""Running or suspending the tool calls of one model step: each call runs now, or waits for an answer."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ag_ui.core import RunAgentInput, ToolMessage

from adapter import _telemetry as telemetry
from adapter._ids import idempotency_key, new_id
from adapter._limits import loads
from adapter._run._config import EngineConfig
from adapter._run._forms import FormRequired, UserInputTool
from adapter._run._interrupts import Suspension, suspend
from adapter._run._stop import StopSignal, stopped_before, stopped_during
from adapter._run._tools import BaseTool, FunctionTool, InputRequired, ToolContext, ToolResult, Toolset, avalidate
from adapter._state._shared import Kept, Operation, ToolState
from adapter._thread._record import Grant
from adapter._types import JSON
from adapter.backends._seam import ToolCall

TOOL_LIMIT = "tool_limit"


@dataclass(frozen=True, slots=True)
class CallScope:
    """What every tool call of one run runs within, the same for each step and for its answers.

    `run_input` is the run the tools see; None only where no input runs them, when every answer is `cancelled`
    (`Adapter.cancel_turn`). `principal` made the request, for each tool's `ToolContext`. Once `stop` is raised no
    tool of a step starts (a resume's answers, once claimed, are applied whole), and a running tool declared
    `cancellable` is cancelled, a step's or an answer's (`stoppable`).
    """

    config: EngineConfig
    toolset: Toolset
    run_input: RunAgentInput | None
    principal: str | None
    span: telemetry.Span = telemetry.NULL_SPAN
    stop: StopSignal | None = None


@dataclass(frozen=True, slots=True)
class CallBudget:
    """The tool calls one turn has made, against `max_tool_calls`.

    A call that suspended and runs again after its answer is the same logical call: it counts once.
    """

    limit: int | None
    counted: frozenset[str] = frozenset()

    def spend(self, calls: Sequence[ToolCall]) -> tuple[CallBudget, frozenset[str]]:
        """The budget after `calls`, and the ids of the calls it had no room for."""
        counted = set(self.counted)
        refused: set[str] = set()
        for call in calls:
            if call.id in counted:
                continue
            if self.limit is not None and len(counted) >= self.limit:
                refused.add(call.id)
                continue
            counted.add(call.id)
        return CallBudget(self.limit, frozenset(counted)), frozenset(refused)


def tool_context(
    run_input: RunAgentInput,
    call_id: str,
    state: ToolState,
    *,
    principal: str | None,
    answer: Any = None,
    answered: bool = False,
) -> ToolContext:
    """What a tool running for `call_id` in this run knows about its call, its view of the state, and who asked."""
    return ToolContext(
        principal=principal,
        thread_id=run_input.thread_id,
        run_id=run_input.run_id,
        tool_call_id=call_id,
        idempotency_key=idempotency_key(run_input.thread_id, call_id),
        answer=answer,
        answered=answered,
        shared_state=state,
    )


@dataclass(slots=True)
class StepCalls:
    """What a step's calls came to: results in call order, calls that wait, and the state changes to keep."""

    results: list[ToolMessage] = field(default_factory=list)
    suspensions: list[Suspension] = field(default_factory=list)
    kept: list[Kept] = field(default_factory=list)
    """The state changes of the calls that succeeded, in call order."""
    dropped: bool = False
    """True when a call whose arguments predicted state did not succeed: the client shows a prediction to take back."""
    granted: list[tuple[ToolCall, Grant]] = field(default_factory=list)
    """The calls that asked for a person and ran under a grant instead, with the grant, in call order."""


def with_prediction(suspension: Suspension, predicted: list[Operation]) -> Suspension:
    """The suspension, carrying the state its call's arguments predicted until an answer decides it."""
    if not predicted:
        return suspension
    return replace(suspension, pending=suspension.pending.model_copy(update={"state_patch": predicted}))


def tool_message(call_id: str, result: ToolResult) -> ToolMessage:
    """The ToolMessage that answers `call_id` with `result`."""
    return ToolMessage(id=new_id("msg"), tool_call_id=call_id, content=result.content, error=result.error)


def parse_arguments(text: str) -> dict[str, Any] | ToolResult:
    """The call's arguments as an object, or the result that tells the model why they are not one."""
    try:
        arguments = loads(text or "{}")
    except ValueError:
        return ToolResult("The arguments are not valid JSON (or nest too deeply).", error="invalid_arguments")
    if not isinstance(arguments, dict):
        return ToolResult("The arguments must be a JSON object.", error="invalid_arguments")
    return arguments


async def execute(
    call: ToolCall,
    tool: FunctionTool,
    context: ToolContext,
    arguments: Mapping[str, Any] | None = None,
    parent: telemetry.Span = telemetry.NULL_SPAN,
    held: Callable[[], ToolResult | None] | None = None,
    *,
    checked: bool = False,
) -> ToolResult | InputRequired:
    """Run a server tool (its span a child of the run's, `parent`); an `InputRequired` it raises is returned.

    `held` may answer instead of the tool, right before its function would be called (`FunctionTool.invoke`).
    `checked`: `arguments` were validated against the tool's schema already (an approval's `editedArgs`, by the
    resume gate, against the same schema object: `EngineConfig.tool_schemas`).
    """
    parsed = parse_arguments(call.arguments) if arguments is None else dict(arguments)
    if isinstance(parsed, ToolResult):
        return parsed
    span = telemetry.start("agui.tool", context.thread_id, context.run_id, parent, **{"agui.tool": tool.name})
    outcome, code = "error", None
    try:
        result = await tool.invoke(parsed, context, held, checked=checked)
        outcome, code = ("success", None) if result.error is None else ("error", result.error)
        return result
    except InputRequired as signal:
        outcome = "input_required"
        return signal
    finally:
        telemetry.finish(span, outcome, code)


async def run_calls(
    calls: Sequence[ToolCall],
    scope: CallScope,
    *,
    state: JSON = None,
    predicted: Mapping[str, list[Operation]] | None = None,
    over_limit: Collection[str] = (),
    grants: Mapping[str, Grant] | None = None,
) -> StepCalls:
    """Run what can run now, concurrently; suspend the rest. Results keep the calls' order.

    A call whose tool asks for a person (`BaseTool.asks`) runs under the thread's grant of its tool, in `grants`
    (by tool name, each from someone the policy lets approve now), unless the tool is not `grantable`.

    `over_limit` names the calls the turn's `CallBudget` had no room for: they get an error result. Each tool
    starts from `state` plus what its own arguments `predicted`. Once the scope's stop is raised no tool starts
    (each call is answered `stopped_before`), and a running tool declared `cancellable` is cancelled
    (`stopped_during`).
    """
    config, toolset, principal, parent, stop = scope.config, scope.toolset, scope.principal, scope.span, scope.stop
    run_input = scope.run_input
    assert run_input is not None  # a step's calls run within the run that made them
    predicted = predicted or {}
    done = StepCalls()
    results: dict[str, ToolResult] = {}
    runnable: list[tuple[ToolCall, FunctionTool]] = []
    for call in calls:
        waits = _triage(call, toolset.get(call.name), config, call.id in over_limit, results)
        if isinstance(waits, Suspension):
            done.suspensions.append(with_prediction(waits, predicted.get(call.id, [])))
        elif waits is not None:
            runnable.append((call, waits))
    limit = config.max_state_bytes
    checked: dict[str, dict[str, Any]] = {}
    cleared: set[str] = set()  # gated calls that run without a person: their rule said so, or a grant covers them
    gated = [(call, tool) for call, tool in runnable if tool.gated]
    # Each rule sees the state as the call would, in a view of its own: nothing a rule does reaches the tool.
    asked = await asyncio.gather(
        *(
            _asks(call, tool, tool_context(run_input, call.id, ToolState(state, limit), principal=principal))
            for call, tool in gated
        )
    )
    for (call, tool), (asks, arguments) in zip(gated, asked, strict=True):
        grant = (grants or {}).get(tool.name) if asks and tool.grantable else None
        if asks and grant is None:
            waiting = suspend(call, tool, config.policy, config.now())
            done.suspensions.append(with_prediction(waiting, predicted.get(call.id, [])))
            continue
        if grant is not None:
            done.granted.append((call, grant))
        cleared.add(call.id)
        if arguments is not None:
            checked[call.id] = arguments
    runnable = [(call, tool) for call, tool in runnable if not tool.gated or call.id in cleared]
    contexts = {
        call.id: tool_context(
            run_input,
            call.id,
            ToolState(state, limit, predicted=predicted.get(call.id, [])),
            principal=principal,
        )
        for call, _ in runnable
    }
    if stop is not None and stop.requested:
        results.update({call.id: stopped_before(tool.name) for call, tool in runnable})
        runnable = []
    outcomes = await asyncio.gather(
        *(_run_one(call, tool, contexts[call.id], parent, stop, checked.get(call.id)) for call, tool in runnable)
    )
    for (call, tool), outcome in zip(runnable, outcomes, strict=True):
        if isinstance(outcome, InputRequired):
            waiting = suspend(call, tool, config.policy, config.now(), signal=outcome)
            done.suspensions.append(with_prediction(waiting, predicted.get(call.id, [])))
        else:
            results[call.id] = outcome
    _collect(done, calls, results, contexts, predicted)
    order = {call.id: index for index, call in enumerate(calls)}
    done.suspensions.sort(key=lambda s: order[s.pending.call_id])
    return done


async def _asks(call: ToolCall, tool: FunctionTool, context: ToolContext) -> tuple[bool, dict[str, Any] | None]:
    """Whether a gated call waits for a person; and its arguments, when a rule was asked with them validated.

    A rule is asked only about arguments the tool would accept: a call with invalid ones runs to its
    `invalid_arguments` result, which calls nothing (`FunctionTool.invoke`).
    """
    if not callable(tool.requires_approval):
        return True, None
    arguments = parse_arguments(call.arguments)
    if isinstance(arguments, ToolResult) or (tool.parameters and await avalidate(arguments, dict(tool.parameters))):
        return False, None
    return await tool.asks(context, arguments), arguments


async def _run_one(
    call: ToolCall,
    tool: FunctionTool,
    context: ToolContext,
    parent: telemetry.Span,
    stop: StopSignal | None,
    checked: dict[str, Any] | None = None,
) -> ToolResult | InputRequired:
    """Execute one call; a cancellable tool races the run's stop, and a stop that wins cancels it.

    The stop is read once more right before the tool's function is called: once it is in, none is. `checked`
    are the call's arguments, validated already (for its approval rule): they are not validated again.
    """
    if stop is None or tool.cancellable:
        return await stoppable(call, tool, context, stop, checked, parent, checked=checked is not None)
    return await execute(
        call,
        tool,
        context,
        checked,
        parent,
        lambda: stopped_before(tool.name) if stop.requested else None,
        checked=checked is not None,
    )


async def stoppable(
    call: ToolCall,
    tool: FunctionTool,
    context: ToolContext,
    stop: StopSignal | None,
    arguments: Mapping[str, Any] | None = None,
    parent: telemetry.Span = telemetry.NULL_SPAN,
    *,
    checked: bool = False,
) -> ToolResult | InputRequired:
    """Execute one call as a stop may cut it short: a step's, or a resume's answer (`_answers`).

    A tool declared `cancellable` races the run's stop: a stop that wins cancels it (`stopped_during`), and once the
    stop is in it does not start (`stopped_before`). Any other tool runs whole.
    """
    if stop is None or not tool.cancellable:
        return await execute(call, tool, context, arguments, parent, checked=checked)
    running = execute(
        call,
        tool,
        context,
        arguments,
        parent,
        lambda: stopped_before(tool.name) if stop.requested else None,
        checked=checked,
    )
    return await stop.race(running, lambda: stopped_during(tool.name))


def _collect(
    done: StepCalls,
    calls: Sequence[ToolCall],
    results: Mapping[str, ToolResult],
    contexts: Mapping[str, ToolContext],
    predicted: Mapping[str, list[Operation]],
) -> None:
    """Add each call's result to `done` in call order, with the state changes of those that succeeded."""
    for call in calls:
        if call.id not in results:
            continue
        done.results.append(tool_message(call.id, results[call.id]))
        if results[call.id].error is None:
            done.kept.append(
                Kept(predicted.get(call.id, []), contexts[call.id].shared_state if call.id in contexts else None)
            )
        elif predicted.get(call.id):
            done.dropped = True


def _triage(
    call: ToolCall, tool: BaseTool | None, config: EngineConfig, over_limit: bool, results: dict[str, ToolResult]
) -> FunctionTool | Suspension | None:
    """The tool to run now, the suspension of a call that waits, or None once `results` holds its answer."""
    if over_limit:
        results[call.id] = ToolResult(f"The limit of {config.max_tool_calls} tool calls is reached.", TOOL_LIMIT)
    elif tool is None:
        results[call.id] = ToolResult(f"There is no tool named {call.name}.", error="unknown_tool")
    elif isinstance(tool, UserInputTool):
        picked = _pick_form(call, tool)
        if not isinstance(picked, ToolResult):
            return suspend(call, tool, config.policy, config.now(), signal=picked)
        results[call.id] = picked
    elif tool.external or (tool.gated and not isinstance(tool, FunctionTool)):
        return suspend(call, tool, config.policy, config.now())
    elif isinstance(tool, FunctionTool):
        return tool  # a gated one is asked about in `run_calls`
    return None


def _pick_form(call: ToolCall, tool: UserInputTool) -> InputRequired | ToolResult:
    """The form the model picked, as the signal a tool would raise for it; unknown keys are the model's error."""
    arguments = parse_arguments(call.arguments)
    key = arguments.get("formKey") if isinstance(arguments, dict) else None
    form = tool.form(key)
    if form is None:
        valid = ", ".join(tool.form_keys)
        return ToolResult(f"Unknown formKey {key!r}. Valid form keys: {valid}.", error="unknown_form")
    return FormRequired(form)
