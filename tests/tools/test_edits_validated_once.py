"""A server tool's arguments meet its schema once: `invoke` skips only what was checked, and what accepts everything."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from ag_ui.core import RunAgentInput, UserMessage
from hypothesis import given
from hypothesis import strategies as st

import schema_tools
from adapter import Adapter, FunctionTool, ToolContext, tool
from adapter._run._access import View  # on purpose: the view each event passes, counted as the run asks it
from adapter.backends import ScriptedBackend
from schema_tools import validate

CONTEXT = ToolContext(thread_id="t", run_id="r", tool_call_id="c", idempotency_key="k")

_values = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=5), st.lists(st.integers(), max_size=2))
arguments = st.dictionaries(st.sampled_from(["to", "subject", "urgent", "other"]), _values, max_size=4)


def send_tool() -> tuple[FunctionTool, list[dict[str, Any]]]:
    ran: list[dict[str, Any]] = []

    @tool
    async def send(to: str, subject: str = "", urgent: bool = False) -> str:
        """Send a message."""
        ran.append({"to": to, "subject": subject, "urgent": urgent})
        return "sent"

    return send, ran


@pytest.fixture
def validations(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The schemas `invoke` validated against, in order."""
    seen: list[dict[str, Any]] = []
    original = schema_tools.avalidate

    async def counting(instance: Any, schema: dict[str, Any]) -> Any:
        seen.append(schema)
        return await original(instance, schema)

    monkeypatch.setattr("adapter._run._tools.avalidate", counting)
    return seen


@given(arguments)
async def test_unchecked_arguments_run_only_when_they_fit_the_schema(args: dict[str, Any]) -> None:
    send, ran = send_tool()

    result = await send.invoke(args, CONTEXT)

    fits = validate(args, dict(send.parameters)) == []
    assert (result.error != "invalid_arguments") == fits
    assert len(ran) == (1 if fits else 0)


async def test_arguments_the_gate_checked_are_not_validated_again(validations: list[dict[str, Any]]) -> None:
    send, ran = send_tool()

    result = await send.invoke({"to": "a@x.io"}, CONTEXT, checked=True)

    assert (result.error, validations, len(ran)) == (None, [], 1)


async def test_every_other_call_is_validated(validations: list[dict[str, Any]]) -> None:
    send, _ = send_tool()

    await send.invoke({"to": "a@x.io"}, CONTEXT)
    refused = await send.invoke({"to": 5}, CONTEXT)

    assert validations == [dict(send.parameters)] * 2
    assert refused.error == "invalid_arguments"


async def test_an_empty_schema_is_not_applied(validations: list[dict[str, Any]]) -> None:
    send, ran = send_tool()
    open_ended = dataclasses.replace(send, parameters={})

    result = await open_ended.invoke({"to": "a@x.io"}, CONTEXT)

    assert (result.error, validations, len(ran)) == (None, [], 1)


async def test_a_reader_of_everything_gets_every_event_without_asking_the_view(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []
    original = View.shown

    async def counting(self: View, event: Any, turn: Any) -> Any:
        asked.append(event.type)
        return await original(self, event, turn)

    monkeypatch.setattr(View, "shown", counting)
    run_input = RunAgentInput(
        thread_id="t1",
        run_id="r1",
        messages=[UserMessage(id="m1", content="hello there")],
        tools=[],
        context=[],
        state=None,
        forwarded_props=None,
    )

    events = [event async for event in Adapter(ScriptedBackend()).run(run_input)]

    assert [event.type for event in events][0] == "RUN_STARTED"
    assert events[-1].type == "RUN_FINISHED"
    assert asked == []
