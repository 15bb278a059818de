"""AG-UI 1.1's rules for a producer, held by this adapter (docs/spec-1.1.md lists each with its test)."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from ag_ui.core import RunAgentInput, UserMessage
from hypothesis import example, given
from hypothesis import strategies as st

from adapter import Adapter, ConfigurationError, Limits, create_app, tool
from adapter._compat import speaks_1_1  # private on purpose: the version rule over any text
from adapter.backends import (
    BackendItem,
    Call,
    ModelRequest,
    ReasoningDelta,
    Rule,
    ScriptedBackend,
    TextDelta,
    ToolCall,
    Usage,
)
from adapter.client import AGUIClient, Run, approved, resolved

WARNING = "adapter.warning"


@tool(requires_approval=True)
def refund_order(order_id: str) -> str:
    """Refund an order; a person approves it first."""
    return f"refunded {order_id}"


def refunds(**options: Any) -> AGUIClient:
    rules = [
        Rule(r"refund order (\w+)", steps=[[Call("refund_order", {"order_id": "{1}"})]]),
    ]
    return AGUIClient(create_app(Adapter(ScriptedBackend(rules), tools=[refund_order], **options)), strict=False)


def warnings(run: Run) -> list[dict[str, Any]]:
    return [e["value"] for e in run.of("CUSTOM") if e.get("name") == WARNING]


async def test_an_unknown_resume_entry_is_refused_by_default() -> None:
    async with refunds() as client:
        thread = client.thread()
        await thread.say("refund order A1")
        refused = await thread.resume(resolved("int-never-raised", {"approved": True}))

    assert refused.error is not None
    assert refused.error["code"] == "RESUME_UNKNOWN_INTERRUPT"


async def test_with_warn_an_unknown_entry_is_left_out_the_run_goes_on_and_a_warning_says_so() -> None:
    """1.1: "the run SHOULD proceed without the entry, and the producer SHOULD surface a warning"; carried in a
    CUSTOM event, which a 1.0 client passes by."""
    async with refunds(unknown_resume_entries="warn") as client:
        thread = client.thread()
        (interrupt,) = (await thread.say("refund order A1")).wire_interrupts
        run = await thread.resume(approved(interrupt), resolved("int-never-raised", {"approved": True}))

    assert run.error is None, run.ending()
    assert run.outcome == {"type": "success"}, run.ending()
    assert [r["content"] for r in run.of("TOOL_CALL_RESULT")] == ["refunded A1"]
    assert warnings(run) == [
        {
            "code": "RESUME_UNKNOWN_INTERRUPT",
            "message": "resume entries left out, no such interrupt on this thread: int-never-raised",
            "interruptIds": ["int-never-raised"],
        }
    ]
    assert [e["type"] for e in run.wire[:2]] == ["RUN_STARTED", "CUSTOM"]


async def test_with_warn_an_open_interrupt_left_uncovered_stays_open() -> None:
    """1.1: a producer that can tell an interrupt is open keeps it open, and MAY reject the input; the run MUST NOT
    end as success. Left without its one (unknown) entry, the input is refused as any input that answers nothing."""
    async with refunds(unknown_resume_entries="warn") as client:
        thread = client.thread()
        (interrupt,) = (await thread.say("refund order A1")).wire_interrupts
        run = await thread.resume(resolved("int-never-raised", {"approved": True}))
        after = await thread.resume(approved(interrupt))

    assert run.error is not None, "an uncovered interrupt is never dropped"
    assert run.error["code"] == "RESUME_REQUIRED", "an uncovered interrupt is never dropped"
    assert not run.of("TOOL_CALL_RESULT")
    assert after.outcome == {"type": "success"}
    assert len(after.of("TOOL_CALL_RESULT")) == 1


async def test_with_warn_a_replay_is_still_a_replay() -> None:
    async with refunds(unknown_resume_entries="warn") as client:
        thread = client.thread()
        (interrupt,) = (await thread.say("refund order A1")).wire_interrupts
        first = await thread.resume(approved(interrupt))
        again = await client.run({**first.input, "runId": "run-replayed"})

    assert not warnings(again), "an entry of the resume this thread applied is known"
    assert again.outcome == first.outcome
    assert not again.of("TOOL_CALL_RESULT")


def test_the_option_is_checked_when_the_adapter_is_built() -> None:
    with pytest.raises(ConfigurationError, match="unknown_resume_entries must be 'refuse' or 'warn'"):
        Adapter(ScriptedBackend([]), unknown_resume_entries="ignore")  # type: ignore[arg-type]


class SpendsAndCalls:
    """Each step reports usage (input only: no output count known) and calls `lookup` or asks approval."""

    def __init__(self) -> None:
        self.steps = 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[BackendItem]:
        self.steps += 1
        yield TextDelta(f"step {self.steps} ")
        yield Usage(10 * self.steps, 1, provider="p", model="m", reasoning_tokens=None)
        name = "refund_order" if "refund" in str(request.messages[-1]) and self.steps == 1 else "lookup"
        yield ToolCall(f"call-{self.steps}", name, '{"order_id": "A1"}')


@tool
def lookup(order_id: str) -> str:
    """Look an order up."""
    return f"order {order_id}"


async def test_a_stopped_run_closes_what_it_opened_has_no_result_and_reports_its_usage_so_far() -> None:
    """1.1 Cancelled runs: closed like any run before its cancelled RUN_FINISHED; `result` SHOULD be absent; `usage`
    MAY report the tokens accrued before the stop. Here the stop is `max_steps`, a limit the producer enforces."""
    backend = SpendsAndCalls()
    app = create_app(Adapter(backend, tools=[lookup], limits=Limits(max_steps=2)))
    async with AGUIClient(app) as client:
        run = await client.thread().say("look order A1 up")

    finished = run.finished
    assert finished is not None
    assert finished["outcome"] == {"type": "cancelled"}
    assert "result" not in finished
    assert finished["usage"] == [
        {"provider": "p", "model": "m", "inputTokens": 30, "outputTokens": 2, "totalTokens": 32}
    ]
    assert "reasoningTokens" not in finished["usage"][0], "an absent count is not zero"
    assert run.problems == [], "a strict client read it: everything it opened closed before RUN_FINISHED"
    opened = {e["toolCallId"] for e in run.of("TOOL_CALL_START")}
    assert opened == {e["toolCallId"] for e in run.of("TOOL_CALL_END")}
    assert opened


async def test_a_resumed_run_reports_only_its_own_model_calls() -> None:
    """1.1 Token usage: a run that resumes an interrupted one reports only the calls it made itself."""
    backend = SpendsAndCalls()
    app = create_app(Adapter(backend, tools=[refund_order, lookup], limits=Limits(max_steps=2)))
    async with AGUIClient(app) as client:
        thread = client.thread()
        asked = await thread.say("refund order A1")
        (interrupt,) = asked.wire_interrupts
        resumed = await thread.resume(approved(interrupt))

    assert asked.finished is not None
    assert asked.finished["usage"][0]["inputTokens"] == 10
    assert resumed.finished is not None
    assert resumed.finished["usage"][0]["inputTokens"] == sum(10 * n for n in range(2, backend.steps + 1))


async def test_the_reattach_route_is_declared_as_a_transport_of_our_own() -> None:
    """1.1 Capabilities: `transport.resumable` MAY be declared for a transport of one's own; the standard bindings
    resume nothing. docs/wire-format.md shows the declaration; it is the adapter's."""
    app = create_app(Adapter(ScriptedBackend([])))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://agui") as http:
        body = (await http.get("/capabilities")).json()

    page = (Path(__file__).parents[2] / "docs" / "wire-format.md").read_text(encoding="utf-8")
    shown = json.loads(
        page.split("`custom.reattach` declare the reattach route", 1)[1].split("```json\n", 1)[1].split("```", 1)[0]
    )
    assert body["transport"] == shown["transport"] == {"streaming": True, "resumable": True}
    assert body["custom"] == shown["custom"]
    assert body["custom"]["reattach"]["route"] == "GET {mount}/threads/{threadId}/runs/{runId}/events"


