"""The resume gate: decide, before anything runs, whether an input may continue a suspended turn.

The whole batch is checked before any answer is applied, so a refused input leaves the stored turn
exactly as it was (AGUI-RULES RES-13). Codes are in `adapter._errors`.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from ag_ui.core import ResumeEntry, RunAgentInput, ToolMessage

from adapter import _errors as codes
from adapter._errors import ResumeError
from adapter._limits import MAX_REASON_CHARS, loads
from adapter._run._tools import avalidate, issues_text
from adapter._thread._conversation import of_kind
from adapter._thread._record import (
    AppliedResume,
    Grant,
    OpenTurn,
    PendingCall,
    ThreadRecord,
    answer_fingerprint,
    lapsed_outcome,
)
from adapter._types import JSON, wire_json
from schema_tools import SchemaPolicyError

if TYPE_CHECKING:
    from adapter._thread._handle import RecordHandle

log = logging.getLogger("adapter.gate")


@dataclass(frozen=True, slots=True)
class Answer:
    """One pending call's answer, from a resume entry or (older clients) a ToolMessage."""

    call: PendingCall
    status: Literal["resolved", "cancelled"]
    payload: JSON = None
    metadata: Mapping[str, Any] | None = None
    message: ToolMessage | None = None
    """The client's own ToolMessage, when it answered that way."""

    @property
    def fingerprint(self) -> str:
        """Equal for two answers that say the same thing."""
        return answer_fingerprint(self.status, self.payload)

    @property
    def request_id(self) -> str | None:
        """The submitter's `requestId` from the entry's metadata: one request applies once."""
        return _request_id(self.metadata)

    @property
    def approved(self) -> bool:
        """An approval answered `resolved` with `approved: true`."""
        return self.call.kind.decided and self.status == "resolved" and _approved(self.payload)

    @property
    def starts_work(self) -> bool:
        """Applying this answer may start work on the server: an approved tool, a tool given its input, the backend."""
        return self.call.kind.starts_work(resolved=self.status == "resolved", approved=self.approved)

    @property
    def edits(self) -> dict[str, Any] | None:
        """An approval's `editedArgs`, which replace the proposal whole (RES-3).

        None unless approved: a denial's `editedArgs` (which some UIs pre-fill) are ignored, and an
        empty `editedArgs` means no edits.
        """
        edited = self.payload.get("editedArgs") if self.approved and isinstance(self.payload, dict) else None
        return edited if isinstance(edited, dict) and edited else None

    @property
    def reason(self) -> str | None:
        """An approval's `reason`, the person's words for the model and the record; None without one.

        The gate checks it (a string of at most `MAX_REASON_CHARS`), whatever the frozen schema says.
        """
        said = self.payload.get("reason") if self.call.kind.decided and isinstance(self.payload, dict) else None
        return said if isinstance(said, str) and said else None

    @property
    def remember(self) -> bool:
        """An approval that allows its tool for the rest of the thread (`"remember": "thread"`); a denial's is void."""
        return self.approved and isinstance(self.payload, dict) and self.payload.get("remember") == "thread"

    @property
    def decision(self) -> JSON:
        """The payload as checked against the response schema.

        An approval's `editedArgs` are left out when ignored (a denial's) or checked on their own (an
        approval's object, against the tool's schema; see `edits`).
        """
        if not self.call.kind.decided or not isinstance(self.payload, dict):
            return self.payload
        if self.approved and not isinstance(self.payload.get("editedArgs", {}), dict):
            return self.payload  # not an object: the response schema refuses it
        return {key: value for key, value in self.payload.items() if key != "editedArgs"}


@dataclass(frozen=True, slots=True)
class Replay:
    """The input repeats a resume that was already applied: nothing runs again."""

    applied: AppliedResume
    lapsed: bool = False
    """The run that applied it recorded no outcome within the claim lease: `applied.outcome` is the one a replay
    records in its place (`_record.lapsed_outcome`), once (`with_lapsed_outcome`)."""


