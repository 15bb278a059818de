"""The spans and counters of one suspend-and-resume, through the OpenTelemetry SDK's in-memory exporter."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from ag_ui.core import RunAgentInput, UserMessage
from agui import error_code, interrupts_of

from adapter import Adapter, ToolContext, tool
from adapter.backends import Call, Rule, ScriptedBackend
from adapter.stores import MemoryStore

sdk = pytest.importorskip("opentelemetry.sdk.trace", reason="pip install opentelemetry-sdk (the dev group has it)")
from opentelemetry import metrics, trace  # noqa: E402
from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, NumberDataPoint  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

_EXPORTER = InMemorySpanExporter()
_READER = InMemoryMetricReader()


@pytest.fixture(scope="module", autouse=True)
def providers() -> Iterator[None]:
    """The SDK as the global providers, once per process (OpenTelemetry allows only one set)."""
    provider = sdk.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
    trace.set_tracer_provider(provider)
    metrics.set_meter_provider(MeterProvider(metric_readers=[_READER]))
    yield


def attributes(span: ReadableSpan) -> Mapping[str, Any]:
    assert span.attributes is not None, span
    return span.attributes


def counters() -> dict[str, list[tuple[dict[str, Any], int]]]:
    data = _READER.get_metrics_data()
    found: dict[str, list[tuple[dict[str, Any], int]]] = {}
    for resource in data.resource_metrics if data else []:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                points = found[metric.name] = []
                for point in metric.data.data_points:
                    assert isinstance(point, NumberDataPoint), point  # the adapter records counters only
                    points.append((dict(point.attributes or {}), int(point.value)))
    return found


async def test_the_spans_and_counters_of_one_suspend_and_resume() -> None:
    @tool(requires_approval=True)
    async def pay(amount: str, ctx: ToolContext) -> str:
        """Pay an amount."""
        return f"paid {amount}"

    rules = [Rule(r"pay (?P<amount>\d+)", steps=[[Call("pay", {"amount": "{amount}"})]], reply="Done.")]
    adapter = Adapter(ScriptedBackend(rules), tools=[pay], store=MemoryStore())
    opening = RunAgentInput(
        thread_id="t1", run_id="r0", messages=[UserMessage(id="u1", content="pay 10")], tools=[], context=[]
    )
    _EXPORTER.clear()

    (interrupt,) = interrupts_of([event async for event in adapter.run(opening)][-1])
    approval = {"interruptId": interrupt.id, "status": "resolved", "payload": {"approved": True}}
    resumed = [event async for event in adapter.resume("t1", [approval], run_id="r1")]
    replayed = [event async for event in adapter.resume("t1", [approval], run_id="r1")]
    refused = [event async for event in adapter.resume("t1", [{**approval, "interruptId": "nope"}], run_id="r2")]

    assert resumed[-1].type == replayed[-1].type == "RUN_FINISHED"
    assert refused[-1].type == "RUN_ERROR"
    spans = [
        (s.name, attributes(s)["agui.run_id"], attributes(s).get("agui.outcome"), attributes(s).get("agui.error_code"))
        for s in _EXPORTER.get_finished_spans()
    ]
    assert spans == [
        ("agui.resume_gate", "r0", "new", None),
        ("agui.model_step", "r0", "calls", None),
        ("agui.run", "r0", "interrupt", None),
        ("agui.resume_gate", "r1", "resume", None),
        ("agui.tool", "r1", "success", None),
        ("agui.model_step", "r1", "text", None),
        ("agui.run", "r1", "success", None),
        ("agui.resume_gate", "r1", "replay", None),
        ("agui.run", "r1", "success", None),
        ("agui.resume_gate", "r2", "refused", error_code(refused[-1])),
        ("agui.run", "r2", "error", error_code(refused[-1])),
    ]
    by_name = {span.name + str(attributes(span)["agui.run_id"]): span for span in _EXPORTER.get_finished_spans()}
    assert by_name["agui.toolr1"].parent is not None
    assert all(attributes(span)["agui.thread_id"] == "t1" for span in _EXPORTER.get_finished_spans())
    found = counters()
    assert found["agui.interrupts.opened"] == [({}, 1)]
    assert found["agui.interrupts.answered"] == [({}, 1)]
    assert found["agui.resume.duplicates"] == [({}, 1)]
    assert found["agui.resume.refusals"] == [({"agui.error_code": error_code(refused[-1])}, 1)]


async def test_two_runs_under_one_run_id_each_parent_their_own_spans() -> None:
    """The parent is passed, not looked up by the run id a client chose: interleaved runs never share one."""

    @tool
    def lookup(ctx: ToolContext) -> str:
        """Look something up."""
        return "found"

    rules = [Rule(r"look", steps=[[Call("lookup", {})]], reply="Done.")]
    here, there = (Adapter(ScriptedBackend(rules), tools=[lookup], store=MemoryStore()) for _ in range(2))

    def one(thread: str) -> RunAgentInput:
        said = UserMessage(id=f"u-{thread}", content="look")
        return RunAgentInput(thread_id=thread, run_id="same", messages=[said], tools=[], context=[])

    _EXPORTER.clear()
    first = here.run(one("t1"))
    while (await anext(first)).type != "TOOL_CALL_START":  # the first run's span is open, its tool not yet run
        pass
    assert [event async for event in there.run(one("t1"))][-1].type == "RUN_FINISHED"  # another, on one thread
    rest = [event async for event in first]

    assert rest[-1].type == "RUN_FINISHED"
    spans = _EXPORTER.get_finished_spans()
    runs = [s.context.span_id for s in spans if s.name == "agui.run"]
    parents = Counter(s.parent.span_id if s.parent else None for s in spans if s.name != "agui.run")
    # the gate, two steps and a tool, under their run
    assert len(runs) == 2
    assert parents == {runs[0]: 4, runs[1]: 4}
