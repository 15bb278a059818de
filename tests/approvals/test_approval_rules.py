"""`requires_approval` as a rule: asked for each call with its validated arguments; a rule that fails asks."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import pytest
from agui import resolved
from approvals_kit import Chat, interrupts, results

from adapter import Adapter, ConfigurationError, ToolContext, tool
from adapter.backends import Call, Rule, ScriptedBackend

REFUND = Rule(r"refund (\d+)", steps=[[Call("refund", lambda p: {"order_id": "A1", "amount": int(p.match[1])})]])
BAD_REFUND = Rule(r"refund nothing", steps=[[Call("refund", {"order_id": "A1", "amount": "lots"})]])
BACKEND = ScriptedBackend([BAD_REFUND, REFUND], fallback="ok")


def refunding(rule: Any, ran: list[int]) -> Adapter:
    @tool(requires_approval=rule)
    def refund(order_id: str, amount: int) -> str:
        """Refund part of an order."""
        ran.append(amount)
        return f"refunded {amount}"

    return Adapter(BACKEND, tools=[refund])


def over_100(ctx: ToolContext, arguments: dict[str, Any]) -> bool:
    return bool(arguments["amount"] > 100)


async def test_a_rule_that_says_no_runs_the_call_at_once_and_one_that_says_yes_asks() -> None:
    ran: list[int] = []
    chat = Chat(refunding(over_100, ran))

    small = await chat.say("refund 40")
    large = await chat.say("refund 400")

    assert interrupts(small) == []
    assert [r["content"] for r in results(small)] == ["refunded 40"]
    (waiting,) = interrupts(large)
    assert waiting["metadata"] == {"toolName": "refund"}
    assert ran == [40]
    approved = await chat.resume(resolved(waiting["id"], {"approved": True}))
    assert [r["content"] for r in results(approved)] == ["refunded 400"]
    assert ran == [40, 400]


async def test_the_rule_gets_the_calls_context_and_its_validated_arguments() -> None:
    asked: list[tuple[ToolContext, dict[str, Any]]] = []

    async def remember(ctx: ToolContext, arguments: dict[str, Any]) -> bool:  # an async rule, awaited
        asked.append((ctx, arguments))
        return False

    chat = Chat(refunding(remember, []), principal="alice")
    events = await chat.say("refund 7")

    ((ctx, arguments),) = asked
    assert arguments == {"order_id": "A1", "amount": 7}
    (call,) = [e for e in events if e["type"] == "TOOL_CALL_START"]
    assert (ctx.thread_id, ctx.tool_call_id, ctx.principal) == (chat.thread_id, call["toolCallId"], "alice")


def raises(ctx: ToolContext, arguments: dict[str, Any]) -> bool:
    raise RuntimeError("the rule's database is down")


def says_maybe(ctx: ToolContext, arguments: dict[str, Any]) -> Any:
    return "maybe"


async def fails_later(ctx: ToolContext, arguments: dict[str, Any]) -> bool:
    raise KeyError("amount")


@pytest.mark.parametrize("rule", [raises, fails_later, says_maybe], ids=["raises", "async-raises", "not-a-bool"])
async def test_a_rule_that_fails_asks_and_is_logged(rule: Any, caplog: pytest.LogCaptureFixture) -> None:
    ran: list[int] = []
    chat = Chat(refunding(rule, ran))

    with caplog.at_level(logging.ERROR, logger="adapter.tools"):
        events = await chat.say("refund 1")

    assert len(interrupts(events)) == 1
    assert ran == []
    assert any("approval rule of refund" in record.getMessage() for record in caplog.records)


async def test_a_rule_is_not_asked_about_invalid_arguments_and_nothing_runs() -> None:
    asked: list[dict[str, Any]] = []
    ran: list[int] = []

    def rule(ctx: ToolContext, arguments: dict[str, Any]) -> bool:
        asked.append(arguments)
        return True

    events = await Chat(refunding(rule, ran)).say("refund nothing")

    (result,) = results(events)
    assert interrupts(events) == []
    assert asked == []
    assert ran == []
    assert "Invalid arguments for refund" in result["content"]


async def test_true_and_false_keep_their_meaning() -> None:
    always: list[int] = []
    never: list[int] = []

    asks = await Chat(refunding(True, always)).say("refund 1")
    runs = await Chat(refunding(False, never)).say("refund 1")

    assert len(interrupts(asks)) == 1
    assert always == []
    assert interrupts(runs) == []
    assert never == [1]


@pytest.mark.parametrize("given", ["yes", 1, None], ids=["str", "int", "none"])
def test_requires_approval_is_a_bool_or_a_rule(given: Any) -> None:
    with pytest.raises(ConfigurationError, match="requires_approval"):

        @tool(requires_approval=given)
        def refund(amount: int) -> str:
            """Refund."""
            return "no"


def test_an_external_tool_takes_no_rule() -> None:
    with pytest.raises(ConfigurationError, match="external"):

        @tool(requires_approval=over_100, external=True)
        def refund(amount: int) -> str:
            """Refund."""
            return "no"


def docs_block(heading: str) -> str:
    """The first Python block under `heading` in docs/tools.md."""
    text = (Path(__file__).parents[2] / "docs" / "tools.md").read_text(encoding="utf-8")
    found = re.search(r"```python\n(.*?)```", text[text.index(heading) :], re.S)
    assert found is not None
    return found[1]


async def test_the_docs_rule_example_runs_as_written() -> None:
    namespace: dict[str, Any] = {}
    exec(docs_block("### A rule per call"), namespace)  # the example as written
    chat = Chat(Adapter(BACKEND, tools=[namespace["refund"]]))

    small, large = await chat.say("refund 40"), await chat.say("refund 400")

    assert [r["content"] for r in results(small)] == ["refunded 40 on A1"]
    assert len(interrupts(large)) == 1
