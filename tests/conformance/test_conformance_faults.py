"""The kit against hand-made servers that misbehave the ways real frameworks did (issue 21), with and without the
exact channel (`--executions-url`)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict
from xml.etree import ElementTree

import pytest
from kit_targets import FaultyTarget
from restartable import ROOT

from adapter.conformance import Report, check

if TYPE_CHECKING:
    from conftest import Serve


class Kit(TypedDict):
    """The arguments of `check` that name the target's tools and messages."""

    frontend_tool: str
    frontend_message: str
    approval_message: str


KIT = Kit(frontend_tool="navigate", frontend_message="go to settings", approval_message="refund order A1")
EXACT = "http://agui.invalid/executions"
APPROVAL_CASES = (
    "new-message-while-open",
    "unknown-interrupt",
    "foreign-interrupt",
    "duplicate-entry",
    "replay",
    "concurrent-resume",
    "forged-call",
    "approval-denied-approved",
)


async def run_kit(*faults: str, exact: bool = False, **options: Any) -> tuple[Report, FaultyTarget]:
    target = FaultyTarget(frozenset(faults))
    report = await check(target.app, **KIT, executions_url=EXACT if exact else None, **options)
    return report, target


def statuses(report: Report) -> dict[str, str]:
    return {case.id: case.status for case in report.cases}


@pytest.mark.parametrize("exact", [False, True], ids=["events", "exact"])
async def test_a_well_behaved_target_passes_and_says_how_it_knows(exact: bool) -> None:
    report, target = await run_kit(exact=exact)

    assert report.ok, report.table()
    assert statuses(report)["approval-denied-approved"] == "pass"
    evidence = report["approval-denied-approved"].evidence
    assert ("--executions-url, exact" in evidence) == exact
    assert ("TOOL_CALL_RESULT" in evidence) == (not exact)
    assert sum(target.executions.values()) >= 4, "the refunds the kit caused are real"
    assert "events and thread read" in report["invented-answer"].evidence
    assert "the thread read keeps the one answer" in report["one-answer-per-call"].evidence
    assert report["runs-accepted"].status == "pass"


@pytest.mark.parametrize("exact", [False, True], ids=["events", "exact"])
async def test_a_made_up_or_foreign_interrupt_id_that_runs_the_tool_fails(exact: bool) -> None:
    report, _ = await run_kit("any-id", "names-no-call", exact=exact)

    found = statuses(report)
    assert found["unknown-interrupt"] == found["foreign-interrupt"] == "fail", report.table()
    assert "the gated tool ran" in report["unknown-interrupt"].evidence
    assert ("1 execution(s)" if exact else "inferred") in report["unknown-interrupt"].evidence


@pytest.mark.parametrize("exact", [False, True], ids=["events", "exact"])
async def test_two_concurrent_resumes_that_both_run_fail(exact: bool) -> None:
    report, target = await run_kit("not-once", exact=exact)

    assert statuses(report)["concurrent-resume"] == "fail", report.table()
    assert "ran 2 times" in report["concurrent-resume"].evidence
    assert statuses(report)["replay"] == "fail"


async def test_an_interrupt_that_names_no_call_is_judged_through_the_only_open_call() -> None:
    report, _ = await run_kit("names-no-call")

    assert report.ok, report.table()
    assert statuses(report)["approval-denied-approved"] == "pass"
    assert "only open call, inferred" in report["approval-denied-approved"].evidence


async def test_an_adk_interrupt_is_linked_to_its_call_through_metadata() -> None:
    report, _ = await run_kit("adk-metadata")

    assert statuses(report)["approval-denied-approved"] == statuses(report)["replay"] == "pass", report.table()
    assert "found through metadata" in report["approval-denied-approved"].evidence


