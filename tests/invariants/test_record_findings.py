"""Engine bugs the record machine (record_machine.py) found, each reduced to one example and fixed (issue 27).

- a second answer through a branch that left the call out: checked against the whole loaded record;
- a call id a branch left out, reused by the upstream: `Step.called` holds the record's calls, not the branch's;
- a message named after one older than a tail view: looked up in the store's index, it gets an id of its own;
- a message named after a provisional answer the engine sent: that id is taken too;
- an interrupt naming a call the thread already answered: refused (BACKEND_ERROR), since its answer could only
  be a second answer, and the stored one would be taken for it.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import httpx
from agui import run_events, run_input, tool_answer, user
from record_world import TailView
from upstreams.scripted import Upstream, result, start, text

from adapter import Adapter, tool
from adapter.backends import AGUIUpstream
from adapter.stores import SQLiteStore


@tool
def lookup() -> str:
    """Look something up."""
    return "found"


def adapter_for(upstream: Upstream, tmp_path: Path, **options: Any) -> tuple[Adapter, httpx.AsyncClient]:
    client = httpx.AsyncClient(transport=httpx.ASGITransport(upstream.app))
    backend = AGUIUpstream("http://upstream/", client=client)
    return Adapter(backend, tools=[lookup], store=SQLiteStore(tmp_path / "t.db"), **options), client


async def test_a_message_named_after_a_provisional_answer_gets_an_id_of_its_own(tmp_path: Path) -> None:
    def asks(body: dict[str, Any]) -> list[dict[str, Any]]:
        ending = {"outcome": {"type": "interrupt", "interrupts": [{"id": "up-int", "reason": "confirmation"}]}}
        found = {"type": "TOOL_CALL_RESULT", "messageId": "r1", "toolCallId": "c1", "content": "found"}
        return [*start("c1", "search"), found, ending]

    def answers(body: dict[str, Any]) -> list[dict[str, Any]]:
        return [
            {"type": "TEXT_MESSAGE_START", "messageId": "r1", "role": "assistant"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "r1", "delta": "Done."},
            {"type": "TEXT_MESSAGE_END", "messageId": "r1"},
        ]

    upstream = Upstream([asks, answers])
    adapter, client = adapter_for(upstream, tmp_path)
    try:
        asked = await run_events(adapter, run_input("t", [user("search")]))
        (interrupt,) = asked[-1]["outcome"]["interrupts"]
        resume = [{"interruptId": interrupt["id"], "status": "resolved", "payload": {"ok": True}}]
        done = await run_events(adapter, run_input("t", [], resume=resume), resumed=True)
        assert done[-1]["type"] == "RUN_FINISHED", done[-1]

        stored = await adapter.thread("t")
        assert stored is not None
        ids = Counter(m["id"] for m in stored["messages"])
        assert max(ids.values()) == 1, stored["messages"]
    finally:
        await adapter.aclose()
        await client.aclose()


def calls_of(messages: list[dict[str, Any]]) -> Counter[str]:
    return Counter(c["id"] for m in messages if m["role"] == "assistant" for c in m.get("toolCalls") or [])


async def test_a_call_id_a_branch_left_out_is_refused_too(tmp_path: Path) -> None:
    def call(parent: str) -> Any:
        return lambda body: [{**event, "parentMessageId": parent} if "parentMessageId" in event else event
                             for event in start("c1", "search")]  # fmt: skip

    upstream = Upstream([lambda body: text("Hello."), call("up-m1"), call("up-m2")])
    adapter, client = adapter_for(upstream, tmp_path, frontend_outcome="pending")
    try:
        await run_events(adapter, run_input("t", [user("hi")]))
        asked = await run_events(adapter, run_input("t", [user("search")]))
        assert asked[-1]["outcome"] == {"type": "success", "pendingToolCallIds": ["c1"]}
        stored = await adapter.thread("t")
        assert stored is not None
        branch = [*stored["messages"][:2], user("search again")]  # the first exchange only: c1 is left out

        again = await run_events(adapter, run_input("t", branch))

        after = await adapter.thread("t")
        assert after is not None
        assert calls_of(after["messages"]) == {"c1": 1}, after["messages"]
        assert (again[-1]["type"], again[-1].get("code")) == ("RUN_ERROR", "BACKEND_ERROR")
    finally:
        await adapter.aclose()
        await client.aclose()


async def test_a_message_named_after_a_message_older_than_the_tail_gets_an_id_of_its_own(tmp_path: Path) -> None:
    def named(message_id: str) -> Any:
        return lambda body: [
            {"type": "TEXT_MESSAGE_START", "messageId": message_id, "role": "assistant"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": message_id, "delta": "Said."},
            {"type": "TEXT_MESSAGE_END", "messageId": message_id},
        ]

    upstream = Upstream([named("m1"), named("m2"), named("m1")])
    adapter, client = adapter_for(upstream, tmp_path, history="server", history_view=TailView(1))
    try:
        for words in ("one", "two", "three"):
            done = await run_events(adapter, run_input("t", [user(words)]))
            assert done[-1]["type"] == "RUN_FINISHED", done[-1]

        stored = await adapter.thread("t")
        assert stored is not None
        ids = Counter(m["id"] for m in stored["messages"])
        assert max(ids.values()) == 1, stored["messages"]
    finally:
        await adapter.aclose()
        await client.aclose()


async def test_an_interrupt_that_names_a_call_the_thread_answered_is_refused(tmp_path: Path) -> None:
    named = {"outcome": {"type": "interrupt", "interrupts": [{"id": "up-int", "reason": "ok", "toolCallId": "c1"}]}}
    upstream = Upstream(
        [
            lambda body: start("c1", "search"),
            lambda body: [*start("c1", "search"), *start("c5", "search"), result("c5", "found"), named],
            lambda body: start("c9", "search"),
        ]
    )
    adapter, client = adapter_for(upstream, tmp_path, frontend_outcome="pending")
    try:
        await run_events(adapter, run_input("t", [user("search")]))
        stored = await adapter.thread("t")
        assert stored is not None
        asked = await run_events(adapter, run_input("t", [*stored["messages"], tool_answer("c1", "answered")]))
        assert (asked[-1]["type"], asked[-1].get("code")) == ("RUN_ERROR", "BACKEND_ERROR"), asked[-1]
        assert await adapter.thread("t") == stored  # nothing of the refused run is stored, no turn waits

        # run_events holds the stream to the baseline checks: no result for a call this run never started
        after = await run_events(adapter, run_input("t", [*stored["messages"], user("and now")]))
        assert after[-1]["type"] == "RUN_FINISHED"
    finally:
        await adapter.aclose()
        await client.aclose()


async def test_a_second_answer_in_a_branch_that_left_the_call_out_is_refused(tmp_path: Path) -> None:
    upstream = Upstream(
        [lambda body: [*start("c1", "search"), result("c1", "found")], lambda body: text("ok"), lambda body: text("ok")]
    )
    adapter, client = adapter_for(upstream, tmp_path)
    try:
        await run_events(adapter, run_input("t", [user("search")]))
        said = user("next")
        await run_events(adapter, run_input("t", [said]))  # only its new message: the thread continues
        stored = await adapter.thread("t")
        assert stored is not None
        branch = [said, stored["messages"][-1]]  # the client kept the last exchange only

        again = await run_events(adapter, run_input("t", [*branch, tool_answer("c1", "a second answer")]))

        after = await adapter.thread("t")
        assert after is not None
        answers = [m["content"] for m in after["messages"] if m["role"] == "tool"]
        assert answers == ["found"], answers
        assert (again[-1]["type"], again[-1].get("code")) == ("RUN_ERROR", "RESUME_DUPLICATE")
    finally:
        await adapter.aclose()
        await client.aclose()
