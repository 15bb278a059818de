"""A gated call's real result is never lost, however the upstream's interrupt refers to it (issue 20).

Each hand-made upstream of `upstreams.shapes` names its gated call in another way; the adapter has no
branch for any of them.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from ag_ui.core import Interrupt
from agui import new_id, resolved
from upstreams.kit import tool_call_problems
from upstreams.matrix import Wrapped, in_process, interrupts_of, wrap
from upstreams.shapes import SHAPES, ShapedUpstream

from adapter import create_app
from adapter.backends import gated_call_ids

REFUNDED = '"refunded order 42"'
REFUSED = '"The refund was refused by the user."'


def shaped(shape: str) -> tuple[Wrapped, ShapedUpstream]:
    upstream = ShapedUpstream(shape)
    return wrap(in_process(shape, upstream.app, [])), upstream


def results_for(events: list[dict[str, Any]], call_id: str) -> list[str]:
    return [e["content"] for e in events if e["type"] == "TOOL_CALL_RESULT" and e["toolCallId"] == call_id]


def refund_call(events: list[dict[str, Any]]) -> str:
    call_id: str
    (call_id,) = [e["toolCallId"] for e in events if e.get("toolCallName") == "refund_order"]
    return call_id


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize(("approved", "refunds", "answer"), [(True, ["42"], REFUNDED), (False, [], REFUSED)])
async def test_the_gated_calls_final_result_is_streamed_stored_and_sent_once(
    shape: str, approved: bool, refunds: list[str], answer: str
) -> None:
    wrapped, upstream = shaped(shape)
    thread = new_id("thread")
    asked = await wrapped.ask(thread, "refund order 42")
    (interrupt,) = interrupts_of(asked)
    call_id = refund_call(asked)
    while_open = await wrapped.adapter.thread(thread)
    finished = await wrapped.answer(thread, resolved(interrupt["id"], {"approved": approved}))
    stored = await wrapped.adapter.thread(thread)
    await wrapped.ask(thread, "thanks")

    assert results_for(asked, call_id) == []  # provisional, or none yet: not an answer
    assert while_open is not None
    assert not [m for m in while_open["messages"] if m.get("toolCallId") == call_id]
    assert results_for(finished, call_id) == [answer]
    assert finished[-1]["outcome"] == {"type": "success"}
    assert upstream.refunds == refunds
    assert stored is not None
    assert [m["content"] for m in stored["messages"] if m.get("toolCallId") == call_id] == [answer]
    assert tool_call_problems(stored["messages"]) == []
    resume, thanks = wrapped.link.exchanges[1:]
    held = [*waiting(interrupt), *open_calls(while_open["messages"])]
    assert tool_call_problems(resume.body["messages"], waiting=held) == []
    assert tool_call_problems(thanks.body["messages"]) == []
    sent = [m["content"] for m in thanks.body["messages"] if m.get("toolCallId") == call_id]
    assert sent == [answer]


def waiting(interrupt: dict[str, Any]) -> list[str]:
    """What an interrupt may hold open by name: the call it names and the calls it gates."""
    parsed = Interrupt.model_validate(interrupt)
    return [*([parsed.tool_call_id] if parsed.tool_call_id else []), *gated_call_ids(parsed)]


def open_calls(messages: list[dict[str, Any]]) -> list[str]:
    """The calls a stored thread holds open: made, and not answered (an interrupt that names none holds these)."""
    answered = {m["toolCallId"] for m in messages if m["role"] == "tool"}
    return [
        c["id"]
        for m in messages
        if m["role"] == "assistant"
        for c in m.get("toolCalls") or []
        if c["id"] not in answered
    ]


@pytest.mark.parametrize("shape", SHAPES)
async def test_the_thread_api_shows_the_refunds_real_result_once(shape: str) -> None:
    wrapped, upstream = shaped(shape)
    thread = new_id("thread")
    asked = await wrapped.ask(thread, "refund order 42")
    (interrupt,) = interrupts_of(asked)
    await wrapped.answer(thread, resolved(interrupt["id"], {"approved": True}))
    transport = httpx.ASGITransport(create_app(wrapped.adapter))
    async with httpx.AsyncClient(transport=transport, base_url="http://adapter") as client:
        shown = (await client.get(f"/threads/{thread}")).json()

    answers = [m["content"] for m in shown["messages"] if m.get("toolCallId") == refund_call(asked)]
    assert answers == [REFUNDED]
    assert tool_call_problems(shown["messages"]) == []
    assert upstream.refunds == ["42"]


@pytest.mark.parametrize("shape", ["confirmation_and_metadata", "confirmation"])
async def test_a_confirmation_call_the_upstream_opened_is_answered_once(shape: str) -> None:
    wrapped, _ = shaped(shape)
    thread = new_id("thread")
    (interrupt,) = interrupts_of(await wrapped.ask(thread, "refund order 42"))
    finished = await wrapped.answer(thread, resolved(interrupt["id"], {"approved": True}))
    stored = await wrapped.adapter.thread(thread)

    confirm = interrupt["toolCallId"]
    assert stored is not None
    (told,) = [m for m in stored["messages"] if m.get("toolCallId") == confirm]
    assert results_for(finished, confirm) == [told["content"]]
    # The interrupt named it and the upstream left it open: the person's answer is its answer, never an invented one.
    assert json.loads(told["content"]) == {"approved": True}
