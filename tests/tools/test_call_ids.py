"""One call id is one call, and a call its owner left open stays open (issue 27).

An upstream (or any backend) may not open a second call under an id the thread or the step already uses:
that is how it would answer a person's call with its own result, or run a tool twice under one
idempotency key. Such a run ends with BACKEND_ERROR before anything is stored. A call the upstream left
without a result is never answered by the adapter: it reaches the client as a pending call (or an
interrupt), and the client's answer goes back to the upstream. An upstream that continues a paused call
may stream it again: the record still holds one call with one answer.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from agui import new_id, resolved, run_events, run_input, tool_answer, user
from upstreams.kit import tool_call_problems
from upstreams.scripted import Upstream, interrupted, result, start, text

from adapter import Adapter, ToolContext, tool
from adapter.backends import AGUIUpstream, Backend, BackendItem, ModelRequest, TextDelta, ToolCall
from adapter.stores import SQLiteStore


@dataclass
class Bank:
    """A side-effecting tool that needs approval, and what it really did."""

    paid: list[tuple[int, str | None]] = field(default_factory=list)

    @property
    def pay(self) -> Any:
        @tool(requires_approval=True)
        def pay(amount: int, ctx: ToolContext) -> str:
            """Pay an amount."""
            self.paid.append((amount, ctx.idempotency_key))
            return f"paid {amount}"

        return pay


@pytest.fixture
def bank() -> Bank:
    return Bank()


def adapter_for(upstream: Upstream, tmp_path: Any, **options: Any) -> Adapter:
    client = httpx.AsyncClient(transport=httpx.ASGITransport(upstream.app))
    return Adapter(
        AGUIUpstream("http://upstream/", client=client), store=SQLiteStore(tmp_path / "threads.db"), **options
    )


async def stored_messages(adapter: Adapter, thread: str) -> list[dict[str, Any]]:
    stored = await adapter.thread(thread)
    return list(stored["messages"]) if stored else []


# A call id reused: the upstream can never answer the person's call


async def test_a_call_id_reused_as_the_upstreams_own_tool_is_a_backend_error_and_nothing_is_stored(
    bank: Bank, tmp_path: Any
) -> None:
    upstream = Upstream(
        [lambda body: [*start("c1", "pay", '{"amount": 5}'), *start("c1", "own"), result("c1", "paid 5 BY UPSTREAM")]]
    )
    adapter, thread = adapter_for(upstream, tmp_path, tools=[bank.pay]), new_id("thread")

    events = await run_events(adapter, run_input(thread, [user("pay 5")]))

    assert (events[-1]["type"], events[-1]["code"]) == ("RUN_ERROR", "BACKEND_ERROR")
    assert "c1" in events[-1]["message"]
    assert (await adapter.thread(thread) or {}).get("messages") == []  # stored as its first run starts: empty
    assert [e for e in events if e["type"] == "TOOL_CALL_RESULT"] == []


async def test_a_reused_call_id_with_the_upstreams_interrupt_keeps_no_provisional_result(
    bank: Bank, tmp_path: Any
) -> None:
    upstream = Upstream(
        [
            lambda body: [
                *start("c1", "pay", '{"amount": 5}'),
                *start("c1", "own"),
                result("c1", "paid 5 BY UPSTREAM"),
                interrupted("up-int", "c1"),
            ]
        ]
    )
    adapter, thread = adapter_for(upstream, tmp_path, tools=[bank.pay]), new_id("thread")

    events = await run_events(adapter, run_input(thread, [user("pay 5")]))

    assert (events[-1]["type"], events[-1]["code"]) == ("RUN_ERROR", "BACKEND_ERROR")
    assert (await adapter.thread(thread) or {}).get("messages") == []


async def test_a_call_under_an_answered_calls_id_is_refused_and_the_tool_runs_once(bank: Bank, tmp_path: Any) -> None:
    upstream = Upstream(
        [
            lambda body: start("c1", "pay", '{"amount": 5}'),
            lambda body: text("Paid."),
            lambda body: start("c1", "pay", '{"amount": 5}'),
        ]
    )
    adapter, thread = adapter_for(upstream, tmp_path, tools=[bank.pay]), new_id("thread")
    asked = await run_events(adapter, run_input(thread, [user("pay 5")]))
    (interrupt,) = asked[-1]["outcome"]["interrupts"]
    await run_events(
        adapter, run_input(thread, [], resume=[resolved(interrupt["id"], {"approved": True})]), resumed=True
    )
    before = await stored_messages(adapter, thread)

    again = await run_events(adapter, run_input(thread, [*before, user("pay 5 again")]))

    assert (again[-1]["type"], again[-1]["code"]) == ("RUN_ERROR", "BACKEND_ERROR")
    assert len(bank.paid) == 1
    assert await stored_messages(adapter, thread) == before


class ReusingBackend(Backend):
    """A backend of any kind (no upstream reader in between) that opens a call under the previous turn's id."""

    def __init__(self) -> None:
        self.turns = 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[BackendItem]:
        self.turns += 1
        if self.turns == 1:
            yield ToolCall("same-id", "lookup", "{}")
        elif self.turns == 3:
            yield ToolCall("same-id", "lookup", "{}")