@pytest.mark.parametrize(("fault", "passes"), [("snapshot-only", True), ("silent", False)])
async def test_a_result_only_in_a_snapshot_counts_and_a_silent_one_needs_the_exact_channel(
    fault: str, passes: bool
) -> None:
    report, _ = await run_kit(fault)
    exact, _ = await run_kit(fault, exact=True)

    assert (statuses(report)["approval-denied-approved"] == "pass") == passes, report.table()
    if passes:
        assert "MESSAGES_SNAPSHOT" in report["approval-denied-approved"].evidence
    assert statuses(exact)["approval-denied-approved"] == "pass", exact.table()


async def test_chunk_only_calls_are_graded_rather_than_skipped() -> None:
    report, _ = await run_kit("chunk-only")

    found = statuses(report)
    assert found["frontend-call"] == found["frontend-resolved"] == found["frontend-cancelled"] == "pass", report.table()
    assert found["approval-denied-approved"] == "pass"


async def test_an_approval_message_that_opens_a_client_tool_interrupt_skips_what_depends_on_it() -> None:
    report, _ = await run_kit("approval-is-client")

    assert not report.failures, report.table()
    assert [part.id for part in report.not_graded] == ["approvals"], "nothing graded the approvals: not a pass"
    for case_id in APPROVAL_CASES:
        assert report[case_id].status == "skip", (case_id, report.table())
        assert "--approval-message opened a client-tool interrupt (navigate call" in report[case_id].evidence


async def test_an_executions_url_that_does_not_answer_skips_the_cases_it_would_judge() -> None:
    target = FaultyTarget()
    report = await check(target.app, **KIT, executions_url="http://agui.invalid/nowhere")

    assert report["approval-denied-approved"].status == "skip"
    assert "--executions-url" in report["approval-denied-approved"].evidence


async def test_the_junit_report_has_one_test_case_per_case(tmp_path: Path) -> None:
    report, _ = await run_kit("not-once")
    report.write_junit(tmp_path / "junit.xml")

    suite = ElementTree.parse(tmp_path / "junit.xml").getroot().find("testsuite")
    assert suite is not None
    cases: dict[str | None, Any] = {case.get("name"): case for case in suite.iter("testcase")}
    assert list(cases) == [case.id for case in report.cases]
    assert int(suite.get("failures", "")) == len(report.failures) > 0
    assert cases["concurrent-resume"].find("failure") is not None
    assert all(cases[c.id].find("skipped") is not None for c in report.cases if c.status == "skip")
    assert all(cases[c.id].find("failure") is None for c in report.cases if c.status in ("pass", "warn"))


def test_the_module_runs_without_an_event_loop_of_its_own() -> None:
    assert asyncio.run(run_kit())[0].ok


@pytest.mark.slow
async def test_the_cli_takes_an_executions_url_and_writes_junit(serve: Serve, tmp_path: Path) -> None:
    target = FaultyTarget(frozenset({"not-once"}))
    served = await serve(target.app)
    flags = [f"--{name.replace('_', '-')}={value}" for name, value in KIT.items()]
    command = [sys.executable, "-m", "adapter.conformance", "check", served.url + "/", *flags]
    command += ["--executions-url", served.url + "/executions", "--junit", str(tmp_path / "junit.xml")]

    result = await asyncio.to_thread(subprocess.run, command, capture_output=True, text=True, timeout=300, cwd=ROOT)

    assert result.returncode == 1, result.stdout + result.stderr
    suite = ElementTree.parse(tmp_path / "junit.xml").getroot().find("testsuite")
    assert suite is not None
    failed = {case.get("name") for case in suite.iter("testcase") if case.find("failure") is not None}
    assert {"replay", "concurrent-resume"} <= failed
    assert "--executions-url, exact" in result.stdout


async def test_results_without_message_ids_still_count_each_run() -> None:
    report, _ = await run_kit("not-once", "no-message-ids")

    assert report["concurrent-resume"].status == "fail", report.table()
    assert "ran 2 times" in report["concurrent-resume"].evidence


async def test_a_refused_setup_message_is_tried_again_by_the_next_case() -> None:
    target = FaultyTarget(frozenset({"first-run-fails"}))

    report = await check(target.app, **KIT)

    assert report["frontend-call"].status == "skip"
    assert "RUN_ERROR" in report["frontend-call"].evidence
    assert report["frontend-resolved"].status == "pass", report.table()


