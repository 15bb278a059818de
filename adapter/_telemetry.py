"""Spans and counters through the OpenTelemetry API, when it is installed; nothing at all otherwise.

Without `opentelemetry-api` every call here is a no-op on a shared null object. With it and no SDK
configured, the API's own no-op tracer and meter answer. An application that configures an SDK
(a `TracerProvider`, a `MeterProvider`) gets, under the instrumentation scope `agui-adapter`:

- spans `agui.run`, `agui.resume_gate`, `agui.model_step`, `agui.tool` with the attributes
  `agui.thread_id`, `agui.run_id`, `agui.outcome` and, on failure, `agui.error_code`;
- counters `agui.interrupts.opened`, `agui.interrupts.answered`, `agui.interrupts.expired` (answers
  refused because their interrupt expired), `agui.resume.refusals` (attribute `agui.error_code`),
  `agui.resume.duplicates` (identical resumes answered from the stored outcome) and
  `agui.lease.takeovers` (a resume that took over a claim whose lease ran out).

Spans are not made current (the run is an async generator, resumed from different places): a run's
span is found by its thread and run id, and the spans inside it are its children.
"""

from __future__ import annotations

from typing import Any, Final, Protocol

try:
    from opentelemetry import metrics as _metrics
    from opentelemetry import trace as _trace
except ImportError:  # pragma: no cover - the optional dependency is absent
    _trace = None  # type: ignore[assignment]
    _metrics = None  # type: ignore[assignment]

SCOPE: Final = "agui-adapter"


class Span(Protocol):
    """What the engine does with a span."""

    def set_attribute(self, key: str, value: Any) -> Any:
        """Set one attribute."""
        ...

    def end(self) -> Any:
        """End the span."""
        ...


class _NullSpan:
    def set_attribute(self, key: str, value: Any) -> None:
        pass

    def end(self) -> None:
        pass


class _NullCounter:
    def add(self, amount: int, attributes: dict[str, str] | None = None) -> None:
        pass


_NULL_SPAN: Final = _NullSpan()
_runs: dict[tuple[str, str], Span] = {}
"""The open run spans, by (thread id, run id): the parents of the spans started inside a run."""

if _trace is not None and _metrics is not None:
    _tracer: Any = _trace.get_tracer(SCOPE)  # a proxy: follows a provider configured later
    _meter = _metrics.get_meter(SCOPE)
    opened: Any = _meter.create_counter("agui.interrupts.opened", description="Interrupts a turn suspended on")
    answered: Any = _meter.create_counter("agui.interrupts.answered", description="Interrupts answered by a resume")
    expired: Any = _meter.create_counter("agui.interrupts.expired", description="Answers refused: interrupt expired")
    refusals: Any = _meter.create_counter("agui.resume.refusals", description="Resumes refused, by error code")
    duplicates: Any = _meter.create_counter("agui.resume.duplicates", description="Identical resumes absorbed")
    takeovers: Any = _meter.create_counter("agui.lease.takeovers", description="Claims taken over after the lease")
else:  # pragma: no cover - the optional dependency is absent
    _tracer = None
    opened = answered = expired = refusals = duplicates = takeovers = _NullCounter()


def start(name: str, thread_id: str, run_id: str, **attributes: str) -> Span:
    """Start a span inside the run's span (or the run's own, for `agui.run`); end it with `.end()`."""
    if _tracer is None:  # pragma: no cover - the optional dependency is absent
        return _NULL_SPAN
    parent = _runs.get((thread_id, run_id))
    context = _trace.set_span_in_context(parent) if parent is not None else None  # type: ignore[arg-type]
    span: Span = _tracer.start_span(
        name, context=context, attributes={"agui.thread_id": thread_id, "agui.run_id": run_id, **attributes}
    )
    if name == "agui.run":
        _runs[(thread_id, run_id)] = span
    return span


def end_run(span: Span, thread_id: str, run_id: str, outcome: str, code: str | None = None) -> None:
    """End a run's span with its outcome (and error code)."""
    finish(span, outcome, code)
    if _runs.get((thread_id, run_id)) is span:
        del _runs[(thread_id, run_id)]


def finish(span: Span, outcome: str, code: str | None = None) -> None:
    """End a span with its outcome (and error code)."""
    span.set_attribute("agui.outcome", outcome)
    if code is not None:
        span.set_attribute("agui.error_code", code)
    span.end()
