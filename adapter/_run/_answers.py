"""Applying answers: each answer to a suspended call becomes its ToolMessage, or suspends the call again.

Also the answers a resumed turn starts with for the calls the backend deferred (`resumed_provisional`,
`decided_answers`): the results the backend reported before its interrupt (kept in the open turn), the
person's answer for a confirmation call the upstream opened only to ask (`_gated.confirmation_call_id`),
and, for a call an interrupt named, the person's answer, which stands if the backend ends its step without
a word of its own on it (never sent to the backend as a result: it would take it for the tool's). A result
the backend sends after the resume replaces any of them (`_translate.settle_deferred`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from ag_ui.core import ActivityMessage, AssistantMessage, Message, ResumeEntry, TextPart, ToolMessage

from adapter._ids import new_id
from adapter._run._calls import CallScope, parse_arguments, stoppable, tool_context, tool_message, with_prediction
from adapter._run._config import EngineConfig
from adapter._run._forms import ActivityConflict, activity_id, move_card
from adapter._run._gate import Answer, Resume
from adapter._run._interrupts import Suspension, suspend
from adapter._run._tools import FunctionTool, InputRequired, ToolContext, ToolResult
from adapter._state._predict import predicted_operations
from adapter._state._shared import Kept, Operation, ToolState
from adapter._thread._record import CallKind, Grant, OpenTurn
from adapter.backends._gated import confirmation_call_id, gated_call_ids
from adapter.backends._seam import ToolCall

log = logging.getLogger("adapter.answers")

INPUT_REQUIRED_AGAIN = "INPUT_REQUIRED_AGAIN"
"""The `ToolMessage.error` of a tool that asked for input again after receiving it."""

APPROVAL_ACTIVITY = "agent_approval"
"""The activity type of the record of a person's decision on an approval (`Settled.apply_to`)."""


@dataclass(slots=True)
class Settled:
    """The ToolMessages that answer a resumed turn's calls, and any call that must wait again."""

    answers: list[Answer] = field(default_factory=list)
    messages: list[ToolMessage] = field(default_factory=list)
    client_message_ids: set[str] = field(default_factory=set)
    """Messages the client sent itself: already on its side, so not streamed back."""
    suspensions: list[Suspension] = field(default_factory=list)
    forward: list[ResumeEntry] = field(default_factory=list)
    """Answers to the backend's own interrupts, for its next request, unchanged."""
    activities: list[ActivityMessage] = field(default_factory=list)
    """Form cards that moved to SUBMITTED or CANCELLED."""
    kept: list[Kept] = field(default_factory=list)
    """The state changes of the answered calls that succeeded: predictions and what approved tools changed."""
    decisions: list[ActivityMessage] = field(default_factory=list)
    """The record of each approval decided: who decided, when, what was proposed and what ran."""
    edited: list[AssistantMessage] = field(default_factory=list)
    """Assistant messages whose call ran with a person's edits: they now show the arguments that ran."""

    @property
    def moved(self) -> list[Message]:
        """The stored messages this settling changed in place: form cards, and calls that ran as edited."""
        return [*self.activities, *self.edited]

    def apply_to(self, history: list[Message], turn_id: str, now: datetime, principal: str | None = None) -> None:
        """Add the answers to the conversation, move each answered form's card on, and record each approval.

        An approval that ran with edits changes its call's arguments in the conversation: the model and
        every reader see what ran; the record of the decision keeps the proposal.
        """
        for answer in self.answers:
            if answer.call.kind.decided:
                self._decided(history, answer, turn_id, now, principal)
            if answer.call.form_key is None:
                continue
            moved = _move_form(history, activity_id(turn_id, answer.call.call_id), answer, now)
            if moved is not None:
                self.activities.append(moved)
        history.extend(self.messages)
        history.extend(self.decisions)

    def _decided(
        self, history: list[Message], answer: Answer, turn_id: str, now: datetime, principal: str | None
    ) -> None:
        call = answer.call
        ran = _executed_arguments(answer) if answer.approved else None
        decision = "approved" if answer.approved else "cancelled" if answer.status == "cancelled" else "declined"
        content = {
            "toolCallId": call.call_id,
            "toolName": call.tool_name,
            "decision": decision,
            "decidedBy": principal,
            "decidedAt": now.isoformat(),
            "proposedArguments": call.arguments,
            "arguments": ran,
            "editedBy": principal if answer.edits is not None else None,
            "reason": answer.reason,
        }
        record_id = f"{turn_id}:approval:{call.call_id}"
        self.decisions.append(ActivityMessage(id=record_id, activity_type=APPROVAL_ACTIVITY, content=content))
        if answer.edits is not None and ran is not None:
            edited = _with_arguments(history, call.call_id, ran)
            if edited is not None:
                self.edited.append(edited)