@pytest.mark.parametrize(
    ("fault", "seen"), [("invents-answers", "TOOL_CALL_RESULT"), ("invents-in-record", "thread read")]
)
async def test_an_answer_invented_for_a_call_nobody_answered_fails(fault: str, seen: str) -> None:
    report, _ = await run_kit(fault)

    assert report["invented-answer"].status == "fail", report.table()
    evidence = report["invented-answer"].evidence
    assert seen in evidence
    assert "which nobody answered" in evidence
    assert "No result was recorded for this tool call." in evidence


async def test_an_answer_invented_only_in_the_record_needs_the_thread_read() -> None:
    report, _ = await run_kit("invents-in-record", thread_url="http://agui.invalid/nowhere/{thread}")

    assert report["invented-answer"].status == "pass", report.table()
    assert "no thread read" in report["invented-answer"].evidence


@pytest.mark.parametrize(
    ("fault", "seen"),
    [("keeps-history", "was stored: the thread read now holds"), ("echoes-answers", "the reply quotes it (inferred)")],
)
async def test_a_second_answer_that_is_kept_or_sent_to_the_model_fails(fault: str, seen: str) -> None:
    report, _ = await run_kit(fault)

    assert report["one-answer-per-call"].status == "fail", report.table()
    assert seen in report["one-answer-per-call"].evidence
    assert "a second answer for the answered navigate call" in report["one-answer-per-call"].evidence


@pytest.mark.parametrize("fault", ["refuses-everything", "every-run-fails"])
async def test_a_target_that_refuses_every_request_fails_the_report(fault: str) -> None:
    report, _ = await run_kit(fault)

    assert not report.ok
    assert [case.id for case in report.failures] == ["runs-accepted"], report.table()
    assert "every one of the" in report["runs-accepted"].evidence
    assert ("HTTP 400" if fault == "refuses-everything" else "RUN_ERROR WARMING_UP") in report["runs-accepted"].evidence
    assert {report[case_id].status for case_id in APPROVAL_CASES} == {"skip"}


async def test_a_setup_message_refused_every_time_is_a_warning() -> None:
    report, _ = await run_kit("refuses-approvals")

    assert not report.failures, report.table()
    assert (report.exit_code, [p.id for p in report.not_graded]) == (3, ["approvals"])
    assert report["runs-accepted"].status == "warn"
    assert "refused --approval-message" in report["runs-accepted"].evidence
    assert report["frontend-resolved"].status == "pass"


@pytest.mark.parametrize("exact", [False, True], ids=["events", "exact"])
async def test_a_gated_tool_that_runs_with_no_approval_fails_every_approval_case(exact: bool) -> None:
    report, target = await run_kit("runs-unasked", exact=exact)

    for case_id in (*APPROVAL_CASES, "invented-answer", "one-answer-per-call"):
        assert report[case_id].status == "fail", (case_id, report.table())
        assert "--approval-message ran " in report[case_id].evidence
        assert "with no approval at all" in report[case_id].evidence
    evidence = report["new-message-while-open"].evidence
    assert ("--executions-url, exact" if exact else "refund_order (call") in evidence
    assert ("inferred" in evidence) == (not exact)
    assert sum(target.executions.values()) == 1, "later cases fail without sending the message again"
    assert report["frontend-resolved"].status == "pass"


@pytest.mark.slow
async def test_the_cli_exits_1_when_every_request_is_refused(serve: Serve, tmp_path: Path) -> None:
    served = await serve(FaultyTarget(frozenset({"refuses-everything"})).app)
    flags = [f"--{name.replace('_', '-')}={value}" for name, value in KIT.items()]
    command = [sys.executable, "-m", "adapter.conformance", "check", served.url + "/", *flags]

    result = await asyncio.to_thread(subprocess.run, command, capture_output=True, text=True, timeout=300, cwd=ROOT)

    assert result.returncode == 1, result.stdout + result.stderr
    assert "FAIL    runs-accepted" in result.stdout
