"""AGUIUpstream in front of other frameworks' AG-UI servers, each with a scripted model (issues 15 and 20).

Every case runs against each framework that supports it (the matrix, tests/upstreams/matrix.py): Pydantic AI
and LangGraph in this process, Strands, Google ADK and CrewAI in processes and virtualenvs of their own (see
`<name>_server.py`), each reached through a `Link` that records what we send and can refuse to connect, as a
server that is down does. LlamaIndex, which has no approvals, has tests/backends/test_upstream_llamaindex.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agui import NAVIGATE, cancelled, resolved
from upstreams.kit import tool_call_problems
from upstreams.langgraph_agent import LangGraphUpstream
from upstreams.matrix import (
    APPROVE,
    SERVED,
    Framework,
    Wrapped,
    error_of,
    framework,
    gated,
    held,
    in_process,
    interrupts_of,
    langgraph,
    pydantic_ai,
    said,
    served,
    server_of,
    text_of,
    thread,
    wrap,
    wrapped,
)

from adapter.stores import SQLiteStore

__all__ = ["framework", "thread", "wrapped"]  # the matrix's fixtures (upstreams.matrix)

# ag-ui-langgraph 0.0.47 still calls LangGraph's deprecated get_config_jsonschema; that is its own business.
pytestmark = pytest.mark.filterwarnings("ignore::langgraph.warnings.LangGraphDeprecatedSinceV10")


async def test_a_client_tool_call_becomes_our_interrupt_and_its_answer_reaches_the_agent(
    wrapped: Wrapped, thread: str
) -> None:
    (interrupt,) = interrupts_of(await wrapped.ask(thread, "go to orders", tools=[NAVIGATE]))
    answered = await wrapped.answer(thread, resolved(interrupt["id"], {"opened": "/orders"}), tools=[NAVIGATE])

    assert interrupt["reason"] == "tool_call"
    assert text_of(answered).startswith("Done: navigate said")
    assert "/orders" in text_of(answered)
    assert answered[-1]["outcome"] == {"type": "success"}


async def test_the_agents_own_approval_passes_through_with_its_id_and_schema(wrapped: Wrapped, thread: str) -> None:
    (interrupt,) = interrupts_of(await wrapped.ask(thread, "delete the draft"))

    sent = wrapped.link.exchanges[-1]
    (upstream_interrupt,) = sent.events[-1]["outcome"]["interrupts"]
    assert interrupt["id"] == upstream_interrupt["id"]
    assert interrupt.get("toolCallId") == upstream_interrupt.get("toolCallId")
    if wrapped.framework.answers_schema:
        assert interrupt["responseSchema"]["properties"]["approved"] == {"type": "boolean"}
    assert wrapped.framework.deleted == []


@pytest.mark.parametrize(("answer", "deleted"), [(APPROVE, 1), ({"approved": False}, 0), (None, 0)])
async def test_approve_runs_the_tool_once_and_reject_or_cancel_never(
    wrapped: Wrapped, thread: str, answer: dict[str, Any] | None, deleted: int
) -> None:
    (interrupt,) = interrupts_of(await wrapped.ask(thread, "delete the draft"))
    entry = resolved(interrupt["id"], answer) if answer is not None else cancelled(interrupt["id"])
    finished = await wrapped.answer(thread, entry)

    assert finished[-1]["type"] == "RUN_FINISHED", finished[-1]
    assert wrapped.framework.deleted == ["/tmp/draft.txt"] * deleted
    assert await wrapped.open_interrupts(thread) == []


async def test_a_replayed_resume_runs_nothing(wrapped: Wrapped, thread: str) -> None:
    (interrupt,) = interrupts_of(await wrapped.ask(thread, "delete the draft"))
    entry = resolved(interrupt["id"], APPROVE)
    first = await wrapped.answer(thread, entry)
    sent = len(wrapped.link.exchanges)
    again = await wrapped.answer(thread, entry)

    assert again[-1] == {**first[-1], "runId": again[-1]["runId"]}
    assert len(wrapped.link.exchanges) == sent
    assert wrapped.framework.deleted == ["/tmp/draft.txt"]


async def test_a_restart_between_the_interrupt_and_the_resume_loses_nothing(
    framework: Framework, thread: str, tmp_path: Path
) -> None:
    database = str(tmp_path / "turns.db")
    before = wrap(framework, SQLiteStore(database))
    (interrupt,) = interrupts_of(await before.ask(thread, "delete the draft"))
    await before.adapter.aclose()
    after = wrap(framework, SQLiteStore(database))
    finished = await after.answer(thread, resolved(interrupt["id"], APPROVE))
    await after.adapter.aclose()

    assert finished[-1]["outcome"] == {"type": "success"}
    assert framework.deleted == ["/tmp/draft.txt"]


async def test_a_bad_answer_is_refused_here_and_a_good_one_then_applies(wrapped: Wrapped, thread: str) -> None:
    if not wrapped.framework.answers_schema:
        pytest.skip(f"{wrapped.framework.name}'s interrupt has no responseSchema: no answer is refused here")
    (interrupt,) = interrupts_of(await wrapped.ask(thread, "delete the draft"))
    sent = len(wrapped.link.exchanges)
    refused = await wrapped.answer(thread, resolved(interrupt["id"], {"approved": "yes"}))
    still_open = await wrapped.open_interrupts(thread)
    applied = await wrapped.answer(thread, resolved(interrupt["id"], APPROVE))

    assert error_of(refused) == "RESUME_PAYLOAD_INVALID"
    assert len(wrapped.link.exchanges) == sent + 1  # only the good answer went upstream
    assert [each["id"] for each in still_open] == [interrupt["id"]]
    assert applied[-1]["outcome"] == {"type": "success"}
    assert wrapped.framework.deleted == ["/tmp/draft.txt"]


async def test_an_answer_the_upstream_could_not_take_is_not_spent(wrapped: Wrapped, thread: str) -> None:
    (interrupt,) = interrupts_of(await wrapped.ask(thread, "delete the draft"))
    wrapped.link.down = True
    failed = await wrapped.answer(thread, resolved(interrupt["id"], APPROVE))
    still_open = await wrapped.open_interrupts(thread)
    wrapped.link.down = False
    applied = await wrapped.answer(thread, resolved(interrupt["id"], APPROVE))

    assert error_of(failed) == "UPSTREAM_ERROR"
    assert [each["id"] for each in still_open] == [interrupt["id"]]
    assert applied[-1]["outcome"] == {"type": "success"}
    assert wrapped.framework.deleted == ["/tmp/draft.txt"]


async def test_every_tool_call_the_upstream_sees_is_made_once_and_answered_once(wrapped: Wrapped, thread: str) -> None:
    (navigate,) = interrupts_of(await wrapped.ask(thread, "go to orders", tools=[NAVIGATE]))
    await wrapped.answer(thread, resolved(navigate["id"], {"opened": "/orders"}), tools=[NAVIGATE])
    asked = await wrapped.ask(thread, "delete the draft", tools=[NAVIGATE])
    (approval,) = interrupts_of(asked)
    await wrapped.answer(thread, resolved(approval["id"], APPROVE), tools=[NAVIGATE])
    await wrapped.ask(thread, "thanks", tools=[NAVIGATE])

    for exchange in wrapped.link.exchanges:
        waiting = held(asked) if exchange.body.get("resume") else []
        assert tool_call_problems(exchange.body["messages"], waiting=waiting) == [], exchange.body["messages"]
    for snapshot in wrapped.link.exchanges[-1].snapshots():  # the history an upstream keeps, if it keeps one
        assert tool_call_problems(snapshot) == [], snapshot


async def test_the_approved_tools_result_is_recorded_and_reaches_the_next_turn(wrapped: Wrapped, thread: str) -> None:
    asked = await wrapped.ask(thread, "delete the draft")
    (interrupt,) = interrupts_of(asked)
    finished = await wrapped.answer(thread, resolved(interrupt["id"], APPROVE))
    stored = await wrapped.adapter.thread(thread)
    await wrapped.ask(thread, "thanks")

    streamed = [e["content"] for e in finished if e["type"] == "TOOL_CALL_RESULT" and e["toolCallId"] == gated(asked)]
    assert [said(content) for content in streamed] == ["deleted /tmp/draft.txt"]
    assert stored is not None
    results = [m for m in stored["messages"] if m["role"] == "tool" and m["toolCallId"] == gated(asked)]
    assert [said(m["content"]) for m in results] == ["deleted /tmp/draft.txt"]
    assert tool_call_problems(stored["messages"]) == []
    last_sent = wrapped.link.exchanges[-1].body["messages"]
    sent_results = [m for m in last_sent if m["role"] == "tool" and m["toolCallId"] == gated(asked)]
    assert [said(m["content"]) for m in sent_results] == ["deleted /tmp/draft.txt"]


def langgraph_resuming_by_id() -> Framework:
    agent = LangGraphUpstream(resume_by_id=True)
    return in_process("langgraph_resuming_by_id", agent.app, agent.deleted)


@pytest.mark.parametrize("name", ["pydantic_ai", "langgraph_resuming_by_id", *SERVED[:2]])  # CrewAI: one feedback
async def test_two_parallel_approvals_from_one_step_are_answered_together(
    request: pytest.FixtureRequest, name: str, thread: str
) -> None:
    if name in ("strands", "adk"):  # a CrewAI flow holds one pending feedback at a time
        wrapped = wrap(served(name, server_of(request, name)))
    else:
        wrapped = wrap({"pydantic_ai": pydantic_ai, "langgraph_resuming_by_id": langgraph_resuming_by_id}[name]())
    interrupts = interrupts_of(await wrapped.ask(thread, "delete both"))
    finished = await wrapped.answer(thread, *(resolved(each["id"], APPROVE) for each in interrupts))

    assert len({each["id"] for each in interrupts}) == 2
    assert finished[-1]["outcome"] == {"type": "success"}
    assert sorted(wrapped.framework.deleted) == ["/tmp/a.txt", "/tmp/b.txt"]
    assert await wrapped.open_interrupts(thread) == []


async def test_stock_ag_ui_langgraph_refusing_two_answers_leaves_the_turn_open_and_cancellable(thread: str) -> None:
    """ag-ui-langgraph 0.0.47 cannot resume two parallel interrupts: the answers are not spent, the turn can end.

    LangGraph's graph stays interrupted on calls the record now says were cancelled: its next run interrupts on
    them again, which the record cannot take (one answer per call), so that run is refused, and nothing runs.
    """
    wrapped = wrap(langgraph())
    interrupts = interrupts_of(await wrapped.ask(thread, "delete both"))
    refused = await wrapped.answer(thread, *(resolved(each["id"], APPROVE) for each in interrupts))
    still_open = await wrapped.open_interrupts(thread)
    cancelled_here = await wrapped.adapter.cancel_turn(thread)
    after = await wrapped.ask(thread, "hello")

    assert error_of(refused) == "UPSTREAM_ERROR"
    assert [each["id"] for each in still_open] == [each["id"] for each in interrupts]
    assert cancelled_here is True
    assert (after[-1]["type"], after[-1]["code"]) == ("RUN_ERROR", "BACKEND_ERROR"), after[-1]
    assert "already answered" in after[-1]["message"]
    assert wrapped.framework.deleted == []
