"""Stream-wide cases: they run last, over every stream the other cases captured."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from adapter.conformance._client import Exchange
from adapter.conformance._probe import Probe, Skip, Verdict, case, refused


@case("runs-accepted", "TRANS-1", "TRANS-2", "IN-3")
async def runs_accepted(probe: Probe) -> Verdict:
    """The target ran the kit's inputs: a check where every request was refused (or cut off) fails, it does not pass."""
    exchanges = probe.client.exchanges
    if not exchanges:
        raise Skip("no case sent a run")
    ran = [exchange for exchange in exchanges if not refused(exchange.reply) and not exchange.reply.stopped]
    if not ran:
        endings = _counts(Counter(exchange.reply.ending() for exchange in exchanges))
        return "fail", (
            f"every one of the {len(exchanges)} request(s) was refused or cut off ({endings}): nothing could be checked"
        )
    never = [f"{flag} ({n}×)" for flag, n in probe.tries.items() if n and probe.refusals[flag] == n]
    if never:
        return "warn", (
            f"{len(ran)} of {len(exchanges)} request(s) ran, but the target refused {', '.join(never)} every time:"
            " the cases that need it were skipped"
        )
    return "pass", f"{len(ran)} of {len(exchanges)} request(s) ran (the rest were refused on purpose)"


@case("lifecycle", "LIFE-1", "LIFE-2", "LIFE-3", "LIFE-4", "VER-1", "TRANS-3", "TRANS-4")
async def lifecycle(probe: Probe) -> Verdict:
    """Every stream: RUN_STARTED first, exactly one terminal event, `protocolVersion`, nothing left open."""
    streams = _streams(probe)
    problems = [f"{exchange.case}: {problem}" for exchange in streams for problem in _lifecycle(exchange)]
    if problems:
        return "fail", f"{len(problems)} problem(s) in {len(streams)} streams; first: {problems[0]}"
    return "pass", f"{len(streams)} streams: RUN_STARTED first, one terminal event, protocolVersion, all closed"


@case("ag-ui-validate", "EVT-2", "TXT-1", "TOOL-1", "LIFE-3")
async def ag_ui_validate(probe: Probe) -> Verdict:
    """ag-ui-validate's findings on every stream, with its known false positives against 1.0 marked."""
    try:
        from ag_ui_validate.pytest_plugin import validate_agui
    except ImportError as error:
        raise Skip("ag-ui-validate is not installed: pip install 'agui-adapter[conformance]'") from error
    streams = _streams(probe)
    errors: Counter[str] = Counter()
    excused: Counter[str] = Counter()
    forgotten = sum(exchange.forgotten for exchange in streams)
    unread = f"; {forgotten} stream(s) not validated: forgotten past the kit's memory bound" if forgotten else ""
    for exchange in (each for each in streams if not each.forgotten):
        events = exchange.reply.wire
        for finding in validate_agui(events).diagnostics:
            if finding.severity == "error":
                bucket = excused if _false_positive(finding.rule, finding.event_index, exchange) else errors
                bucket[finding.rule] += 1
    marked = f"; known 1.0 false positives marked: {_counts(excused)}{unread}" if excused else unread
    if errors:
        return "fail", f"{sum(errors.values())} error(s) in {len(streams)} streams: {_counts(errors)}{marked}"
    return "pass", f"{len(streams)} streams, no errors{marked}"


def _streams(probe: Probe) -> list[Exchange]:
    streams = [exchange for exchange in probe.client.exchanges if exchange.reply.is_stream]
    if not streams:
        raise Skip("no case captured a stream")
    return streams


def _lifecycle(exchange: Exchange) -> Iterator[str]:
    """What the client found reading the stream (framing, lifecycle), and RUN_STARTED's protocolVersion."""
    yield from exchange.reply.problems
    for started in exchange.reply.of("RUN_STARTED"):
        if not isinstance(started.get("protocolVersion"), str):
            yield "RUN_STARTED without protocolVersion (VER-1)"


def _false_positive(rule: str, index: int, exchange: Exchange) -> bool:
    """ag-ui-validate 0.4.0 findings that AG-UI 1.0 allows (AGUI-RULES §15)."""
    events = exchange.reply.wire
    event = events[index] if 0 <= index < len(events) else {}
    return (
        rule in ("AGUI105", "AGUI204", "AGUI005")  # empty delta; non-JSON args; a late RUN_ERROR
        or (rule == "AGUI207" and exchange.resumed)  # a result for a call of the run before
        or (rule == "AGUI001" and events[0]["type"] == "RUN_ERROR")  # RUN_ERROR first is legal
        or (rule == "AGUI504" and isinstance(event.get("content"), list))  # content parts
    )


def _counts(counter: Counter[str]) -> str:
    return ", ".join(f"{rule}×{count}" for rule, count in sorted(counter.items()))