@dataclass(frozen=True, slots=True)
class Resume:
    """The input answers every pending call of the open turn, each exactly once."""

    turn: OpenTurn
    answers: list[Answer]
    earlier: AppliedResume | None = None
    """The unfinished resume of the lapsed claim this one takes over: its answers applied before it died stand."""

    def claimed(self, run_id: str, now: datetime) -> tuple[OpenTurn, AppliedResume]:
        """The open turn as claimed by `run_id`, and the record of the answers it applies."""
        claimed = self.turn.model_copy(update={"claimed_by": run_id, "claimed_at": now})
        return claimed, self.applied(run_id, now)

    def applied(self, run_id: str, now: datetime) -> AppliedResume:
        """The record of the answers `run_id` applies: alone, for a claim that closes the turn in the same save."""
        answers = self.answers
        applied = AppliedResume(
            run_id=run_id,
            fingerprints={answer.call.interrupt_id: answer.fingerprint for answer in answers},
            request_ids={a.call.interrupt_id: a.request_id for a in answers if a.request_id is not None},
            action_ids={a.call.tool_call_id: a.call.interrupt_id for a in answers if a.call.tool_call_id},
            approvals=[a.call.interrupt_id for a in answers if a.call.kind.decided],
            started=[a.call.interrupt_id for a in answers if a.starts_work],
            applied_at=now,
        )
        if self.earlier is not None:
            applied = self.earlier.taken_over_by(applied)
        return applied

    def grants(self, principal: str | None, now: datetime) -> list[Grant]:
        """The grants its approvals make (`"remember": "thread"`), by `principal`: stored with the claim."""
        return [Grant(tool=a.call.tool_name, granted_by=principal, granted_at=now) for a in self.answers if a.remember]


async def with_lapsed_outcome(gate: Replay | Resume | None, handle: RecordHandle) -> Replay | Resume | None:
    """The gate's choice, with a lapsed replay's outcome recorded once (`Replay.lapsed`); any other as it is.

    Of two replays racing after the lease, and the run's own late ending, the first outcome stored stands,
    and the replay gives that one.
    """
    if not isinstance(gate, Replay) or not gate.lapsed or gate.applied.outcome is None:
        return gate
    run_id = gate.applied.run_id
    await handle.record_outcome(run_id, gate.applied.outcome)
    stored = handle.record.applied
    if stored is not None and stored.run_id == run_id and stored.outcome is not None:
        return Replay(stored)  # another request recorded it first (read again after the conflict)
    return Replay(gate.applied)


async def check_resume(
    record: ThreadRecord | None,
    run_input: RunAgentInput,
    *,
    now: datetime,
    claim_lease: timedelta,
    edited_args_schemas: Mapping[str, Mapping[str, Any]],
    grantable: Collection[str] = frozenset(),
) -> Replay | Resume | None:
    """Classify the input against the thread's record; None means an ordinary run.

    `grantable` names the tools an approval may allow for the rest of the thread (`"remember": "thread"`).

    Raises:
        ResumeError: the input may not run; nothing was changed.
    """
    entries = run_input.resume or []
    turn = record.open_turn if record else None
    lapsed = turn is not None and turn.claim_lapsed(now, claim_lease)
    # A lapsed claim's answers were never finished: they are taken over, not replayed.
    replay = None if lapsed else _replay_of(record, entries, now=now, claim_lease=claim_lease)
    if replay is not None:
        return replay
    if turn is None:
        if entries:
            ids = ", ".join(entry.interrupt_id for entry in entries)
            raise ResumeError(f"no open interrupt on this thread matches: {ids}", code=codes.RESUME_UNKNOWN_INTERRUPT)
        return None
    earlier = claimable(turn, record.applied if record is not None else None, now=now, claim_lease=claim_lease)
    if earlier is not None:
        entries = _still_to_apply(earlier, turn, entries)
    answers = _collect_answers(turn, entries, run_input)
    if earlier is not None:
        refuse_contradiction(earlier, answers)
    for answer in answers:
        await _check_answer(answer, now=now, edited_args_schema=edited_args_schemas.get(answer.call.tool_name))
        if answer.call.kind.decided:
            _check_remember(answer, grantable)
    return Resume(turn, answers, earlier)


