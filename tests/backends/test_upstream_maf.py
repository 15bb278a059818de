"""AGUIUpstream in front of Microsoft Agent Framework 1.7 (agent-framework-ag-ui), with a scripted chat client.

Its tool declared `approval_mode="always_require"` waits for approval (transcripts/maf/resume-approve-1-ask.jsonl):
the run streams the refund call and a `confirm_changes` companion call naming it (`function_call_id`), and ends
with an interrupt (`af-call-...`, reason `tool_call`, `toolCallId` the refund call, a `responseSchema`). It wants
a resume entry for that interrupt, `{"approved": true}` or `{"approved": false}` (a ToolMessage alone is refused
with APPROVAL_RESUME_REQUIRED). After it, it streams the refund's result (approved) or tells its refusal only in
its MESSAGES_SNAPSHOT (denied), never restates either call, and never answers `confirm_changes`.

Through the adapter: the interrupt passes as ours; the refund call is answered by the framework; `confirm_changes`
is the framework's to answer and it never does, so it stays open (`pendingToolCallIds`), and nothing invents
its answer.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from agui import Reply, resolved
from upstreams.kit import UpstreamServer
from upstreams.paused import (
    HISTORIES,
    Client,
    adapter_in_front,
    answers,
    call_ids,
    framework_server,
    holders,
    invented,
    needs,
    once_each,
    outcome,
    streamed_results,
)

from adapter import HistoryMode

if TYPE_CHECKING:
    from conftest import Serve

pytestmark = needs("maf")

REFUSAL = "Error: Tool call invocation was rejected by user."
"""What Agent Framework records as a denied call's result."""


@pytest.fixture(scope="module")
def maf() -> Iterator[UpstreamServer]:
    yield from framework_server("maf")


@pytest.fixture(params=HISTORIES)
async def client(request: pytest.FixtureRequest, maf: UpstreamServer, serve: Serve, tmp_path: Path) -> Client:
    maf.clear()
    history: HistoryMode = request.param
    return Client.of(await adapter_in_front(serve, maf.url, tmp_path, history), history)


async def ask(client: Client) -> tuple[Reply, str, str, dict[str, Any]]:
    """Ask for a refund: the reply, the refund call, the confirm_changes call, and the interrupt."""
    asked = await client.say("refund 5 euros please")
    (refund,), (confirm,) = call_ids(asked, "refund"), call_ids(asked, "confirm_changes")
    assert outcome(asked)["type"] == "interrupt"
    (interrupt,) = asked.interrupts
    return asked, refund, confirm, interrupt


async def test_the_approval_waits_with_both_calls_open_and_nothing_answers_them(
    client: Client, maf: UpstreamServer
) -> None:
    asked, refund, confirm, interrupt = await ask(client)
    stored = await client.stored()

    assert interrupt["toolCallId"] == refund
    assert interrupt["id"].startswith("af-call-")
    assert interrupt["responseSchema"]["properties"]["approved"]["type"] == "boolean"
    assert invented(asked.events) == []
    assert streamed_results(asked, refund) == streamed_results(asked, confirm) == []
    assert invented(stored["messages"]) == []
    assert [holders(stored["messages"], call) for call in (refund, confirm)] == [1, 1]
    assert answers(stored["messages"], refund) == answers(stored["messages"], confirm) == []
    assert [i["id"] for i in stored["interrupts"]] == [interrupt["id"]]
    assert maf.deleted() == []


@pytest.mark.parametrize(
    ("approved", "refunds", "result"),
    [pytest.param(True, ["refund 5"], "refunded 5 euros", id="approve"), pytest.param(False, [], REFUSAL, id="deny")],
)
async def test_the_answer_reaches_maf_and_confirm_changes_stays_open(
    client: Client, maf: UpstreamServer, approved: bool, refunds: list[str], result: str
) -> None:
    _, refund, confirm, interrupt = await ask(client)
    answered = await client.resume(resolved(interrupt["id"], {"approved": approved}))
    stored = await client.stored()

    assert maf.deleted() == refunds
    assert f"Done: refund said {result}" in answered.text
    assert invented(answered.events) == []
    assert invented(stored["messages"]) == []
    assert outcome(answered) == {"type": "success", "pendingToolCallIds": [confirm]}
    assert streamed_results(answered, confirm) == []
    assert once_each(stored["messages"]) == {}
    assert answers(stored["messages"], refund) == [result]
    assert answers(stored["messages"], confirm) == []
    assert stored["interrupts"] == []


async def test_answering_confirm_changes_afterwards_runs_nothing_again(client: Client, maf: UpstreamServer) -> None:
    _, refund, confirm, interrupt = await ask(client)
    assert outcome(await client.resume(resolved(interrupt["id"], {"approved": True})))["type"] == "success"
    confirmed = await client.answer(confirm, {"accepted": True})
    later = await client.say("thanks")
    stored = await client.stored()

    assert outcome(confirmed)["type"] == "success"
    assert outcome(later) == {"type": "success"}
    assert later.text == "Hello from Agent Framework."
    assert maf.deleted() == ["refund 5"]
    assert invented([*confirmed.events, *later.events, *stored["messages"]]) == []
    assert once_each(stored["messages"]) == {}
    assert answers(stored["messages"], refund) == ["refunded 5 euros"]
    assert len(answers(stored["messages"], confirm)) == 1
