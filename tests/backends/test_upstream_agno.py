"""AGUIUpstream in front of Agno 3.1's AG-UI interface (`agno.os.interfaces.agui`), with a scripted model.

Agno pauses a `requires_confirmation=True` tool by streaming its call and ending the run with a plain
RUN_FINISHED: no interrupt, no result (transcripts/agno/approve-1-ask.jsonl). It wants the answer as the
last message of the next run: a ToolMessage for that call whose content is `{"accepted": true}` (anything
else rejects). On approval it streams the call again, same id, then its TOOL_CALL_RESULT; on a rejection only
its text. The adapter leaves the call open (`pendingToolCallIds`), passes the answer on, and keeps the call
once and its answer at most once.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
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

pytestmark = needs("agno")

APPROVE = {"accepted": True}
DENY = {"accepted": False}


@pytest.fixture(scope="module")
def agno() -> Iterator[UpstreamServer]:
    yield from framework_server("agno")


@pytest.fixture(params=HISTORIES)
async def client(request: pytest.FixtureRequest, agno: UpstreamServer, serve: Serve, tmp_path: Path) -> Client:
    agno.clear()
    history: HistoryMode = request.param
    return Client.of(await adapter_in_front(serve, f"{agno.url}agui", tmp_path, history), history)


async def test_the_paused_refund_stays_open_and_nothing_answers_it(client: Client, agno: UpstreamServer) -> None:
    asked = await client.say("refund 5 euros please")
    stored = await client.stored()

    (refund,) = call_ids(asked, "refund")
    assert invented(asked.events) == []
    assert streamed_results(asked, refund) == []
    assert outcome(asked) == {"type": "success", "pendingToolCallIds": [refund]}
    assert invented(stored["messages"]) == []
    assert holders(stored["messages"], refund) == 1
    assert answers(stored["messages"], refund) == []
    assert agno.deleted() == []


async def test_an_approval_reaches_agno_and_the_refund_runs_once(client: Client, agno: UpstreamServer) -> None:
    (refund,) = call_ids(await client.say("refund 5 euros please"), "refund")
    approved = await client.answer(refund, APPROVE)
    stored = await client.stored()

    assert outcome(approved)["type"] == "success"
    assert "Done: refund said refunded 5 euros" in approved.text
    assert agno.deleted() == ["refund 5"]
    assert invented(approved.events) == []
    assert invented(stored["messages"]) == []
    assert once_each(stored["messages"]) == {}
    assert len(answers(stored["messages"], refund)) == 1


async def test_a_denial_reaches_agno_and_the_refund_never_runs(client: Client, agno: UpstreamServer) -> None:
    (refund,) = call_ids(await client.say("refund 5 euros please"), "refund")
    denied = await client.answer(refund, DENY)
    stored = await client.stored()

    assert outcome(denied)["type"] == "success"
    assert "rejected" in denied.text
    assert agno.deleted() == []
    assert invented(denied.events) == []
    assert invented(stored["messages"]) == []
    assert once_each(stored["messages"]) == {}
    assert len(answers(stored["messages"], refund)) == 1


async def test_after_an_approval_the_thread_goes_on_without_a_second_refund(
    client: Client, agno: UpstreamServer
) -> None:
    (refund,) = call_ids(await client.say("refund 5 euros please"), "refund")
    assert outcome(await client.answer(refund, APPROVE))["type"] == "success"
    later = await client.say("thanks")
    stored = await client.stored()

    assert outcome(later) == {"type": "success"}
    assert later.text == "Hello from Agno."
    assert agno.deleted() == ["refund 5"]
    assert invented(later.events) == []
    assert once_each(stored["messages"]) == {}