def claimable(
    turn: OpenTurn, applied: AppliedResume | None, *, now: datetime, claim_lease: timedelta
) -> AppliedResume | None:
    """The claim rules, for every door that answers a turn: refuse one being applied; find a lapsed claim's answers.

    Returns:
        The lapsed claim's applied resume (a takeover keeps its answers: `refuse_contradiction`), or None.

    Raises:
        ResumeError: RESUME_CONFLICT while another run's claim holds.
    """
    if turn.claim_holds(now, claim_lease):
        raise still_applying(
            f"run {turn.claimed_by} is applying a resume of this turn", turn.retry_after(now, claim_lease)
        )
    lapsed = turn.claim_lapsed(now, claim_lease)
    return applied if lapsed and applied is not None and applied.run_id == turn.claimed_by else None


def _still_to_apply(earlier: AppliedResume, turn: OpenTurn, entries: list[ResumeEntry]) -> list[ResumeEntry]:
    """The entries a takeover applies: the lapsed claim's answers that no longer wait were applied already.

    A claim that died forwarding the backend's answers had applied the answers to our own interrupts
    (their tools run, their results stored): the same resume sent again repeats them, and is let through.
    """
    remaining = []
    for entry in entries:
        if turn.find(entry.interrupt_id) is not None or entry.interrupt_id not in earlier.fingerprints:
            remaining.append(entry)
        elif not _repeats(earlier, entry):
            raise ResumeError(
                f"interrupt {entry.interrupt_id} was already answered differently", code=codes.RESUME_CONFLICT
            )
    return remaining


def _repeats(applied: AppliedResume, entry: ResumeEntry) -> bool:
    """`entry` says what `applied` answered its interrupt with, or is the same submission again."""
    request_id = _request_id(entry.metadata)
    if request_id is not None and applied.request_ids.get(entry.interrupt_id) == request_id:
        return True  # the same submission again, whatever it says now: it was applied once
    return answer_fingerprint(entry.status, entry.payload) == applied.fingerprints[entry.interrupt_id]


def refuse_contradiction(earlier: AppliedResume, answers: list[Answer]) -> None:
    """After the lease, only the lapsed claim's own answer may finish a call that claim may have started.

    The replica that claimed the turn may have run the tool before it died or stalled: storing another
    answer (a denial, a cancel, other edits) would contradict what happened.
    """
    for answer in answers:
        call = answer.call
        if call.interrupt_id in earlier.may_have_started() and answer.fingerprint != earlier.fingerprints.get(
            call.interrupt_id
        ):
            raise ResumeError(
                f"an earlier attempt answered interrupt {call.interrupt_id} and {call.tool_name} may have run; "
                "only the same answer can finish this turn",
                code=codes.RESUME_CONFLICT,
            )


def _request_id(metadata: Mapping[str, Any] | None) -> str | None:
    value = metadata.get("requestId") if isinstance(metadata, Mapping) else None
    return value if isinstance(value, str) and value else None


def still_applying(what: str, retry_after: int) -> ResumeError:
    """RESUME_CONFLICT while a claim holds: says when to retry (`details.retryAfter`, whole seconds)."""
    return ResumeError(
        f"{what}; retry in {retry_after} s", code=codes.RESUME_CONFLICT, details={"retryAfter": retry_after}
    )


def _replay_of(
    record: ThreadRecord | None, entries: list[ResumeEntry], *, now: datetime, claim_lease: timedelta
) -> Replay | None:
    """The replay `entries` make of the applied resume, or None; a conflict while its run may still record an outcome.

    Every "still applying" state has the claim's lease: after it, the replay ends with `lapsed_outcome`.
    """
    applied = record.applied if record else None
    if not entries or applied is None or any(entry.interrupt_id not in applied.fingerprints for entry in entries):
        return None
    for entry in entries:
        if not _repeats(applied, entry):
            raise ResumeError(
                f"interrupt {entry.interrupt_id} was already answered differently", code=codes.RESUME_CONFLICT
            )
    if applied.still_applying(now, claim_lease):
        raise still_applying(
            f"run {applied.run_id} is still applying this resume", applied.retry_after(now, claim_lease)
        )
    if applied.outcome is None:
        return Replay(applied.model_copy(update={"outcome": lapsed_outcome()}), lapsed=True)
    return Replay(applied)