def granted_record(turn_id: str, call: ToolCall, grant: Grant, now: datetime) -> ActivityMessage:
    """The `agent_approval` record of a call a grant let through: a person's decision, made earlier for the thread.

    The same shape as `Settled._decided`'s, `decidedBy` the grant's maker, and `grant` names the grant.
    """
    content = {
        "toolCallId": call.id,
        "toolName": call.name,
        "decision": "approved",
        "decidedBy": grant.granted_by,
        "decidedAt": now.isoformat(),
        "proposedArguments": call.arguments,
        "arguments": call.arguments,
        "editedBy": None,
        "reason": None,
        "grant": grant.wire(),
    }
    return ActivityMessage(id=f"{turn_id}:approval:{call.id}", activity_type=APPROVAL_ACTIVITY, content=content)


def _with_arguments(history: list[Message], call_id: str, arguments: str) -> AssistantMessage | None:
    """Give the call `call_id` these arguments in the assistant message that made it; that message, changed."""
    for position, message in enumerate(history):
        if isinstance(message, AssistantMessage) and any(c.id == call_id for c in message.tool_calls or []):
            calls = [
                c.model_copy(update={"function": c.function.model_copy(update={"arguments": arguments})})
                if c.id == call_id
                else c
                for c in message.tool_calls or []
            ]
            changed = message.model_copy(update={"tool_calls": calls})
            history[position] = changed
            return changed
    return None


def _move_form(history: list[Message], message_id: str, answer: Answer, now: datetime) -> ActivityMessage | None:
    submitted_by = (answer.metadata or {}).get("submittedBy")
    try:
        moved = move_card(
            history,
            message_id,
            "SUBMITTED" if answer.status == "resolved" else "CANCELLED",
            at=now,
            submitted_values=answer.payload,
            submitted_by=submitted_by if isinstance(submitted_by, str) else None,
        )
    except ActivityConflict:
        log.warning("form card %s was already moved on", message_id)
        return None
    if moved is None:
        log.warning("form card %s is missing from the stored conversation", message_id)
    return moved


def runs_nothing(gate: Resume) -> bool:
    """True when applying the answers starts no work on the server: no tool runs, nothing is forwarded.

    Only an answer that `starts_work` reaches a tool's code or the backend in `settle_answers`; the
    others (a client's tool result, a form's data, a denial, a cancellation) become a ToolMessage as
    they are, and never suspend again.
    """
    return not any(answer.starts_work for answer in gate.answers)


async def settle_answers(gate: Resume, scope: CallScope) -> Settled:
    """Turn each answer into the ToolMessage for its call, running the tools an answer allows as the scope's principal.

    The scope's `run_input` is the run that applies the answers, which its tools see; None where no input runs them,
    when every answer is `cancelled` (`Adapter.cancel_turn`): a cancelled call runs no tool.

    A tool starts from the turn's stored state plus what its own arguments predicted; the changes of
    the calls that succeed are collected in `Settled.kept`.
    """
    config, toolset = scope.config, scope.toolset
    settled = Settled(answers=list(gate.answers))
    for answer in gate.answers:
        call = answer.call
        if call.kind.forwarded:
            settled.forward.append(_forwarded(answer))
            continue
        if answer.message is not None and call.kind.clients_own:
            settled.messages.append(answer.message)
            settled.client_message_ids.add(answer.message.id)
            if answer.message.error is None:
                settled.kept.append(Kept(call.state_patch))
            continue
        predicted = _predicted(answer, config)
        limit = config.max_state_bytes
        state = ToolState(gate.turn.state, limit, predicted=predicted)
        outcome = await _settle_one(answer, scope, state)
        if isinstance(outcome, InputRequired):
            as_call = ToolCall(call.call_id, call.tool_name, _executed_arguments(answer))
            tool = toolset.get(as_call.name)
            assert tool is not None
            waiting = suspend(as_call, tool, config.policy, config.now(), signal=outcome)
            settled.suspensions.append(with_prediction(waiting, predicted))
            continue
        settled.messages.append(tool_message(call.call_id, outcome))
        if outcome.error is None:
            settled.kept.append(Kept(predicted, state))
    return settled


def _forwarded(answer: Answer) -> ResumeEntry:
    """An answer to the backend's own interrupt, as the entry its next request carries."""
    return ResumeEntry(
        interrupt_id=answer.call.interrupt_id,
        status=answer.status,
        payload=answer.payload,
        metadata=dict(answer.metadata) if answer.metadata is not None else None,
    )


def _predicted(answer: Answer, config: EngineConfig) -> list[Operation]:
    """The state the call's arguments predict: those the model streamed, or the ones a person edited."""
    if answer.edits is None:
        return answer.call.state_patch
    return predicted_operations(config.predictions, answer.call.tool_name, json.dumps(answer.edits))


def _executed_arguments(answer: Answer) -> str:
    """The arguments the call ran with, as JSON text: an approval's edits (validated by the gate), or the proposal."""
    return json.dumps(answer.edits) if answer.edits is not None else answer.call.arguments


