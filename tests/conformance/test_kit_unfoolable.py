"""The kit cannot be fooled (issue 44): it answers approvals as their `responseSchema` asks, a run that graded no
approval is not a pass, and two approvals of one turn are answered one by one and together, each call run once."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any
from xml.etree import ElementTree

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kit_targets import FaultyTarget

from adapter.conformance import Report, check

# Private on purpose: the answer builder is held to every schema shape directly.
from adapter.conformance._approvals import NoAnswer, approval_answer
from schema_tools import validate

if TYPE_CHECKING:
    from conftest import Serve

KIT: dict[str, Any] = {"frontend_tool": "navigate", "frontend_message": "go to settings"}
ONE, TWO = "refund order A1", "refund orders A1 and B2"
EXACT = "http://agui.invalid/executions"
APPROVING = ["approve", "approved", "yes", "accept", "Allow", "CONFIRM", "ok", "proceed", True]
DENYING = ["deny", "denied", "no", "reject", "Decline", "cancel", "refuse", False]
OTHER = st.sampled_from(["maybe", "later", "escalate", 3, None])


async def run_kit(*faults: str, exact: bool = False, **options: Any) -> tuple[Report, FaultyTarget]:
    target = FaultyTarget(frozenset(faults))
    options = {"approval_message": ONE, **options}
    report = await check(target.app, **KIT, executions_url=EXACT if exact else None, **options)
    return report, target


def approval_schemas() -> st.SearchStrategy[dict[str, Any]]:
    """The shapes frameworks ask for: a bare boolean, an object with a boolean named for approval, an enum (alone or
    in an object), with other required properties beside it and an anyOf around it."""
    name = st.sampled_from(["approved", "accepted", "confirmed", "allow", "approve_call"])
    extra = st.dictionaries(
        st.sampled_from(["note", "count", "reviewer", "flags"]),
        st.sampled_from([{"type": "string"}, {"type": "integer", "minimum": 1}, {"type": "array"}]),
        max_size=2,
    )
    enum = st.builds(
        lambda yes, no, others, order: {"enum": sorted([yes, no, *others], key=lambda v: (order, str(v)))},
        st.sampled_from(APPROVING),
        st.sampled_from(DENYING),
        st.lists(OTHER, max_size=2, unique=True),
        st.booleans(),
    )
    boolean = st.just({"type": "boolean"})
    obj = st.builds(
        lambda key, value, others: {
            "type": "object",
            "properties": {key: value, **others},
            "required": [key, *others],
            "additionalProperties": False,
        },
        name,
        st.one_of(st.just({"type": "boolean"}), enum),
        extra,
    )
    base = st.one_of(boolean, enum, obj)
    return st.one_of(base, st.builds(lambda a, b: {"anyOf": [a, b]}, base, base))


@given(schema=approval_schemas())
def test_an_approval_and_a_denial_are_built_to_fit_any_schema_a_framework_asks_for(schema: dict[str, Any]) -> None:
    interrupt = {"id": "int-1", "reason": "tool_call", "responseSchema": schema}

    yes, no = approval_answer(interrupt, True), approval_answer(interrupt, False)

    assert validate(yes.payload, schema) == validate(no.payload, schema) == []
    assert yes.payload != no.payload
    assert "responseSchema asks for" in yes.how


@pytest.mark.parametrize(
    ("schema", "yes", "no"),
    [
        pytest.param(None, {"approved": True}, {"approved": False}, id="no-schema"),
        pytest.param({"type": "boolean"}, True, False, id="ag2-bare-boolean"),
        pytest.param(
            {"type": "object", "properties": {"accepted": {"type": "boolean"}}, "required": ["accepted"]},
            {"accepted": True},
            {"accepted": False},
            id="agno-accepted",
        ),
        pytest.param({"enum": ["reject", "approve"]}, "approve", "reject", id="enum"),
        pytest.param({"anyOf": [{"const": "yes"}, {"const": "no"}]}, "yes", "no", id="constants"),
        pytest.param({"type": "string"}, "approved", "denied", id="any-string"),
        pytest.param({"type": "object"}, {"approved": True}, {"approved": False}, id="any-object"),
        pytest.param(
            {
                "type": "object",
                "properties": {
                    "confirmed": {"type": "boolean"},
                    "by": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
                    "kind": {"const": "refund"},
                    "level": {"enum": ["low", "high"]},
                    "flags": {"type": ["array", "null"]},
                    "seen": {"type": "boolean"},
                },
                "required": ["confirmed", "by", "kind", "level", "flags", "seen"],
            },
            {"by": {"n": 1}, "kind": "refund", "level": "low", "flags": [], "seen": True, "confirmed": True},
            {"by": {"n": 1}, "kind": "refund", "level": "low", "flags": [], "seen": True, "confirmed": False},
            id="required-members-filled",
        ),
    ],
)
def test_the_answers_frameworks_were_seen_to_ask_for(schema: Any, yes: Any, no: Any) -> None:
    interrupt = {"id": "int-1", "responseSchema": schema} if schema else {"id": "int-1"}

    assert (approval_answer(interrupt, True).payload, approval_answer(interrupt, False).payload) == (yes, no)


@pytest.mark.parametrize(
    "schema",
    [
        pytest.param({"enum": ["escalate", "later"]}, id="no-member-reads-as-an-answer"),
        pytest.param({"type": "object", "properties": {"flag": {"type": "boolean"}}, "required": ["flag"]}, id="flag"),
        pytest.param({"type": "integer"}, id="a-number"),
    ],
)
def test_a_schema_no_answer_fits_is_said_so_never_guessed_past(schema: dict[str, Any]) -> None:
    with pytest.raises(NoAnswer, match="fits the interrupt's responseSchema"):
        approval_answer({"id": "int-1", "responseSchema": schema}, True)


def test_a_schema_the_kit_cannot_evaluate_is_said_so() -> None:
    with pytest.raises(NoAnswer, match="cannot be used"):
        approval_answer({"id": "int-1", "responseSchema": {"$ref": "#", "type": "boolean"}}, True)
    shown = str(approval_answer({"id": "int-1"}, False))
    assert shown == """{"approved": false} (no responseSchema: AG-UI's recommended payload)"""


@pytest.mark.parametrize(
    ("fault", "answered"),
    [
        pytest.param("bare-boolean", "; true (responseSchema asks for a bare boolean)", id="bare-boolean"),
        pytest.param("enum-decision", '{"note": "conformance", "decision": "approve"} (responseSchema asks', id="enum"),
    ],
)
@pytest.mark.parametrize("exact", [False, True], ids=["events", "exact"])
async def test_a_target_that_asks_its_own_shape_and_behaves_passes_with_the_answer_shown(
    fault: str, answered: str, exact: bool
) -> None:
    report, target = await run_kit(fault, exact=exact)

    assert report.ok, report.table()
    for case_id in ("invalid-payload", "approval-denied-approved", "replay", "unknown-interrupt"):
        assert report[case_id].status == "pass", report.table()
    assert "answered: " in report["approval-denied-approved"].evidence
    assert answered in report["approval-denied-approved"].evidence
    assert sum(target.executions.values()) >= 3, "the approvals the kit sent ran the refunds"


async def test_the_unchanged_answer_fails_a_bare_boolean_target_so_the_schema_is_what_passes_it() -> None:
    """The kit's old `{"approved": true}` is refused by such a target: the pass above comes from reading the schema."""
    target = FaultyTarget(frozenset({"bare-boolean"}))
    app, body = target.app, {"threadId": "t", "runId": "r1", "messages": [{"id": "u", "role": "user", "content": ONE}]}
    from adapter.client import AGUIClient

    async with AGUIClient(app, strict=False) as client:
        opened = await client.run(body)
        (interrupt,) = opened.wire_interrupts
        entry = {"interruptId": interrupt["id"], "status": "resolved", "payload": {"approved": True}}
        refused = await client.run({**body, "runId": "r2", "resume": [entry]})

    assert refused.error is not None
    assert refused.error.get("code") == "RESUME_PAYLOAD_INVALID"


async def test_a_target_that_never_interrupts_is_not_graded_and_exits_non_zero_unless_allowed() -> None:
    report, _ = await run_kit("never-interrupts")
    allowed, _ = await run_kit("never-interrupts", allow_not_graded=True)

    assert not report.failures, report.table()
    assert [part.id for part in report.not_graded] == ["approvals"]
    assert (report.ok, report.exit_code) == (False, 3)
    assert "NOT GRADED: approvals" in report.table()
    assert report.as_json()["parts"][1] == {
        "id": "approvals",
        "status": "not graded",
        "cases": list(report.not_graded[0].cases),
    }
    assert report.as_json()["ok"] is False
    junit = ElementTree.fromstring(report.junit())
    assert junit.find(".//testcase[@name='approvals graded']/failure") is not None
    assert (allowed.ok, allowed.exit_code, allowed.as_json()["allowNotGraded"]) == (True, 0, True)
    assert "accepted: --allow-not-graded" in allowed.table()
    assert ElementTree.fromstring(allowed.junit()).find(".//testcase[@name='approvals graded']/skipped") is not None


@pytest.mark.parametrize(("flags", "code"), [((), 3), (("--allow-not-graded",), 0)], ids=["not-graded", "allowed"])
async def test_the_cli_exits_3_when_nothing_graded_the_approvals_unless_that_is_allowed(
    serve: Serve, tmp_path: Path, flags: tuple[str, ...], code: int
) -> None:
    served = await serve(FaultyTarget(frozenset({"never-interrupts"})).app)
    report = tmp_path / "report.json"
    command = [sys.executable, "-m", "adapter.conformance", "check", served.url + "/", "--json", str(report)]
    options = ["--frontend-tool=navigate", "--frontend-message=go to settings", f"--approval-message={ONE}"]

    result = await asyncio.to_thread(
        subprocess.run, [*command, *options, *flags], capture_output=True, text=True, timeout=120, check=False
    )

    assert result.returncode == code, result.stdout + result.stderr
    assert "NOT GRADED: approvals" in result.stdout
    assert json.loads(report.read_text())["parts"][1]["status"] == "not graded"


@pytest.mark.parametrize("exact", [False, True], ids=["events", "exact"])
async def test_two_approvals_of_one_turn_each_run_once_one_by_one_and_together(exact: bool) -> None:
    report, target = await run_kit(exact=exact, parallel_approval_message=TWO)

    assert report.ok, report.table()
    for case_id in ("approvals-one-by-one", "approvals-together", "partial-resume"):
        assert report[case_id].status == "pass", report.table()
    assert "answered one after the other" in report["approvals-one-by-one"].evidence
    assert ("2 execution(s)" in report["approvals-together"].evidence) == exact


@pytest.mark.parametrize("exact", [False, True], ids=["events", "exact"])
async def test_a_target_that_runs_the_first_approved_call_again_fails_one_by_one(exact: bool) -> None:
    report, target = await run_kit("reruns-first", exact=exact, parallel_approval_message=TWO)

    assert report["approvals-one-by-one"].status == "fail", report.table()
    assert report["approvals-together"].status == "pass", "answered at once, nothing was approved before"
    evidence = report["approvals-one-by-one"].evidence
    assert ("ran 3 times" if exact else "an approved call ran more than once") in evidence


async def test_a_target_that_takes_only_complete_resumes_is_graded_on_both_at_once() -> None:
    """This adapter refuses a partial resume: one by one then sends both, and each runs once."""
    from conformance_targets import TWO_REFUNDS, parallel_approval_app

    report = await check(
        parallel_approval_app(), **KIT, approval_message="refund order A1", parallel_approval_message=TWO_REFUNDS
    )

    assert report["approvals-one-by-one"].status == "pass", report.table()
    assert "the first alone was refused (RUN_ERROR RESUME_INCOMPLETE)" in report["approvals-one-by-one"].evidence
    assert json.dumps({"approved": True}) in report["approvals-one-by-one"].evidence