class Thinking:
    """A model that thinks with a signed artefact of a named type, then asks for a refund (or answers)."""

    def __init__(self) -> None:
        self.requests: list[ModelRequest] = []

    async def stream(self, request: ModelRequest) -> AsyncIterator[BackendItem]:
        self.requests.append(request)
        yield ReasoningDelta(
            "Thinking.", message_id="think-1", encrypted_value="c2ln", encrypted_value_type="anthropic"
        )
        if len(self.requests) == 1:
            yield ToolCall("call-1", "refund_order", '{"order_id": "A1"}', message_id="ask-1")
        else:
            yield TextDelta("Done.", message_id="said-1")


def without_type(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: without_type(item) for key, item in value.items() if key != "encryptedValueType"}
    if isinstance(value, list):
        return [without_type(item) for item in value]
    return value


async def turn(version: str) -> tuple[Thinking, Adapter, list[dict[str, Any]]]:
    backend = Thinking()
    adapter = Adapter(backend, tools=[refund_order])
    opening = RunAgentInput(
        thread_id="t1",
        run_id="r1",
        messages=[UserMessage(id="u1", content="refund A1")],
        tools=[],
        context=[],
        protocol_version=version,
    )
    events = [event.model_dump(mode="json", by_alias=True, exclude_none=True) async for event in adapter.run(opening)]
    return backend, adapter, events