def passed_over(record: ThreadRecord | None, run_input: RunAgentInput) -> tuple[RunAgentInput, tuple[str, ...]]:
    """AG-UI 1.1's handling of unrecognised resume entries (`unknown_resume_entries="warn"`).

    An entry naming an interrupt this thread never raised is left out, and the run goes on without it: the input
    without those entries, and their interrupt ids for the warning. An entry naming an open interrupt, or one this
    thread's last resume applied (a replay), is kept: the gate judges it as before.
    """
    turn = record.open_turn if record else None
    applied = record.applied if record else None

    def known(interrupt_id: str) -> bool:
        return (turn is not None and turn.find(interrupt_id) is not None) or (
            applied is not None and interrupt_id in applied.fingerprints
        )

    entries = run_input.resume or []
    unknown = tuple(entry.interrupt_id for entry in entries if not known(entry.interrupt_id))
    if not unknown:
        return run_input, ()
    kept = [entry for entry in entries if known(entry.interrupt_id)]
    return run_input.model_copy(update={"resume": kept or None}), unknown


def _collect_answers(turn: OpenTurn, entries: list[ResumeEntry], run_input: RunAgentInput) -> list[Answer]:
    by_interrupt: dict[str, Answer] = {}
    for entry in entries:
        call = turn.find(entry.interrupt_id)
        if call is None:
            raise ResumeError(f"{_addressed(entry)} is not open on this thread", code=codes.RESUME_UNKNOWN_INTERRUPT)
        if entry.interrupt_id in by_interrupt:
            raise ResumeError(f"interrupt {entry.interrupt_id} is answered twice", code=codes.RESUME_DUPLICATE)
        action_id = (entry.metadata or {}).get("actionId")
        if action_id is not None and action_id != call.tool_call_id:
            raise ResumeError(
                f"interrupt {entry.interrupt_id} belongs to action {call.tool_call_id}, not {action_id}",
                code=codes.RESUME_UNKNOWN_INTERRUPT,
            )
        by_interrupt[entry.interrupt_id] = Answer(call, entry.status, entry.payload, entry.metadata)
    by_call: dict[str | None, PendingCall] = {}
    for pending in turn.pending:
        by_call.setdefault(pending.tool_call_id, pending)  # the first call of an id, as a search would find
    for tool in of_kind(run_input.messages, ToolMessage):
        call = by_call.get(tool.tool_call_id)
        if call is not None and call.interrupt_id not in by_interrupt:
            _refuse_tool_message_approval(call)
            by_interrupt[call.interrupt_id] = Answer(call, "resolved", _content_payload(tool), message=tool)
    if not by_interrupt:
        raise answers_required(", ".join(call.interrupt_id for call in turn.pending))
    missing = [call.interrupt_id for call in turn.pending if call.interrupt_id not in by_interrupt]
    if missing:
        raise answers_missing(", ".join(missing), missing)
    return [by_interrupt[call.interrupt_id] for call in turn.pending]


def _addressed(entry: ResumeEntry) -> str:
    """How the entry named its interrupt: by an action id no request has (`_thread_api.resume_entries`), or its id."""
    action_id = (entry.metadata or {}).get("actionId")
    return f"action {action_id}" if action_id == entry.interrupt_id else f"interrupt {entry.interrupt_id}"


def answers_required(named: str) -> ResumeError:
    """RESUME_REQUIRED: a new input while a turn waits; `named` lists the interrupts (as the caller may see them)."""
    return ResumeError(f"this thread waits for answers to: {named}", code=codes.RESUME_REQUIRED)


def answers_missing(named: str, missing: list[str]) -> ResumeError:
    """RESUME_INCOMPLETE: a resume that leaves open interrupts unanswered; `missing` are their ids, in `details`."""
    return ResumeError(
        f"every open interrupt needs an answer; missing: {named}", code=codes.RESUME_INCOMPLETE, details=missing
    )


def _refuse_tool_message_approval(call: PendingCall) -> None:
    """A tool result is not a person's decision: an approval is answered only by a `resume` entry."""
    if call.kind.decided:
        raise ResumeError(
            f"interrupt {call.interrupt_id} is an approval: answer it with a resume entry, not a tool message",
            code=codes.RESUME_REQUIRED,
        )


def _approved(payload: JSON) -> bool:
    return isinstance(payload, dict) and payload.get("approved") is True


