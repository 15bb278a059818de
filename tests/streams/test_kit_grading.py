"""The conformance kit reads its target within bounds, never tracebacks, and never passes what it cannot see.

Its streams are read by `AGUIClient` (tests/streams/test_stream_limits.py holds every reader to the same
shapes); here the kit's own side channels (`--executions-url`, the thread read, the restart probe), its
verdict on a case that raises, and its grading of servers whose events hide what they ran.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any, TypedDict

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from kit_targets import ENDLESS_UP_TO, FaultyTarget

from adapter.client import StreamLimits
from adapter.conformance import Report, case_catalogue, check

# Private on purpose: the kit's case runner, its client and its side channels are what these tests hold to bounds;
# the kit's door offers the checks, not its parts.
from adapter.conformance._check import _run
from adapter.conformance._client import Client
from adapter.conformance._evidence import SideBodyRefused, get_json
from adapter.conformance._probe import Case, Fail, Options, Probe, Skip
from adapter.conformance._restart import wait_until_serving

KIB = 1024
EXACT = "http://agui.invalid/executions"
IN_PROCESS_HELD = 67 * KIB  # the in-process transport's queue of 1 KiB chunks, and those in hand


class Kit(TypedDict):
    frontend_tool: str
    frontend_message: str
    approval_message: str


KIT = Kit(frontend_tool="navigate", frontend_message="go to settings", approval_message="refund order A1")


async def run_kit(*faults: str, exact: bool = False, **options: Any) -> tuple[Report, FaultyTarget]:
    target = FaultyTarget(frozenset(faults))
    report = await check(target.app, **KIT, executions_url=EXACT if exact else None, **options)
    return report, target


async def test_an_endless_stream_fails_each_case_that_reads_it_after_max_bytes() -> None:
    limits = StreamLimits(max_bytes=64 * KIB)

    report, target = await run_kit("endless-stream", limits=limits)

    assert {case.status for case in report.cases} <= {"fail", "skip"}, report.table()
    stopped = [case for case in report.cases if "stopped reading" in case.evidence]
    assert stopped
    assert all("(max_bytes)" in case.evidence for case in stopped)
    assert target.sent <= len(case_catalogue()) * (64 * KIB + IN_PROCESS_HELD)
    assert target.sent < ENDLESS_UP_TO * KIB, "a missing limit would have read to the end"


async def test_an_endless_executions_body_skips_the_cases_that_need_it_after_a_bounded_read() -> None:
    report, target = await run_kit("endless-executions", exact=True)

    skipped = [case for case in report.cases if "--executions-url failed" in case.evidence]
    assert skipped, report.table()
    assert {case.status for case in skipped} == {"skip"}, report.table()
    assert "SideBodyRefused: an answer over 65536 bytes" in skipped[0].evidence
    assert target.sent <= len(case_catalogue()) * (64 * KIB + IN_PROCESS_HELD)


@given(max_bytes=st.integers(min_value=1, max_value=64 * KIB), chunk=st.integers(min_value=1, max_value=8 * KIB))
async def test_a_side_channel_answer_is_read_within_its_bound(max_bytes: int, chunk: int) -> None:
    pulled = 0

    async def endless() -> AsyncIterator[bytes]:
        nonlocal pulled
        yield b'{"executions": 0'
        for _ in range(1 << 20):
            pulled += chunk
            yield b" " * chunk

    transport = httpx.MockTransport(lambda request: httpx.Response(200, content=endless()))
    async with httpx.AsyncClient(transport=transport) as http:
        with pytest.raises(SideBodyRefused, match=f"over {max_bytes} bytes"):
            await get_json(http, "http://agui.invalid/x", {}, max_bytes=max_bytes, timeout=60)

    assert pulled <= max_bytes + chunk


async def test_the_restart_probe_reads_no_body(monkeypatch: pytest.MonkeyPatch) -> None:
    pulled = 0

    async def endless() -> AsyncIterator[bytes]:
        nonlocal pulled
        for _ in range(1 << 20):
            pulled += 1
            yield b"x"

    transport = httpx.MockTransport(lambda request: httpx.Response(200, content=endless()))
    real = httpx.AsyncClient
    monkeypatch.setattr(httpx, "AsyncClient", lambda **options: real(transport=transport, **options))

    await wait_until_serving("http://agui.invalid/", 5)

    assert pulled <= 1


async def test_a_response_schema_that_refers_to_itself_is_skipped_not_a_traceback() -> None:
    report, _ = await run_kit("recursive-schema")

    assert report["invalid-payload"].status == "skip", report.table()
    assert "responseSchema cannot be" in report["invalid-payload"].evidence


EXCEPTIONS = st.sampled_from(
    [
        RecursionError("maximum recursion depth exceeded"),
        ValueError("x" * 10_000),
        KeyError("type"),
        TypeError("'NoneType' object is not subscriptable"),
        TimeoutError(),
        ExceptionGroup("both", [RuntimeError("one"), Skip("two")]),
        httpx.ReadTimeout("slow"),
        UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"),
        json.JSONDecodeError("Expecting value", "", 0),
        Skip("needs a flag"),
        Fail("setup broke a rule"),
    ]
)


@given(error=EXCEPTIONS)
async def test_any_exception_in_a_case_becomes_its_fail_or_skip(error: Exception) -> None:
    async def raises(probe: Probe) -> Any:
        raise error

    client = Client(FaultyTarget().app)
    probe = Probe(client, Options(**KIT))

    result = await _run(probe, Case("raising", ("RES-1",), raises, "raises"))

    assert result.status == ("skip" if isinstance(error, Skip) else "fail")
    assert len(result.evidence) <= 400
    await client.aclose()


async def test_a_stream_past_a_limit_is_a_client_error_the_case_fails_on() -> None:
    async def reads(probe: Probe) -> Any:
        await probe.thread().say("hello")
        raise AssertionError("unreachable: the stream is endless")

    client = Client(FaultyTarget(frozenset({"endless-stream"})).app, limits=StreamLimits(max_bytes=8 * KIB))
    probe = Probe(client, Options(**KIT))

    result = await _run(probe, Case("reading", ("TRANS-1",), reads, "reads"))

    assert result.status == "fail"
    assert "StreamLimitExceeded" in result.evidence
    assert client.exchanges[0].reply.problems[-1].startswith("reading stopped: The server sent more than 8192 bytes")
    await client.aclose()


@pytest.mark.parametrize("exact", [False, True], ids=["events", "exact"])
async def test_a_rerun_reported_under_the_old_message_id_never_passes(exact: bool) -> None:
    report, target = await run_kit("not-once", "reuses-result-ids", exact=exact)

    for case_id in ("replay", "concurrent-resume"):
        if exact:
            assert report[case_id].status == "fail", (case_id, report.table())
        else:
            assert report[case_id].status == "warn", (case_id, report.table())
            assert "cannot see" in report[case_id].evidence
            assert "--executions-url can tell" in report[case_id].evidence
    assert sum(target.executions.values()) >= 4, "the refunds the kit could not see are real"


async def test_a_target_that_reuses_message_ids_but_runs_once_still_passes() -> None:
    report, _ = await run_kit("reuses-result-ids")

    assert report["replay"].status == "pass", report.table()
    assert report["concurrent-resume"].status == "pass"


@pytest.mark.parametrize("exact", [False, True], ids=["events", "exact"])
async def test_an_invalid_payload_that_answers_the_call_fails(exact: bool) -> None:
    report, _ = await run_kit("invalid-is-denial", exact=exact)

    assert report["invalid-payload"].status == "fail", report.table()
    assert "yet it answered the call" in report["invalid-payload"].evidence
