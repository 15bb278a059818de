"""Spans and counters through the OpenTelemetry API, when it is installed; nothing at all otherwise.

Without `opentelemetry-api` every call here is a no-op on a shared null object, and so it is while
the application has not imported the API (nor named a provider in the environment): the API is
imported at the first span or count after that, so an app without telemetry never holds it. With it
and no SDK configured, the API's own no-op tracer and meter answer. An application that configures an SDK
(a `TracerProvider`, a `MeterProvider`) gets, under the instrumentation scope `agui-adapter`:

- spans `agui.run`, `agui.resume_gate`, `agui.model_step`, `agui.tool` with the attributes
  `agui.thread_id`, `agui.run_id`, `agui.outcome` and, on failure, `agui.error_code`;
- counters `agui.interrupts.opened`, `agui.interrupts.answered`, `agui.interrupts.expired` (answers
  refused because their interrupt expired), `agui.resume.refusals` (attribute `agui.error_code`),
  `agui.resume.duplicates` (identical resumes answered from the stored outcome) and
  `agui.lease.takeovers` (a resume that took over a claim whose lease ran out).

Spans are not made current (the run is an async generator, resumed from different places): the run
passes its span to what it starts as `parent`, so each span inside a run is its child, and two runs
that share a run id never share a parent.
"""

from __future__ import annotations

import os
import sys
from types import ModuleType
from typing import Any, Final, Protocol

SCOPE: Final = "agui-adapter"
_SWITCHES: Final = ("opentelemetry.trace", "opentelemetry.metrics")
"""An app that configures a provider has imported one of these (so has `opentelemetry-instrument`)."""
_NAMED: Final = any(os.environ.get(name) for name in ("OTEL_PYTHON_TRACER_PROVIDER", "OTEL_PYTHON_METER_PROVIDER"))
"""Or it names a provider for the API to load (read once, at import, as the API reads it once)."""


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


NULL_SPAN: Final[Span] = _NullSpan()
"""The span of nothing: what `start` returns while telemetry is off, and the parent of a run's span."""
_api: list[tuple[ModuleType, Any, ModuleType]] = []
"""The API's trace module, this scope's tracer and the metrics module, once telemetry is on (issue 22:
until then the API stays unimported, its modules out of memory)."""


def _on() -> tuple[ModuleType, Any, ModuleType] | None:
    """The API's modules if the app uses OpenTelemetry (and it is installed), else None."""
    if _api:
        return _api[0]
    if not _NAMED and not any(name in sys.modules for name in _SWITCHES):
        return None
    try:
        from opentelemetry import metrics, trace
    except ImportError:  # pragma: no cover - the optional dependency is absent
        return None
    _api.append((trace, trace.get_tracer(SCOPE), metrics))  # a proxy: follows a provider set later
    return _api[0]


class _Counter:
    """A counter created through the API on its first use with telemetry on; nothing until then."""

    def __init__(self, name: str, description: str) -> None:
        self.name, self.description = name, description
        self._counter: Any = None

    def add(self, amount: int, attributes: dict[str, str] | None = None) -> None:
        if self._counter is None:
            api = _on()
            if api is None:
                return
            self._counter = api[2].get_meter(SCOPE).create_counter(self.name, description=self.description)
        self._counter.add(amount, attributes)


opened: Final = _Counter("agui.interrupts.opened", "Interrupts a turn suspended on")
answered: Final = _Counter("agui.interrupts.answered", "Interrupts answered by a resume")
expired: Final = _Counter("agui.interrupts.expired", "Answers refused: interrupt expired")
refusals: Final = _Counter("agui.resume.refusals", "Resumes refused, by error code")
duplicates: Final = _Counter("agui.resume.duplicates", "Identical resumes absorbed")
takeovers: Final = _Counter("agui.lease.takeovers", "Claims taken over after the lease")


def start(name: str, thread_id: str, run_id: str, parent: Span = NULL_SPAN, **attributes: str) -> Span:
    """Start a span, a child of `parent` (a run's span; none for the run's own); end it with `finish`."""
    api = _on()
    if api is None:
        return NULL_SPAN
    trace, tracer, _ = api
    context = trace.set_span_in_context(parent) if parent is not NULL_SPAN else None
    span: Span = tracer.start_span(
        name, context=context, attributes={"agui.thread_id": thread_id, "agui.run_id": run_id, **attributes}
    )
    return span


def finish(span: Span, outcome: str, code: str | None = None) -> None:
    """End a span with its outcome (and error code)."""
    span.set_attribute("agui.outcome", outcome)
    if code is not None:
        span.set_attribute("agui.error_code", code)
    span.end()