async def test_the_rule_holds_for_any_backend_not_only_the_upstream(tmp_path: Any) -> None:
    looked: list[str] = []

    @tool
    def lookup(ctx: ToolContext) -> str:
        """Look something up."""
        looked.append(ctx.tool_call_id)
        return "found"

    adapter = Adapter(ReusingBackend(), tools=[lookup], store=SQLiteStore(tmp_path / "t.db"))
    thread = new_id("thread")
    first = await run_events(adapter, run_input(thread, [user("look")]))
    assert first[-1]["type"] == "RUN_FINISHED"
    before = await stored_messages(adapter, thread)

    second = await run_events(adapter, run_input(thread, [*before, user("look again")]))

    assert (second[-1]["type"], second[-1]["code"]) == ("RUN_ERROR", "BACKEND_ERROR")
    assert looked == ["same-id"]
    assert await stored_messages(adapter, thread) == before


# A call the upstream left open stays open


def paused_refund(body: dict[str, Any]) -> list[dict[str, Any]]:
    """As Agno's `requires_confirmation`: the call, and no result and no interrupt."""
    return [*text("I need your confirmation."), *start("r1", "refund", '{"amount": 5}')]


@dataclass
class Continuing:
    """The upstream's next run: it restates its call, then runs it if the client's answer approves."""

    refunds: list[int] = field(default_factory=list)

    def __call__(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        answers = [m for m in body["messages"] if m["role"] == "tool" and m["toolCallId"] == "r1"]
        assert len(answers) == 1, answers
        approved = json.loads(answers[0]["content"]).get("confirmed") is True
        if approved:
            self.refunds.append(5)
        said = "refunded 5" if approved else "refund cancelled"
        return [*start("r1", "refund", '{"amount": 5}'), result("r1", said), *text(said)]


@pytest.mark.parametrize("history", ["client", "server"])
@pytest.mark.parametrize("confirmed", [True, False])
async def test_an_open_call_reaches_the_client_and_its_answer_reaches_the_upstream(
    tmp_path: Any, history: str, confirmed: bool
) -> None:
    continuing = Continuing()
    upstream = Upstream([paused_refund, continuing])
    adapter = adapter_for(upstream, tmp_path, history=history, frontend_outcome="pending")
    thread = new_id("thread")

    asked = await run_events(adapter, run_input(thread, [user("refund order 42")]))
    assert asked[-1]["outcome"] == {"type": "success", "pendingToolCallIds": ["r1"]}
    assert [e for e in asked if e["type"] == "TOOL_CALL_RESULT"] == []
    stored = await stored_messages(adapter, thread)
    assert [m for m in stored if m["role"] == "tool"] == []

    answer = tool_answer("r1", json.dumps({"confirmed": confirmed}))
    sent = [*stored, answer] if history == "client" else [answer]
    answered = await run_events(adapter, run_input(thread, sent))

    assert answered[-1]["outcome"] == {"type": "success"}
    assert continuing.refunds == ([5] if confirmed else [])
    final = await stored_messages(adapter, thread)
    assert tool_call_problems(final) == []
    assert [m["content"] for m in final if m["role"] == "tool"] == [answer["content"]]  # one call, one answer
    assert [m["id"] for m in upstream.bodies[1]["messages"] if m["role"] == "tool"] == [answer["id"]]


async def test_with_interrupts_an_open_call_is_asked_for_and_the_resume_becomes_its_answer(tmp_path: Any) -> None:
    continuing = Continuing()
    upstream = Upstream([paused_refund, continuing])
    adapter, thread = adapter_for(upstream, tmp_path, frontend_outcome="interrupt"), new_id("thread")

    asked = await run_events(adapter, run_input(thread, [user("refund order 42")]))
    (interrupt,) = asked[-1]["outcome"]["interrupts"]
    assert interrupt["toolCallId"] == "r1"
    answered = await run_events(
        adapter, run_input(thread, [], resume=[resolved(interrupt["id"], {"confirmed": True})]), resumed=True
    )

    assert answered[-1]["outcome"] == {"type": "success"}
    assert continuing.refunds == [5]
    final = await stored_messages(adapter, thread)
    assert tool_call_problems(final) == []
    assert [json.loads(m["content"]) for m in final if m["role"] == "tool"] == [{"confirmed": True}]


class OnCue(Backend):
    """Calls `lookup` as `same-id` whenever the last message asks to look; otherwise says "ok"."""

    async def stream(self, request: ModelRequest) -> AsyncIterator[BackendItem]:
        if "look" in str(request.messages[-1].content):
            yield ToolCall("same-id", "lookup", "{}")
        else:
            yield TextDelta("ok")


class TailView:
    """A history view that needs only the thread's last two stored messages."""

    tail = 2

    def __call__(self, history: list[Any]) -> list[Any]:
        return history[-self.tail :]


async def test_with_a_tail_view_a_call_id_older_than_the_tail_is_refused_too(tmp_path: Any) -> None:
    looked: list[str] = []

    @tool
    def lookup(ctx: ToolContext) -> str:
        """Look something up."""
        looked.append(ctx.tool_call_id)
        return "found"

    backend = OnCue()
    adapter = Adapter(
        backend, tools=[lookup], store=SQLiteStore(tmp_path / "t.db"), history="server", history_view=TailView()
    )
    thread = new_id("thread")
    assert (await run_events(adapter, run_input(thread, [user("look")])))[-1]["type"] == "RUN_FINISHED"
    for turn in range(2):  # the call and its answer fall out of the tail
        noted = await run_events(adapter, run_input(thread, [user(f"note {turn}")]))
        assert noted[-1]["type"] == "RUN_FINISHED"
    before = await stored_messages(adapter, thread)
    assert [m["role"] for m in before[-2:]] == ["user", "assistant"]
    assert len(before) == 8

    again = await run_events(adapter, run_input(thread, [user("look again")]))

    assert (again[-1]["type"], again[-1]["code"]) == ("RUN_ERROR", "BACKEND_ERROR")
    assert looked == ["same-id"]
    assert await stored_messages(adapter, thread) == before


async def test_cancel_turn_is_a_resume_whose_answers_are_all_cancelled(bank: Bank, tmp_path: Any) -> None:
    """Abandoning a turn leaves what a `cancelled` resume leaves: the same answer, and the approval's record."""

    def ask(body: dict[str, Any]) -> list[dict[str, Any]]:
        return start(new_id("c"), "pay", '{"amount": 5}')

    upstream = Upstream([ask, ask, lambda body: text("Not paid.")])
    adapter = adapter_for(upstream, tmp_path, tools=[bank.pay])
    here, there = new_id("thread"), new_id("thread")
    for thread in (here, there):
        await run_events(adapter, run_input(thread, [user("pay 5")]))

    assert await adapter.cancel_turn(here, principal=None) is True
    (interrupt,) = (await adapter.thread(there) or {})["interrupts"]
    await run_events(adapter, run_input(there, [], resume=[{"interruptId": interrupt["id"], "status": "cancelled"}]))

    def left(messages: list[dict[str, Any]]) -> list[tuple[str, Any]]:
        return [
            (m["role"], m["content"] if m["role"] == "tool" else m["content"]["decision"])
            for m in messages
            if m["role"] in ("tool", "activity")
        ]

    cancelled_here = left(await stored_messages(adapter, here))
    assert cancelled_here == left(await stored_messages(adapter, there))
    assert cancelled_here == [("tool", "The user cancelled pay; it was not executed."), ("activity", "cancelled")]
    assert bank.paid == []
    assert upstream.scripts == []
