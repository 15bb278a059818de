"""The kit grades as conformant what AG-UI 1.1 allows (issue 44): an unknown resume entry refused or passed over
with a warning, and a target that carries nothing across the gap `warn`, not `fail`, where only a record helps."""

from __future__ import annotations

from typing import Any

import pytest
from kit_targets import FaultyTarget

from adapter.conformance import Report, check

KIT: dict[str, Any] = {
    "frontend_tool": "navigate",
    "frontend_message": "go to settings",
    "approval_message": "refund order A1",
    "parallel_approval_message": "refund orders A1 and B2",
}
EXACT = "http://agui.invalid/executions"
ONLY_A_RECORD_HELPS = ("replay", "concurrent-resume", "forged-call", "one-answer-per-call")


async def run_kit(*faults: str, exact: bool = False) -> Report:
    return await check(FaultyTarget(frozenset(faults)).app, **KIT, executions_url=EXACT if exact else None)


@pytest.mark.parametrize("faults", [(), ("unknown-warns",)], ids=["refused", "passed-over-with-a-warning"])
async def test_an_unknown_resume_entry_refused_or_passed_over_both_pass(faults: tuple[str, ...]) -> None:
    report = await run_kit(*faults)

    assert report["unknown-interrupt"].status == "pass", report.table()
    expected = "issued again" if faults else "refused: RUN_ERROR RESUME_UNKNOWN_INTERRUPT"
    assert expected in report["unknown-interrupt"].evidence


@pytest.mark.parametrize("exact", [False, True], ids=["events", "exact"])
async def test_a_stateless_target_warns_where_only_a_record_helps_and_fails_where_its_input_tells(exact: bool) -> None:
    report = await run_kit("stateless", "echoes-answers", exact=exact)

    for case_id in ONLY_A_RECORD_HELPS:
        assert report[case_id].status == "warn", report.table()
        assert "AG-UI 1.1 allows it: the target carries nothing across the gap" in report[case_id].evidence
    assert "sent with that thread's history on a new thread, ran it" in report["replay"].evidence
    assert report["new-message-while-open"].status == "fail", "the history it was sent shows the call still open"
    assert report["unknown-interrupt"].status == report["partial-resume"].status == "pass"


@pytest.mark.parametrize("exact", [False, True], ids=["events", "exact"])
async def test_a_target_with_a_record_that_runs_a_replay_still_fails(exact: bool) -> None:
    report = await run_kit("not-once", exact=exact)

    assert report["replay"].status == "fail", report.table()
    assert "AG-UI 1.1" not in report["replay"].evidence
