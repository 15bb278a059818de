"""The access rules as properties, over every policy a table of (is the owner, action) -> bool can express."""

from __future__ import annotations

import asyncio
from typing import Any

from ag_ui.core import (
    Interrupt,
    ResumeEntry,
    RunAgentInput,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunStartedEvent,
    TextMessageContentEvent,
    UserMessage,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from adapter import Action, Forbidden, ResumeError

# Private on purpose: the access rules as properties of the policy objects themselves, over every policy table.
from adapter._run._access import Access, View
from adapter._thread._record import AppliedResume, OpenTurn, PendingCall, ThreadRecord

ACTIONS: tuple[Action, ...] = ("read", "run", "resume", "approve")
Policy = dict[tuple[bool, Action], bool]
policies = st.fixed_dictionaries({(owner, action): st.booleans() for owner in (True, False) for action in ACTIONS})


def access(policy: Policy) -> Access:
    return Access(lambda principal, owner, action: policy[(principal == owner, action)])


def pending(interrupt_id: str, kind: str) -> PendingCall:
    return PendingCall(
        interrupt_id=interrupt_id,
        tool_call_id=f"call_{interrupt_id}",
        tool_name="pay" if kind == "approval" else "navigate",
        arguments="{}",
        kind=kind,
        reason="tool_call",
        response_schema={},
        message=f"secret of {interrupt_id}",
    )


RECORD = ThreadRecord(
    thread_id="t1",
    owner="alice",
    open_turn=OpenTurn(
        turn_id="turn", run_id="r0", pending=[pending("open_approval", "approval"), pending("open_tool", "frontend")]
    ),
    applied=AppliedResume(run_id="r-1", fingerprints={"old_approval": "x"}, approvals=["old_approval"]),
)
IDS = ["open_approval", "open_tool", "old_approval", "random"]


def attempt(policy: Policy, principal: str, ids: list[str]) -> tuple[str, str] | None:
    entries = [ResumeEntry(interrupt_id=i, status="resolved", payload={"approved": True}) for i in ids]
    run_input = RunAgentInput(
        thread_id="t1", run_id="r1", messages=[UserMessage(id="u", content="hi")], tools=[], context=[], resume=entries
    )
    try:
        asyncio.run(access(policy).check_input(principal, RECORD, run_input))
    except Forbidden as refused:
        return refused.code, refused.message
    return None


@settings(max_examples=150)
@given(policies, st.sampled_from(["alice", "bob"]), st.lists(st.sampled_from(IDS), max_size=3, unique=True))
def test_a_caller_who_may_not_read_is_refused_the_same_way_whatever_it_asks(
    policy: Policy, principal: str, ids: list[str]
) -> None:
    refusal = attempt(policy, principal, ids)

    if refusal is not None and not policy[(principal == "alice", "read")]:
        assert refusal == ("THREAD_FORBIDDEN", "this caller may not use this thread")


@settings(max_examples=100)
@given(policies, st.sampled_from(["alice", "bob"]))
def test_a_caller_who_may_not_read_sees_no_content_and_no_interrupt_it_may_not_answer(
    policy: Policy, principal: str
) -> None:
    view = asyncio.run(View.of(access(policy), principal, RECORD))
    turn = RECORD.open_turn
    assert turn is not None
    interrupts = [call.interrupt() for call in turn.pending]
    finished = RunFinishedEvent(thread_id="t1", run_id="r1", outcome=RunFinishedInterruptOutcome(interrupts=interrupts))
    events: list[Any] = [
        RunStartedEvent(thread_id="t1", run_id="r1"),
        TextMessageContentEvent(message_id="m", delta="secret"),
        finished,
    ]

    shown = [asyncio.run(view.shown(event, turn)) for event in events]

    if policy[(principal == "alice", "read")]:
        assert shown == events
        return
    assert shown[1] is None
    (outcome,) = [event.outcome for event in shown if isinstance(event, RunFinishedEvent)]
    assert isinstance(outcome, RunFinishedInterruptOutcome)
    for interrupt, call in zip(outcome.interrupts, turn.pending, strict=True):
        action: Action = "approve" if call.kind == "approval" else "resume"
        answerable = policy[(principal == "alice", action)]
        assert interrupt == (call.interrupt() if answerable else Interrupt(id=call.interrupt_id, reason="tool_call"))


@settings(max_examples=50)
@given(policies, st.sampled_from(["alice", "bob"]))
def test_a_caller_who_may_not_run_has_only_its_answers_used(policy: Policy, principal: str) -> None:
    view = asyncio.run(View.of(access(policy), principal, RECORD))
    run_input = RunAgentInput(
        thread_id="t1",
        run_id="r1",
        messages=[UserMessage(id="u", content="steer")],
        tools=[],
        context=[{"description": "d", "value": "steer"}],
        state={"steer": True},
        forwarded_props={"steer": True},
    )

    used = view.used(run_input)

    if policy[(principal == "alice", "run")]:
        assert used == run_input
    else:
        assert "steer" not in used.model_dump_json()


@settings(max_examples=100)
@given(policies, st.sampled_from(["alice", "bob"]), st.sampled_from(["RESUME_INCOMPLETE", "RESUME_REQUIRED"]))
def test_a_refusal_names_no_interrupt_the_caller_may_neither_read_nor_answer(
    policy: Policy, principal: str, code: str
) -> None:
    view = asyncio.run(View.of(access(policy), principal, RECORD))
    turn = RECORD.open_turn
    assert turn is not None
    listed = [call.interrupt_id for call in turn.pending]
    error = ResumeError(f"missing: {', '.join(listed)}", code=code, details=listed)

    shown = asyncio.run(view.refusal(error, turn))

    is_owner = principal == "alice"
    if policy[(is_owner, "read")]:
        assert shown is error
        return
    answerable = {"open_approval": policy[(is_owner, "approve")], "open_tool": policy[(is_owner, "resume")]}
    for interrupt_id, visible in answerable.items():
        assert (interrupt_id in shown.message) == visible
        assert (interrupt_id in (shown.details or [])) == (visible and code == "RESUME_INCOMPLETE")
    assert shown.code == code
