"""After the lease, an answer may not contradict work the lapsed claim may have started: the rule as an invariant."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, TypeAlias

from ag_ui.core import ResumeEntry, RunAgentInput
from hypothesis import given, settings
from hypothesis import strategies as st

from adapter import ResumeError

# Private on purpose: the takeover rule as an invariant of the resume gate, over records built by hand.
from adapter._run._gate import Answer, Resume, check_resume
from adapter._thread._record import AppliedResume, OpenTurn, PendingCall, ThreadRecord, answer_fingerprint

LEASE = timedelta(minutes=5)
NOW = datetime(2030, 1, 1, tzinfo=UTC)
KINDS = ("approval", "input", "frontend", "form", "backend")
Given: TypeAlias = tuple[Literal["resolved", "cancelled"], Any]  # a resume entry's status and payload
ANSWERS: list[Given] = [
    ("resolved", {"approved": True}),
    ("resolved", {"approved": False}),
    ("resolved", {"approved": True, "editedArgs": {"amount": 5}}),
    ("cancelled", None),
]


def call(kind: str) -> PendingCall:
    return PendingCall(
        interrupt_id="int_1",
        tool_call_id="call_1",
        tool_name="pay",
        arguments="{}",
        kind=kind,
        reason=kind,
        response_schema={},
    )


def lapsed_record(kind: str, earlier: Given, started: list[str] | None) -> ThreadRecord:
    """A turn claimed by run r1 with `earlier` as its answer, the claim older than the lease."""
    turn = OpenTurn(turn_id="turn_1", run_id="r0", pending=[call(kind)], claimed_by="r1", claimed_at=NOW - LEASE)
    applied = AppliedResume(
        run_id="r1",
        fingerprints={"int_1": answer_fingerprint(*earlier)},
        approvals=["int_1"] if kind == "approval" else [],
        started=started,
    )
    return ThreadRecord(thread_id="t1", open_turn=turn, applied=applied)


def attempt(record: ThreadRecord, answer: Given) -> str | None:
    """The code the gate refuses `answer` with, or None when it lets the takeover apply it."""
    entry = ResumeEntry(interrupt_id="int_1", status=answer[0], payload=answer[1])
    run_input = RunAgentInput(thread_id="t1", run_id="r2", messages=[], tools=[], context=[], resume=[entry])
    try:
        asyncio.run(check_resume(record, run_input, now=NOW, claim_lease=LEASE, edited_args_schemas={}))
    except ResumeError as refused:
        return refused.code
    return None


@settings(max_examples=200)
@given(st.sampled_from(KINDS), st.sampled_from(ANSWERS), st.sampled_from(ANSWERS), st.booleans())
def test_a_takeover_may_not_contradict_work_the_lapsed_claim_may_have_started(
    kind: str, earlier: Given, later: Given, legacy: bool
) -> None:
    """Refused with RESUME_CONFLICT exactly when the earlier answer may have started work and the new one differs."""
    first = Answer(call(kind), earlier[0], earlier[1])
    started = None if legacy else (["int_1"] if first.starts_work else [])
    record = lapsed_record(kind, earlier, started)
    may_have_run = kind == "approval" if legacy else first.starts_work  # an older record: every answered approval
    contradicts = answer_fingerprint(*later) != answer_fingerprint(*earlier)

    code = attempt(record, later)

    if may_have_run and contradicts:
        assert code == "RESUME_CONFLICT"
    else:
        assert code != "RESUME_CONFLICT"


def test_an_approval_starts_work_only_when_approved() -> None:
    assert [Answer(call("approval"), status, payload).starts_work for status, payload in ANSWERS] == [
        True,
        False,
        True,
        False,
    ]


@settings(max_examples=100)
@given(st.sampled_from(KINDS), st.sampled_from(ANSWERS), st.sampled_from(ANSWERS))
def test_a_takeover_repeats_the_answers_the_lapsed_claim_already_applied(
    kind: str, earlier: Given, later: Given
) -> None:
    """A claim that died forwarding the backend's answer had applied its answer to int_1, which waits no more.

    The same answer to int_1 is a repeat (nothing applies it again) and the takeover's record keeps it; a
    different one is refused with RESUME_CONFLICT.
    """
    backend = call("backend").model_copy(update={"interrupt_id": "int_2", "tool_call_id": None})
    record = lapsed_record(kind, earlier, None)
    assert record.open_turn is not None
    assert record.applied is not None
    record.open_turn.pending = [backend]
    record.applied.fingerprints["int_2"] = answer_fingerprint("resolved", {"approved": True})
    entries = [
        ResumeEntry(interrupt_id="int_1", status=later[0], payload=later[1]),
        ResumeEntry(interrupt_id="int_2", status="resolved", payload={"approved": True}),
    ]
    run_input = RunAgentInput(thread_id="t1", run_id="r2", messages=[], tools=[], context=[], resume=entries)

    try:
        gate = asyncio.run(check_resume(record, run_input, now=NOW, claim_lease=LEASE, edited_args_schemas={}))
    except ResumeError as refused:
        assert answer_fingerprint(*later) != answer_fingerprint(*earlier)
        assert refused.code == "RESUME_CONFLICT"
        return

    assert answer_fingerprint(*later) == answer_fingerprint(*earlier)
    assert isinstance(gate, Resume)
    assert [a.call.interrupt_id for a in gate.answers] == ["int_2"]
    assert gate.earlier == record.applied
    taking_over = AppliedResume(run_id="r2", fingerprints={"int_2": record.applied.fingerprints["int_2"]})
    kept = gate.earlier.taken_over_by(taking_over)
    assert (kept.run_id, kept.fingerprints) == ("r2", record.applied.fingerprints)
