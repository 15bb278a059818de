"""The demo app (`python -m examples.demo`) serves seed 000's flows next to seed 002's scenarios."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from agui import assert_clean_stream, resolved, run_input, user
from formkit import BOOKING, DETAILS, TICKET_REQUEST, cards

from adapter.client import parse_sse
from examples.demo import build_app
from examples.demo_agent import HELP
from examples.meeting_room import MEETING_FORM
from examples.support_ticket import SUPPORT_TICKET_FORM


def demo(tmp_path: Path) -> httpx.AsyncClient:
    """The demo app in process; ASGITransport buffers each stream, which is all a finite run needs."""
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=build_app(str(tmp_path / "demo.db"))), base_url="http://demo"
    )


async def post(http: httpx.AsyncClient, body: dict[str, Any], *, resumed: bool = False) -> list[dict[str, Any]]:
    response = await http.post("/agui/", json=body)
    assert response.status_code == 200
    return assert_clean_stream(response.content, resumed=resumed)


def outcome(events: list[dict[str, Any]]) -> dict[str, Any]:
    return dict(events[-1]["outcome"])


@pytest.mark.parametrize(
    ("text", "schema", "answer", "has_card", "expect"),
    [
        pytest.param("book a meeting room", MEETING_FORM.schema, BOOKING, True, "Everest", id="meeting-room"),
        pytest.param(TICKET_REQUEST, SUPPORT_TICKET_FORM.schema, DETAILS, True, "统一登录系统", id="support-ticket"),
        pytest.param("track my parcel", {"type": "string"}, "订单号是 O-1001", False, "O-1001", id="plain-text"),
    ],
)
async def test_the_demo_asks_and_continues(
    tmp_path: Path, text: str, schema: dict[str, Any], answer: Any, has_card: bool, expect: str
) -> None:
    async with demo(tmp_path) as http:
        asked = await post(http, run_input("t-demo", [user(text)]))
        (interrupt,) = outcome(asked)["interrupts"]
        waiting = (await http.get("/agui/threads/t-demo")).json()

        done = await post(http, run_input("t-demo", [], resume=[resolved(interrupt["id"], answer)]), resumed=True)
        restored = (await http.get("/agui/threads/t-demo")).json()

    assert (interrupt["reason"], interrupt["responseSchema"]) == ("input_required", schema)
    assert waiting["interrupts"] == [interrupt]
    assert [c["content"]["status"] for c in cards(waiting["messages"])] == (["PENDING"] if has_card else [])
    assert outcome(done) == {"type": "success"}
    assert expect in "".join(e["content"] for e in done if e["type"] == "TOOL_CALL_RESULT")
    assert restored["interrupts"] == []
    assert [c["content"]["status"] for c in cards(restored["messages"])] == (["SUBMITTED"] if has_card else [])


async def test_the_demo_keeps_its_other_scenarios_and_lists_the_new_phrases(tmp_path: Path) -> None:
    async with demo(tmp_path) as http:
        looked_up = await post(http, run_input("t-lookup", [user("look up order A100")]))

    assert outcome(looked_up) == {"type": "success"}
    result = next(e for e in looked_up if e["type"] == "TOOL_CALL_RESULT")
    assert json.loads(result["content"])["orderId"] == "A100"
    for phrase in ("book a meeting room", "create a high priority login incident ticket", "track my parcel"):
        assert phrase in HELP


async def test_the_demo_refuses_a_refund_edited_to_a_negative_amount(tmp_path: Path) -> None:
    async with demo(tmp_path) as http:
        asked = await post(http, run_input("t-refund", [user("refund order A100")]))
        (approval,) = outcome(asked)["interrupts"]
        edited = {"approved": True, "editedArgs": {"order_id": "A100", "amount": -5}}
        refused = await http.post("/agui/", json=run_input("t-refund", [], resume=[resolved(approval["id"], edited)]))
        still = (await http.get("/agui/threads/t-refund")).json()

    error = parse_sse(refused.content).events[-1]
    assert (error["type"], error["code"]) == ("RUN_ERROR", "RESUME_PAYLOAD_INVALID")
    assert "/amount: -5 is less than or equal to the minimum of 0" in error["message"]
    assert still["interrupts"] == [approval]


async def test_the_demo_answers_from_tool_results_in_sentences(tmp_path: Path) -> None:
    async with demo(tmp_path) as http:
        found = await post(http, run_input("t-lookup", [user("look up order B200")]))
        missing = await post(http, run_input("t-lookup-2", [user("look up order Z9")]))

    def said(events: list[dict[str, Any]]) -> str:
        return "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")

    assert said(found) == "Order B200 (monitor, 189.00) is shipped."
    assert said(missing) == "I could not find an order Z9."
