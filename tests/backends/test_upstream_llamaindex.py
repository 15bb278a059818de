"""AGUIUpstream in front of LlamaIndex's AG-UI workflow (llama-index-protocols-ag-ui 0.6.0), with a scripted model.

LlamaIndex has no human-in-the-loop, so the approval cases of `test_upstream_frameworks` do not apply;
each of them that can be asked of a client tool is asked here. It streams calls as TOOL_CALL_CHUNK only
and reports its own tools' results only in MESSAGES_SNAPSHOT.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agui import NAVIGATE, new_id, resolved
from upstreams.kit import tool_call_problems
from upstreams.matrix import Framework, Wrapped, interrupts_of, served, server_of, text_of, wrap, wrapped

from adapter.stores import SQLiteStore

__all__ = ["wrapped"]  # the matrix's fixture (upstreams.matrix), over this module's `framework`

pytestmark = pytest.mark.needs_llamaindex
OPENED = {"opened": "/orders"}


@pytest.fixture
def framework(request: pytest.FixtureRequest) -> Framework:
    return served("llamaindex", server_of(request, "llamaindex"))


async def navigate(wrapped: Wrapped, thread: str) -> dict[str, Any]:
    (interrupt,) = interrupts_of(await wrapped.ask(thread, "go to orders", tools=[NAVIGATE]))
    return interrupt


async def test_a_chunked_client_tool_call_becomes_our_interrupt_and_its_answer_reaches_the_agent(
    wrapped: Wrapped,
) -> None:
    thread = new_id("thread")
    interrupt = await navigate(wrapped, thread)
    answered = await wrapped.answer(thread, resolved(interrupt["id"], OPENED), tools=[NAVIGATE])

    assert interrupt["reason"] == "tool_call"
    assert text_of(answered).startswith("Done: navigate said")
    assert "/orders" in text_of(answered)
    assert answered[-1]["outcome"] == {"type": "success"}


async def test_its_own_tools_result_is_taken_from_its_snapshot_once(wrapped: Wrapped) -> None:
    thread = new_id("thread")
    events = await wrapped.ask(thread, "look up order 42")
    stored = await wrapped.adapter.thread(thread)

    (call_id,) = [e["toolCallId"] for e in events if e["type"] == "TOOL_CALL_START"]
    assert [e["content"] for e in events if e["type"] == "TOOL_CALL_RESULT"] == ["order 42 shipped"]
    assert text_of(events) == "Done: lookup_order said order 42 shipped"
    assert stored is not None
    assert [m["content"] for m in stored["messages"] if m.get("toolCallId") == call_id] == ["order 42 shipped"]
    assert wrapped.framework.deleted == ["42"]


async def test_a_replayed_answer_runs_nothing(wrapped: Wrapped) -> None:
    thread = new_id("thread")
    interrupt = await navigate(wrapped, thread)
    first = await wrapped.answer(thread, resolved(interrupt["id"], OPENED), tools=[NAVIGATE])
    sent = len(wrapped.link.exchanges)
    again = await wrapped.answer(thread, resolved(interrupt["id"], OPENED), tools=[NAVIGATE])

    assert again[-1] == {**first[-1], "runId": again[-1]["runId"]}
    assert len(wrapped.link.exchanges) == sent


async def test_a_restart_between_the_interrupt_and_the_answer_loses_nothing(
    framework: Framework, tmp_path: Path
) -> None:
    thread, database = new_id("thread"), str(tmp_path / "turns.db")
    before = wrap(framework, SQLiteStore(database))
    interrupt = await navigate(before, thread)
    await before.adapter.aclose()
    after = wrap(framework, SQLiteStore(database))
    finished = await after.answer(thread, resolved(interrupt["id"], OPENED), tools=[NAVIGATE])
    await after.adapter.aclose()

    assert finished[-1]["outcome"] == {"type": "success"}
    assert "/orders" in text_of(finished)


async def test_an_answer_kept_while_the_upstream_is_down_reaches_it_once_back(wrapped: Wrapped) -> None:
    thread = new_id("thread")
    interrupt = await navigate(wrapped, thread)
    wrapped.link.down = True
    failed = await wrapped.answer(thread, resolved(interrupt["id"], OPENED), tools=[NAVIGATE])
    wrapped.link.down = False
    stored = await wrapped.adapter.thread(thread)
    later = await wrapped.ask(thread, "go on", tools=[NAVIGATE])

    assert failed[-1]["type"] == "RUN_ERROR"
    assert failed[-1]["code"] == "UPSTREAM_ERROR"
    # our own interrupt's answer is applied and kept
    assert stored is not None
    assert stored["interrupts"] == []
    assert [m["toolCallId"] for m in stored["messages"] if m["role"] == "tool"] == [interrupt["toolCallId"]]
    sent = wrapped.link.exchanges[-1].body["messages"]
    assert [m["toolCallId"] for m in sent if m["role"] == "tool"] == [interrupt["toolCallId"]]
    assert later[-1]["type"] == "RUN_FINISHED"


async def test_every_tool_call_the_upstream_sees_is_made_once_and_answered_once(wrapped: Wrapped) -> None:
    thread = new_id("thread")
    interrupt = await navigate(wrapped, thread)
    await wrapped.answer(thread, resolved(interrupt["id"], OPENED), tools=[NAVIGATE])
    await wrapped.ask(thread, "look up order 42", tools=[NAVIGATE])
    await wrapped.ask(thread, "thanks", tools=[NAVIGATE])

    for exchange in wrapped.link.exchanges:
        assert tool_call_problems(exchange.body["messages"]) == [], exchange.body["messages"]
    for snapshot in wrapped.link.exchanges[-1].snapshots():
        assert tool_call_problems(snapshot) == [], snapshot
