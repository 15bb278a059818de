"""A kit run holds a bounded amount in all, whatever the target sends: each stream within its limits, and the
exchanges it records for the stream-wide cases within `KEPT_BYTES`, counted as held (issue 44: 2.8 GB at its peak
against a target that streams without end, every case's stream cut at 64 MiB but all of them kept)."""

from __future__ import annotations

import gc
import tracemalloc
from typing import Any

import pytest
from kit_targets import FaultyTarget

from adapter.client import Run, StreamLimitExceeded, StreamLimits
from adapter.conformance import check

# Private on purpose: the bound is the kit client's, measured as it counts.
from adapter.conformance._client import Client, Exchange
from adapter.conformance._held import held

MIB = 1024 * 1024
KIT: dict[str, Any] = {
    "frontend_tool": "navigate",
    "frontend_message": "go to settings",
    "approval_message": "refund order A1",
}
LIMITS = StreamLimits(max_bytes=MIB, event_timeout=10)


async def one_cut_run() -> int:
    """What one stream cut at `LIMITS` holds."""
    client = Client(FaultyTarget(frozenset({"endless-stream"})).app, limits=LIMITS)
    with pytest.raises(StreamLimitExceeded):
        await client.thread().say("hello")
    size = client.exchanges[0].size
    await client.aclose()
    return size


async def test_a_check_against_an_endless_target_holds_its_bound_not_every_stream(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run = await one_cut_run()
    monkeypatch.setattr("adapter.conformance._client.KEPT_BYTES", 2 * run)
    target = FaultyTarget(frozenset({"endless-stream"}))
    gc.collect()
    tracemalloc.start()
    try:
        report = await check(target.app, **KIT, limits=LIMITS)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()

    cut = [case for case in report.cases if "StreamLimitExceeded" in case.evidence]
    assert len(cut) >= 10, report.table()
    assert target.sent >= len(cut) * MIB, "every case's stream was read up to its limit"
    assert peak <= 2 * run + 4 * run, f"peak {peak / MIB:.0f} MiB; one cut stream holds {run / MIB:.1f} MiB"
    assert "forgotten past the kit's memory bound" in report["ag-ui-validate"].evidence
    assert report["lifecycle"].status == "fail"
    assert "reading stopped" in report["lifecycle"].evidence


def test_a_forgotten_exchange_keeps_what_the_stream_wide_cases_read() -> None:
    started = {"type": "RUN_STARTED", "threadId": "t", "runId": "r"}
    text = [{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "x" * 1000} for _ in range(200)]
    run = Run({"threadId": "t", "resume": [{"interruptId": "i"}]}, status=200, problems=["LIFE-3: ..."])
    run.wire = [started, *text, {"type": "RUN_ERROR", "message": "no"}]
    exchange = Exchange("replay", run.input, run)
    exchange.size = held(exchange.body) + held(run)

    before = exchange.size
    exchange.forget()

    assert exchange.forgotten
    assert exchange.resumed
    assert exchange.reply.of("RUN_STARTED") == [started]
    assert exchange.reply.error is not None
    assert exchange.reply.problems == ["LIFE-3: ..."]
    assert exchange.reply.ending() == run.ending()
    assert exchange.size < before / 10
