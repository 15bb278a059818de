"""Run every case against one target and collect the report."""

from __future__ import annotations

from collections.abc import Collection

import httpx

from adapter.client import ClientError, StreamLimits
from adapter.conformance import _cases_apply, _cases_frontend, _cases_gate, _cases_record, _cases_stream
from adapter.conformance._client import Client, Target
from adapter.conformance._evidence import ExecutionsUnavailable
from adapter.conformance._probe import CASES, Case, Fail, Options, Probe, Restart, Skip
from adapter.conformance._report import CaseResult, Part, Report, Status

_MODULES = [module.__name__ for module in (_cases_frontend, _cases_gate, _cases_apply, _cases_record, _cases_stream)]
_SHOWN = 300  # characters of an exception's message shown as evidence
CASE_ORDER = sorted(CASES, key=lambda each: _MODULES.index(each.module))
"""Every case in the order it runs; the stream-wide cases come last, over what the others captured."""


async def check(
    target: Target,
    *,
    frontend_tool: str,
    frontend_message: str,
    approval_message: str,
    parallel_approval_message: str | None = None,
    restart: Restart | None = None,
    timeout: float = 60.0,
    executions_url: str | None = None,
    thread_url: str | None = None,
    limits: StreamLimits | None = None,
    allow_not_graded: bool = False,
) -> Report:
    """Run the black-box cases against an AG-UI endpoint and report each one.

    Args:
        target: The endpoint's URL, or an ASGI app whose run route is `/` (served in-process; it
            must not need its lifespan).
        frontend_tool: The client tool the kit declares, with a permissive schema.
        frontend_message: A user message that makes the agent call `frontend_tool`.
        approval_message: A user message that makes the agent call a server tool that needs approval.
        parallel_approval_message: A user message that opens two interrupts at once; without it
            the partial-resume case is skipped.
        restart: Restarts the server and returns once it serves again; without it the
            restart case is skipped.
        timeout: Seconds one request may take.
        executions_url: The target's test hook, `GET URL?thread=ID` -> `{"executions": N}`: with it, every
            "ran" and "did not run" verdict is exact instead of read from the events.
        thread_url: The target's thread read, `GET` with `{thread}` replaced by a thread id -> `{"messages": [...]}`;
            without it the kit tries this adapter's own `<target>/threads/{thread}`.
        limits: What one of the target's streams may send; past a limit the case that sent it fails. Not
            given: `StreamLimits(event_timeout=timeout)`.
        allow_not_graded: Accept a part of the contract none of whose cases could be graded (a target that never
            opens an approval): the report is then `ok` without it. Not given: such a report is not `ok`.
    """
    options = Options(
        frontend_tool,
        frontend_message,
        approval_message,
        parallel_approval_message,
        restart,
        executions_url,
        thread_url,
    )
    client = Client(target, timeout=timeout, limits=limits)
    probe = Probe(client, options)
    try:
        results = [await _run(probe, each) for each in CASE_ORDER]
    finally:
        await client.aclose()
    label = target if isinstance(target, str) else f"in-process ASGI app ({type(target).__name__})"
    return Report(label, results, _parts(results), allow_not_graded)


def _parts(results: list[CaseResult]) -> list[Part]:
    """Each part of the contract, graded when one of its cases was not skipped."""
    parts: dict[str, list[CaseResult]] = {}
    for each, result in zip(CASE_ORDER, results, strict=True):
        if each.part:
            parts.setdefault(each.part, []).append(result)
    return [
        Part(part, tuple(r.id for r in cases), any(r.status != "skip" for r in cases)) for part, cases in parts.items()
    ]


async def _run(probe: Probe, case: Case) -> CaseResult:
    """One case's verdict: whatever the case raises becomes its `fail` or `skip`, never a traceback."""
    probe.client.case = case.id
    probe.answers = {}
    try:
        status, evidence = await case.run(probe)
    except Exception as error:
        status, evidence = _verdict(error)
    if probe.answers:
        answers = "; ".join(f"{payload} ({how})" for payload, how in probe.answers.items())
        evidence = f"{evidence}; answered: {answers}"
    return CaseResult(case.id, status, evidence, case.rules)


def _verdict(error: Exception) -> tuple[Status, str]:
    """What an exception out of a case says about the target (of a group raised by concurrent sends: its first)."""
    while isinstance(error, ExceptionGroup):
        error = error.exceptions[0]
    if isinstance(error, Skip | ExecutionsUnavailable):
        return "skip", str(error)
    if isinstance(error, Fail):
        return "fail", str(error)
    if isinstance(error, httpx.HTTPError):
        return "fail", f"the request failed: {_told(error)}"
    if isinstance(error, ClientError):
        return "fail", f"the kit stopped reading the target's answer: {_told(error)}"
    # What the target sent broke the case in a way no case foresaw (JSON nested past the recursion limit ...).
    return "fail", f"the case could not go on with what the target sent: {_told(error)}"


def _told(error: BaseException) -> str:
    """An exception as evidence: its type and the start of its message."""
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text if len(text) <= _SHOWN else text[: _SHOWN - 1] + '…'}"


async def assert_conformant(
    target: Target,
    *,
    frontend_tool: str,
    frontend_message: str,
    approval_message: str,
    parallel_approval_message: str | None = None,
    restart: Restart | None = None,
    allow: Collection[str] = (),
    executions_url: str | None = None,
    thread_url: str | None = None,
    limits: StreamLimits | None = None,
    allow_not_graded: bool = False,
) -> Report:
    """The pytest entry point: `check()`, then `ConformanceFailure` (an AssertionError) on any failure.

    Args:
        target: As for `check()`.
        frontend_tool: As for `check()`.
        frontend_message: As for `check()`.
        approval_message: As for `check()`.
        parallel_approval_message: As for `check()`.
        restart: As for `check()`.
        allow: Case ids whose failure the caller accepts (a known limitation); they still show in the report.
        executions_url: As for `check()`.
        thread_url: As for `check()`.
        limits: As for `check()`.
        allow_not_graded: As for `check()`: without it, a part no case could grade raises too.

    Returns:
        The report, when no case outside `allow` failed and every part was graded (or `allow_not_graded`).
    """
    report = await check(
        target,
        frontend_tool=frontend_tool,
        frontend_message=frontend_message,
        approval_message=approval_message,
        parallel_approval_message=parallel_approval_message,
        restart=restart,
        executions_url=executions_url,
        thread_url=thread_url,
        limits=limits,
        allow_not_graded=allow_not_graded,
    )
    report.raise_for_failures(allow=allow)
    return report


def case_catalogue() -> list[tuple[str, tuple[str, ...], str]]:
    """Every case: its id, its rule ids and one line on what it checks (for the docs and `--list`)."""
    return [(each.id, each.rules, each.summary) for each in CASE_ORDER]
