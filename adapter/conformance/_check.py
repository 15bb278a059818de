"""Run every case against one target and collect the report."""

from __future__ import annotations

from collections.abc import Collection

import httpx

from adapter.conformance import _cases_apply, _cases_frontend, _cases_gate, _cases_record, _cases_stream
from adapter.conformance._client import Client, Target
from adapter.conformance._evidence import ExecutionsUnavailable
from adapter.conformance._probe import CASES, Case, Fail, Options, Probe, Restart, Skip
from adapter.conformance._report import CaseResult, Report

_MODULES = [module.__name__ for module in (_cases_frontend, _cases_gate, _cases_apply, _cases_record, _cases_stream)]
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
    client = Client(target, timeout=timeout)
    probe = Probe(client, options)
    try:
        results = [await _run(probe, each) for each in CASE_ORDER]
    finally:
        await client.aclose()
    label = target if isinstance(target, str) else f"in-process ASGI app ({type(target).__name__})"
    return Report(label, results)


async def _run(probe: Probe, case: Case) -> CaseResult:
    probe.client.case = case.id
    try:
        status, evidence = await case.run(probe)
    except Skip as skip:
        status, evidence = "skip", str(skip)
    except Fail as fail:
        status, evidence = "fail", str(fail)
    except ExecutionsUnavailable as error:
        status, evidence = "skip", str(error)
    except httpx.HTTPError as error:
        status, evidence = "fail", f"the request failed: {type(error).__name__}: {error}"
    return CaseResult(case.id, status, evidence, case.rules)


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

    Returns:
        The report, when no case outside `allow` failed.
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
    )
    report.raise_for_failures(allow=allow)
    return report


def case_catalogue() -> list[tuple[str, tuple[str, ...], str]]:
    """Every case: its id, its rule ids and one line on what it checks (for the docs and `--list`)."""
    return [(each.id, each.rules, each.summary) for each in CASE_ORDER]