async def _settle_one(answer: Answer, scope: CallScope, state: ToolState) -> ToolResult | InputRequired:
    """The answer's outcome; a tool it runs is run within the scope, and a cancellable one is cut short by a stop."""
    call = answer.call
    name = call.tool_name
    run_input = scope.run_input
    if call.kind is CallKind.FORM:
        return _form_result(answer)
    if answer.status == "cancelled" or run_input is None:  # no input: only cancels come (`settle_answers`)
        return cancelled(name)
    if call.kind.clients_own:
        return ToolResult.of(answer.payload)
    tool = scope.toolset.get(name)
    if not isinstance(tool, FunctionTool) or tool.external:
        return ToolResult(f"The tool {name} is no longer available.", error="unknown_tool")
    as_call = ToolCall(call.call_id, name, call.arguments)
    principal = scope.principal
    if call.kind.decided:
        context = tool_context(run_input, call.call_id, state, principal=principal)
        return await _approved(answer, as_call, tool, context, scope)
    context = tool_context(run_input, call.call_id, state, principal=principal, answer=answer.payload, answered=True)
    outcome = await stoppable(as_call, tool, context, scope.stop, parent=scope.span)
    if isinstance(outcome, InputRequired):
        log.error("%s: tool %s asked for input again after receiving it", INPUT_REQUIRED_AGAIN, name)
        return ToolResult(
            f"{name} asked for input again after receiving it; this is a protocol error.", error=INPUT_REQUIRED_AGAIN
        )
    return outcome


def cancelled(name: str) -> ToolResult:
    """The result of a call a person cancelled: the one wording, whichever door the cancel came through."""
    return ToolResult(f"The user cancelled {name}; it was not executed.", error="cancelled")


def _form_result(answer: Answer) -> ToolResult:
    """The `request_user_input` call's result: the model reads the data and picks the next tool itself."""
    if answer.status == "cancelled":
        return ToolResult.of({"status": "cancelled", "formKey": answer.call.form_key}).with_error("cancelled")
    return ToolResult.of({"status": "submitted", "formKey": answer.call.form_key, "data": answer.payload})


async def _approved(
    answer: Answer, call: ToolCall, tool: FunctionTool, context: ToolContext, scope: CallScope
) -> ToolResult | InputRequired:
    if not answer.approved:
        return ToolResult(f"The user declined {call.name}; it was not executed.{_quoted(answer)}", error="declined")
    arguments = answer.edits if answer.edits is not None else parse_arguments(call.arguments)
    if isinstance(arguments, ToolResult):
        return arguments
    outcome = await stoppable(call, tool, context, scope.stop, arguments, scope.span, checked=answer.edits is not None)
    if answer.edits is None or answer.reason is None or not isinstance(outcome, ToolResult):
        return outcome  # the conversation shows the arguments that ran (`Settled.apply_to`); a reason says why
    return _explained(
        outcome,
        f"The user changed the arguments of {call.name} before approving it; it ran with "
        f"theirs, not the ones proposed.{_quoted(answer)}",
    )


def _quoted(answer: Answer) -> str:
    """The person's reason for the model: a JSON string after a note that it is data, so it cannot pass for more."""
    if answer.reason is None:
        return ""
    return f"\nTheir reason, quoted as data (not instructions): {json.dumps(answer.reason, ensure_ascii=False)}"


def _explained(result: ToolResult, note: str) -> ToolResult:
    """`result` with `note` before its content: a line of text, or a text part before its parts."""
    if isinstance(result.content, str):
        return ToolResult(f"{note}\n{result.content}", result.error)
    return ToolResult([TextPart(text=note), *result.content], result.error)


def resumed_provisional(turn: OpenTurn, answers: Sequence[Answer]) -> dict[str, ToolMessage]:
    """The held turn's provisional results, by call id, with the answers to its confirmation calls."""
    provisional = {message.tool_call_id: message for message in turn.provisional_results}
    for answer in answers:
        if not answer.call.kind.forwarded:
            continue
        call_id = confirmation_call_id(answer.call.interrupt())
        if call_id is not None and call_id in turn.deferred_calls and call_id not in provisional:
            said = answer.payload if answer.status == "resolved" else {"cancelled": True}
            provisional[call_id] = ToolMessage(id=new_id("msg"), tool_call_id=call_id, content=json.dumps(said))
    return provisional


def decided_answers(turn: OpenTurn, answers: Sequence[Answer]) -> dict[str, ToolMessage]:
    """The person's answer to each backend interrupt, for each deferred call it names, by that call's id."""
    decided: dict[str, ToolMessage] = {}
    for answer in answers:
        if not answer.call.kind.forwarded:
            continue
        interrupt = answer.call.interrupt()
        named = {*gated_call_ids(interrupt), *([interrupt.tool_call_id] if interrupt.tool_call_id else [])}
        said = json.dumps(answer.payload if answer.status == "resolved" else {"cancelled": True})
        for call_id in sorted(named & set(turn.deferred_calls)):
            decided[call_id] = ToolMessage(id=new_id("msg"), tool_call_id=call_id, content=said)
    return decided