def same_ids(events: list[dict[str, Any]]) -> Any:
    """The events with the interrupt ids each run draws afresh named alike, to compare two runs."""
    return json.loads(re.sub(r"int_[0-9a-f]{32}", "int_", json.dumps(events)))


def typed(events: list[dict[str, Any]]) -> list[str]:
    """Where an encryptedValueType is, by event type."""
    return [event["type"] for event in events if "encryptedValueType" in json.dumps(event)]


async def test_the_type_of_an_encrypted_value_is_kept_returned_and_sent_to_a_1_1_peer() -> None:
    backend, adapter, events = await turn("1.1.0")

    assert typed(events) == ["REASONING_ENCRYPTED_VALUE", "MESSAGES_SNAPSHOT"]
    (signed,) = [event for event in events if event["type"] == "REASONING_ENCRYPTED_VALUE"]
    assert (signed["encryptedValue"], signed["encryptedValueType"]) == ("c2ln", "anthropic")
    thread = await adapter.thread("t1")
    assert thread is not None
    (thought,) = [message for message in thread["messages"] if message["role"] == "reasoning"]
    assert (thought["encryptedValue"], thought["encryptedValueType"]) == ("c2ln", "anthropic")
    (interrupt,) = events[-1]["outcome"]["interrupts"]
    answer = {"interruptId": interrupt["id"], "status": "resolved", "payload": {"approved": True}}
    [event async for event in adapter.resume("t1", [answer], run_id="r2")]
    (returned,) = [message for message in backend.requests[-1].messages if message.role == "reasoning"]
    assert (returned.encrypted_value, (returned.model_extra or {}).get("encryptedValueType")) == ("c2ln", "anthropic")


async def test_a_1_0_peer_gets_the_same_events_without_the_type_and_the_store_keeps_it() -> None:
    _, _, newer = await turn("1.1.0")
    _, adapter, older = await turn("1.0.0")

    assert typed(older) == []
    assert same_ids(older) == same_ids(without_type(newer))
    thread = await adapter.thread("t1")
    assert thread is not None
    (thought,) = [message for message in thread["messages"] if message["role"] == "reasoning"]
    assert thought["encryptedValueType"] == "anthropic"  # kept for a peer that reads it


@given(st.text() | st.from_regex(r"[0-9]{1,3}(\.[0-9]{1,3}){0,2}", fullmatch=True))
@example("1." + "9" * 5000)
@example("9" * 5000 + ".0")
@example("01.01")
def test_whether_a_peer_reads_1_1_is_an_answer_for_any_declared_version(version: str) -> None:
    """The versions it names compare as numbers; anything else is not 1.1, and nothing raises."""
    numbers = re.fullmatch(r"([0-9]+)\.([0-9]+)(\..*)?", version)
    expected = numbers is not None and (int(numbers[1]), int(numbers[2])) >= (1, 1) if len(version) < 100 else None
    answer = speaks_1_1(version)
    assert expected is None or answer == expected