def _content_payload(message: ToolMessage) -> JSON:
    if not isinstance(message.content, str):
        return [wire_json(part) for part in message.content]
    try:
        return loads(message.content)
    except ValueError:  # not JSON, or too deep to be: the text itself is the answer
        return message.content


async def _check_answer(answer: Answer, *, now: datetime, edited_args_schema: Mapping[str, Any] | None) -> None:
    call = answer.call
    if answer.status == "cancelled":
        return  # abandoning is always allowed, expired or not (RES-12)
    if call.expires_at is not None and now >= call.expires_at:
        raise ResumeError(
            f"interrupt {call.interrupt_id} expired at {call.expires_at.isoformat()}; it can only be cancelled",
            code=codes.RESUME_EXPIRED,
        )
    if answer.message is not None and call.kind.clients_own:
        return  # a client's own ToolMessage answers its own tool as it likes (FE-4)
    if call.kind.decided:
        _check_reason(answer)
    # A backend's own interrupt is checked against the schema it sent, so that a payload it would refuse
    # never leaves; an interrupt without a schema takes any answer, passed on unchanged.
    try:
        await _require_valid(answer.decision, call.response_schema, call.interrupt_id, "payload")
    except SchemaPolicyError:
        if not call.kind.forwarded:
            raise
        # A schema we cannot use (unresolvable $ref, invalid keyword) is the backend's to apply: it gets the answer.
        log.warning(
            "interrupt %s came with a schema the gate cannot apply; its answer passes unchecked", call.interrupt_id
        )
    if answer.edits is not None:
        schema = edited_args_schema or {}
        await _require_valid(answer.edits, schema, call.interrupt_id, "editedArgs", at="/editedArgs")


def _check_remember(answer: Answer, grantable: Collection[str]) -> None:
    """Refuse `remember` but as "thread", and on an approval of a tool that takes no grant; the approval stays open."""
    said = answer.payload.get("remember") if isinstance(answer.payload, dict) and answer.status == "resolved" else None
    call = answer.call
    if said is None:
        return
    if said != "thread":
        raise ResumeError(
            f'remember for interrupt {call.interrupt_id} can only be "thread"',
            code=codes.RESUME_PAYLOAD_INVALID,
            details=[{"pointer": "/remember", "keyword": "enum", "message": 'remember must be "thread"'}],
        )
    if answer.remember and call.tool_name not in grantable:
        raise ResumeError(
            f"{call.tool_name} takes no grant: approve this call without remember, and each later call is asked",
            code=codes.RESUME_GRANT_REFUSED,
        )


def _check_reason(answer: Answer) -> None:
    """Refuse an approval's `reason` that is not a string within `MAX_REASON_CHARS`.

    Checked here, not only by the schema: a turn suspended before the approval schema offered `reason` froze a
    schema that lets any value through.
    """
    said = answer.payload.get("reason") if isinstance(answer.payload, dict) else None
    interrupt_id = answer.call.interrupt_id
    if said is None:
        return
    if not isinstance(said, str):
        raise ResumeError(
            f"the reason for interrupt {interrupt_id} must be a string",
            code=codes.RESUME_PAYLOAD_INVALID,
            details=[{"pointer": "/reason", "keyword": "type", "message": "reason must be a string"}],
        )
    if len(said) > MAX_REASON_CHARS:
        raise ResumeError(
            f"the reason for interrupt {interrupt_id} has {len(said)} characters; at most {MAX_REASON_CHARS}",
            code=codes.RESUME_REASON_TOO_LONG,
            details={"maxChars": MAX_REASON_CHARS},
        )


async def _require_valid(
    instance: JSON, schema: Mapping[str, Any], interrupt_id: str, what: str, *, at: str = ""
) -> None:
    """Refuse `instance` unless it fits `schema`; pointers point into the payload (`at` is where it sits)."""
    if not schema:
        return  # `{}` holds every value: a client tool's answer, most often, is checked against nothing
    issues = [replace(issue, pointer=at + issue.pointer) for issue in await avalidate(instance, dict(schema))]
    if issues:
        raise ResumeError(
            f"the {what} for interrupt {interrupt_id} does not match its schema: {issues_text(issues)}",
            code=codes.RESUME_PAYLOAD_INVALID,
            details=[
                {"pointer": issue.pointer, "keyword": issue.keyword, "message": issue.message} for issue in issues
            ],
        )
