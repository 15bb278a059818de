"""The conformance kit's server checks: this adapter passes, Pydantic AI's AG-UI adapter fails where it should.

In-process targets go through `check(app, ...)`; the CLI runs as a subprocess against real uvicorn servers.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from conformance_targets import TWO_REFUNDS, PydanticTarget, parallel_approval_app
from replica_process import free_port
from restartable import ROOT
from served_demo import serve_demo
from starlette.routing import Mount

from adapter import HistoryMode
from adapter.conformance import ConformanceFailure, Report, assert_conformant, case_catalogue, check
from examples.demo import FrontendOutcome, build_app

if TYPE_CHECKING:
    from conftest import Serve

DEMO: dict[str, Any] = {
    "frontend_tool": "navigate",
    "frontend_message": "go to settings",
    "approval_message": "refund order A100",
}
PARALLEL: dict[str, Any] = {**DEMO, "approval_message": "refund order A1", "parallel_approval_message": TWO_REFUNDS}
RESTARTABLE = Path(__file__).parents[1] / "restartable.py"
CLI_TIMEOUT = 300  # seconds for one CLI run: ~50 requests


def statuses(report: Report | dict[str, Any]) -> dict[str, str]:
    cases = report.as_json()["cases"] if isinstance(report, Report) else report["cases"]
    return {case["id"]: case["status"] for case in cases}


def demo_agui(tmp_path: Path, frontend_outcome: FrontendOutcome = "pending", history: HistoryMode = "client") -> Any:
    """The demo's AG-UI sub-app, in-process."""
    app = build_app(str(tmp_path / "demo.db"), frontend_outcome=frontend_outcome, history=history)
    return next(route.app for route in app.routes if isinstance(route, Mount) and route.path == "/agui")


@pytest.mark.parametrize("frontend_outcome", ["interrupt", "pending"])
async def test_the_demo_passes_every_case_it_can_run(tmp_path: Path, frontend_outcome: FrontendOutcome) -> None:
    report = await check(demo_agui(tmp_path, frontend_outcome), **DEMO)

    assert report.failures == [], report.table()
    assert [case.id for case in report.cases] == [case_id for case_id, _, _ in case_catalogue()]
    expected = {case_id: "pass" for case_id, _, _ in case_catalogue()}
    needs_flags = ("partial-resume", "approvals-one-by-one", "approvals-together", "restart-resume")
    expected |= dict.fromkeys(needs_flags, "skip")
    if frontend_outcome == "interrupt":  # by design, for clients that resume; AG-UI 1.0 FE-2 says MUST NOT
        expected["frontend-call"] = "warn"
    assert statuses(report) == expected
    if frontend_outcome == "interrupt":
        assert "FE-2" in report["frontend-call"].evidence
        assert "clients that resume" in report["frontend-call"].evidence
    assert "RESUME_UNKNOWN_INTERRUPT" in report["foreign-interrupt"].evidence
    assert ("pendingToolCallIds" in report["frontend-call"].evidence) == (frontend_outcome == "pending")
    report.raise_for_failures()


@pytest.mark.parametrize("history", ["client", "server"])
@pytest.mark.parametrize("frontend_outcome", ["interrupt", "pending"])
async def test_the_adapter_never_invents_an_answer(
    tmp_path: Path, frontend_outcome: FrontendOutcome, history: HistoryMode
) -> None:
    report = await check(demo_agui(tmp_path, frontend_outcome, history), **DEMO)

    assert report["invented-answer"].status == "pass", report.table()
    evidence = report["invented-answer"].evidence
    assert evidence.count("events and thread read") == 3, "the client's call, the approval's, and one in history"
    assert report["runs-accepted"].status == "pass"


@pytest.mark.parametrize("history", ["client", "server"])
@pytest.mark.parametrize("frontend_outcome", ["interrupt", "pending"])
async def test_the_adapter_keeps_one_answer_per_call(
    tmp_path: Path, frontend_outcome: FrontendOutcome, history: HistoryMode
) -> None:
    report = await check(demo_agui(tmp_path, frontend_outcome, history), **DEMO)

    assert report["one-answer-per-call"].status == "pass", report.table()
    evidence = report["one-answer-per-call"].evidence
    assert "a second answer: refused (RUN_ERROR RESUME_DUPLICATE)" in evidence
    assert "a result for it: refused (RUN_ERROR RESUME_DUPLICATE)" in evidence, "the denied call keeps its denial"


async def test_an_adapter_with_two_parallel_approvals_passes_the_partial_resume_case() -> None:
    report = await assert_conformant(parallel_approval_app(), **PARALLEL)

    assert report["partial-resume"].status == "pass"
    assert "RESUME_INCOMPLETE" in report["partial-resume"].evidence
    assert {c.id: c.status for c in report.cases if c.status != "pass"} == {"restart-resume": "skip"}
    assert "pendingToolCallIds" in report["frontend-call"].evidence  # the adapter's default: FE-2, no warn


