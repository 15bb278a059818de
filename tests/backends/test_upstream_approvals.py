"""An upstream's approval, answered through the adapter: the gated call's own answer, once (issue 20).

Runs on every framework of the matrix (tests/upstreams/matrix.py) whose agent asks for approval; each names its
gated call in its own way (by toolCallId, through ADK's metadata and confirmation call, or, as
CrewAI's `@human_feedback`, not at all).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from agui import resolved
from upstreams.kit import tool_call_problems
from upstreams.matrix import (
    SERVED,
    Framework,
    Wrapped,
    framework,
    gated,
    interrupts_of,
    said,
    served,
    server_of,
    thread,
    wrap,
    wrapped,
)

from adapter import create_app

# Private on purpose: the model view's placeholder for a missing answer, which must never be stored.
from adapter._thread._conversation import MISSING_RESULT

__all__ = ["framework", "thread", "wrapped"]  # the matrix's fixtures (upstreams.matrix)

pytestmark = pytest.mark.filterwarnings("ignore::langgraph.warnings.LangGraphDeprecatedSinceV10")


def answers(messages: list[dict[str, Any]], call_id: str) -> list[dict[str, Any]]:
    return [m for m in messages if m["role"] == "tool" and m["toolCallId"] == call_id]


async def test_reject_runs_nothing_and_keeps_the_frameworks_own_refusal_once(wrapped: Wrapped, thread: str) -> None:
    asked = await wrapped.ask(thread, "delete the draft")
    (interrupt,) = interrupts_of(asked)
    finished = await wrapped.answer(thread, resolved(interrupt["id"], {"approved": False}))
    stored = await wrapped.adapter.thread(thread)

    call_id = gated(asked)
    assert stored is not None
    (refusal,) = answers(stored["messages"], call_id)
    assert refusal["content"] != MISSING_RESULT  # the framework's words, not ours
    assert "deleted" not in said(refusal["content"])
    streamed = [e["content"] for e in finished if e["type"] == "TOOL_CALL_RESULT" and e["toolCallId"] == call_id]
    assert streamed in ([], [refusal["content"]])  # some frameworks tell a refusal only in their next message
    assert tool_call_problems(stored["messages"]) == []
    assert wrapped.framework.deleted == []


@pytest.fixture(params=[p for p in SERVED if p.values[0] in ("adk", "crewai")])
def refunding(request: pytest.FixtureRequest) -> Framework:
    return served(request.param, server_of(request, request.param))


@pytest.fixture
async def wrapped_refunding(refunding: Framework) -> AsyncIterator[Wrapped]:
    each = wrap(refunding)
    yield each
    await each.adapter.aclose()


async def test_the_thread_api_shows_an_approved_refunds_real_result_once(
    wrapped_refunding: Wrapped, thread: str
) -> None:
    asked = await wrapped_refunding.ask(thread, "refund order 42")
    (interrupt,) = interrupts_of(asked)
    await wrapped_refunding.answer(thread, resolved(interrupt["id"], {"approved": True}))
    transport = httpx.ASGITransport(create_app(wrapped_refunding.adapter))
    async with httpx.AsyncClient(transport=transport, base_url="http://adapter") as client:
        shown = (await client.get(f"/threads/{thread}")).json()

    assert [said(m["content"]) for m in answers(shown["messages"], gated(asked, "refund_order"))] == [
        "refunded order 42"
    ]
    assert tool_call_problems(shown["messages"]) == []
    assert wrapped_refunding.framework.deleted == ["refund 42"]


async def test_two_approvals_in_a_row_on_one_thread_each_run_once(wrapped: Wrapped, thread: str) -> None:
    """ag-ui-crewai names every interrupt of a thread by the thread's id: a second one is still a new question."""
    for _ in range(2):
        (interrupt,) = interrupts_of(await wrapped.ask(thread, "delete the draft"))
        finished = await wrapped.answer(thread, resolved(interrupt["id"], {"approved": True}))
        assert finished[-1]["type"] == "RUN_FINISHED", finished[-1]

    assert wrapped.framework.deleted == ["/tmp/draft.txt"] * 2
