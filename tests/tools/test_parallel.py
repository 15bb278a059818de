"""Parallel calls in one step: run what can run, suspend the rest, end with every interrupt at once."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from ag_ui.core import ToolMessage
from agui import FRONTEND_TOOLS, cancelled, json_content, resolved

from adapter.backends import ScriptedBackend

if TYPE_CHECKING:
    from conftest import Connect, Kit


@pytest.mark.parametrize("frontend_outcome", ["interrupt", "pending"])
async def test_one_step_runs_backend_tools_and_suspends_the_rest_together(
    connect: Connect, kit: Kit, backend: ScriptedBackend, frontend_outcome: str
) -> None:
    client = await connect(frontend_outcome=frontend_outcome)
    thread = client.thread(tools=FRONTEND_TOOLS)

    first = await thread.say("do everything")

    lookup, stock, navigate, email = (call["toolCallId"] for call in first.calls)
    assert [c["toolCallName"] for c in first.calls] == ["lookup_order", "check_stock", "navigate", "send_email"]
    assert list(first.results()) == [lookup, stock]
    assert first.results()[stock]["content"] == "12 lamp in stock"
    assert kit.calls["lookup_order"] == [{"order_id": "A17"}]
    assert kit.calls["check_stock"] == [{"item": "lamp"}]
    assert kit.count("send_email") == 0
    assert [(i["toolCallId"], i["reason"]) for i in first.interrupts] == [(navigate, "tool_call"), (email, "tool_call")]
    assert "pendingToolCallIds" not in first.outcome
    assert len({i["id"] for i in first.interrupts}) == 2
    assert len(backend.requests) == 1
    nav_interrupt, email_interrupt = first.interrupts

    second = await thread.resume(
        resolved(nav_interrupt["id"], {"navigated": "/orders"}), resolved(email_interrupt["id"], {"approved": True})
    )

    assert second.outcome == {"type": "success"}
    assert set(second.results()) == {navigate, email}
    assert [c["toolCallId"] for c in second.calls] == []
    assert kit.count("send_email") == 1
    assert kit.count("lookup_order") == kit.count("check_stock") == 1
    seen = {m.tool_call_id: m for m in backend.requests[-1].messages if isinstance(m, ToolMessage)}
    assert set(seen) == {lookup, stock, navigate, email}
    assert json_content(seen[navigate].content) == {"navigated": "/orders"}
    assert seen[email].content == "sent to boss@x.io"
    assert "navigate returned" in second.text
    assert "send_email returned sent to boss@x.io" in second.text


async def test_parallel_approvals_are_answered_per_entry(connect: Connect, kit: Kit, backend: ScriptedBackend) -> None:
    client = await connect()
    thread = client.thread()
    first = await thread.say("three emails")
    one, two, three = first.interrupts
    assert len({one["id"], two["id"], three["id"]}) == 3

    second = await thread.resume(
        resolved(one["id"], {"approved": True}), resolved(two["id"], {"approved": True}), cancelled(three["id"])
    )

    assert sorted(c["to"] for c in kit.calls["send_email"]) == ["p0@x.io", "p1@x.io"]
    results = second.results()
    assert results[one["toolCallId"]]["content"] == "sent to p0@x.io"
    assert results[two["toolCallId"]]["content"] == "sent to p1@x.io"
    assert "not executed" in results[three["toolCallId"]]["content"]
    seen = {m.tool_call_id: m.error for m in backend.requests[-1].messages if isinstance(m, ToolMessage)}
    assert seen == {one["toolCallId"]: None, two["toolCallId"]: None, three["toolCallId"]: "cancelled"}
    assert second.outcome == {"type": "success"}