@pytest.mark.filterwarnings("ignore:Client-submitted history ended with unresolved tool call:UserWarning")
async def test_pydantic_ai_fails_partial_resume_and_the_open_approval_cases_and_is_stateless() -> None:
    """Stateless, as AG-UI 1.1 allows: a replay, concurrent resumes, a guessed id and a second answer only warn."""
    target = PydanticTarget()

    report = await check(target.app, **PARALLEL)

    found = statuses(report)
    assert not report.ok
    for case_id in ("partial-resume", "new-message-while-open"):
        assert found[case_id] == "fail", (case_id, report.table())
    for case_id in ("replay", "forged-call", "concurrent-resume", "one-answer-per-call"):
        assert found[case_id] == "warn", (case_id, report.table())
        assert "AG-UI 1.1 allows it: the target carries nothing across the gap" in report[case_id].evidence
    assert "ran the tool again" in report["replay"].evidence
    assert "partial resume was accepted" in report["partial-resume"].evidence
    assert found["lifecycle"] == found["approval-denied-approved"] == "pass"
    assert found["foreign-interrupt"] == "warn", "the FunctionModel's call ids repeat across threads"
    assert target.refunds.count("A1") > 2, "the kit's findings are real refunds"
    assert "the reply quotes it (inferred)" in report["one-answer-per-call"].evidence
    assert found["invented-answer"] == "pass"
    assert "no thread read" in report["invented-answer"].evidence
    with pytest.raises(ConformanceFailure, match="partial-resume"):
        report.raise_for_failures()
    failing = [case.id for case in report.failures]
    report.raise_for_failures(allow=failing)
    with pytest.raises(ValueError, match="no-such-case"):
        report.raise_for_failures(allow=["no-such-case"])


def test_the_case_catalogue_names_rules_from_the_rules_document() -> None:
    catalogue = case_catalogue()

    assert len({case_id for case_id, _, _ in catalogue}) == len(catalogue) >= 15
    assert all(rules and summary for _, rules, summary in catalogue)
    assert all(
        rule.split("-")[0] in {"LIFE", "VER", "FE", "INT", "RES", "EVT", "TXT", "TOOL", "TRANS", "IN"}
        for _, rules, _ in catalogue
        for rule in rules
    )


def run_cli(url: str, report: Path, *extra: str, **options: str) -> subprocess.CompletedProcess[str]:
    flags = [f"--{name.replace('_', '-')}={value}" for name, value in options.items()]
    command = [sys.executable, "-m", "adapter.conformance", "check", url, *flags, "--json", str(report), *extra]
    return subprocess.run(command, capture_output=True, text=True, timeout=CLI_TIMEOUT, check=False, cwd=ROOT)


@pytest.mark.slow
def test_the_cli_passes_the_demo_over_real_http(tmp_path: Path) -> None:
    with serve_demo(tmp_path / "demo.db") as base:
        result = run_cli(base + "/agui/", tmp_path / "report.json", **DEMO)

    written = json.loads((tmp_path / "report.json").read_text())
    failing = {case_id for case_id, status in statuses(written).items() if status == "fail"}
    assert failing == set(), result.stdout + result.stderr
    assert result.returncode == 0, result.stdout + result.stderr
    assert written["target"] == base + "/agui/"
    assert set(statuses(written).values()) == {"pass", "skip"}
    assert statuses(written)["frontend-call"] == "pass"  # the demo's default, pending: FE-2
    for case in written["cases"]:
        assert set(case) >= {"id", "status", "detail"}
        assert case["rules"]
        assert all(rule in case["detail"] for rule in case["rules"])
    assert "frontend-call" in result.stdout
    assert "PASS" in result.stdout


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:Client-submitted history ended with unresolved tool call:UserWarning")
async def test_the_cli_exits_1_when_a_case_fails(serve: Serve, tmp_path: Path) -> None:
    served = await serve(PydanticTarget().app)

    result = await asyncio.to_thread(run_cli, served.url + "/", tmp_path / "report.json", **PARALLEL)

    assert result.returncode == 1, result.stdout + result.stderr
    written = json.loads((tmp_path / "report.json").read_text())
    assert statuses(written)["new-message-while-open"] == statuses(written)["partial-resume"] == "fail"
    assert "FAIL" in result.stdout


@pytest.fixture
def restartable(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """The demo on SQLite in its own process; yields its AG-UI URL and the state directory to restart it."""
    state = tmp_path / "server"
    port = free_port()
    subprocess.run(
        [sys.executable, str(RESTARTABLE), "start", str(state), str(port), str(tmp_path / "demo.db")],
        check=True,
        timeout=60,
        cwd=ROOT,
    )
    try:
        yield f"http://127.0.0.1:{port}/agui/", state
    finally:
        subprocess.run([sys.executable, str(RESTARTABLE), "stop", str(state)], check=True, timeout=60)


@pytest.mark.slow
def test_the_cli_resumes_after_a_restart_on_sqlite(restartable: tuple[str, Path], tmp_path: Path) -> None:
    url, state = restartable
    command = f"{sys.executable} {RESTARTABLE} restart {state}"

    result = run_cli(url, tmp_path / "report.json", **DEMO, restart_cmd=command)

    cases = json.loads((tmp_path / "report.json").read_text())["cases"]
    failing = {c["id"] for c in cases if c["status"] == "fail"}
    assert failing == set(), result.stdout + result.stderr
    assert result.returncode == 0, result.stdout + result.stderr
    restart = next(c for c in cases if c["id"] == "restart-resume")
    assert restart["status"] == "pass", restart
    assert (state / "server.log").read_text().count("Demo page:") == 2, "the server really restarted"


def test_the_docs_page_lists_every_case_with_its_rules() -> None:
    page = (ROOT / "docs" / "conformance.md").read_text()

    for case_id, rules, _ in case_catalogue():
        (row,) = [line for line in page.splitlines() if line.startswith(f"| `{case_id}` |")]
        assert row.split("|")[2].strip() == ", ".join(rules), case_id


def test_the_kits_door_exports_exactly_its_api() -> None:
    import adapter.conformance

    assert adapter.conformance.__all__ == [
        "CaseResult",
        "ConformanceFailure",
        "Recording",
        "Report",
        "Status",
        "assert_conformant",
        "case_catalogue",
        "check",
        "create_reference_app",
        "restart_command",
    ]
