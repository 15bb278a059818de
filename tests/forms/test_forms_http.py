"""Forms over real HTTP: seed 000's two flows, plain text, refusals, idempotency and page restore."""

from __future__ import annotations

import json
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ag_ui.core import ActivityMessage, ToolMessage
from agui import Thread, cancelled, json_content, resolved
from formkit import BOOKING, DETAILS, TICKET_REQUEST, arguments, cards, spied

from adapter import Adapter
from adapter.backends import Call, Rule, ScriptedBackend
from examples import demo_agent
from examples.meeting_room import MEETING_FORM, RULES, reserve_meeting_room
from examples.support_ticket import RULES as TICKET_RULES
from examples.support_ticket import SUPPORT_TICKET_FORM, create_support_ticket

if TYPE_CHECKING:
    from agui import Client, Reply
    from conftest import Serve

BOGUS_KEY = Rule(r"expense claim", steps=[[Call("request_user_input", {"formKey": "expense_claim"})]])


async def meeting_room(serve: Serve, **options: Any) -> tuple[Client, ScriptedBackend, list[dict[str, Any]]]:
    """Serve the meeting-room example with a spied `reserve_meeting_room`."""
    reserve, runs = spied(reserve_meeting_room)
    backend = ScriptedBackend([*RULES, BOGUS_KEY])
    served = await serve(Adapter(backend, tools=[reserve], forms=[MEETING_FORM], **options))
    return served.client, backend, runs


async def asked_to_book(client: Client) -> tuple[Thread, Reply, dict[str, Any]]:
    thread = client.thread()
    reply = await thread.say("预定会议室")
    (interrupt,) = reply.interrupts
    return thread, reply, interrupt


def submitted(interrupt: dict[str, Any], payload: Any, **metadata: str) -> dict[str, Any]:
    return {**resolved(interrupt["id"], payload), "metadata": metadata}


async def stored_card(client: Client, thread: Thread) -> dict[str, Any]:
    restored = (await client.get(f"/threads/{thread.id}")).json()
    (card,) = cards(restored["messages"])
    return dict(card["content"])


async def test_meeting_room_form_then_the_model_books_the_room(serve: Serve) -> None:
    client, backend, runs = await meeting_room(serve)
    thread, asked, interrupt = await asked_to_book(client)

    (call,) = asked.calls
    (card,) = asked.of("ACTIVITY_SNAPSHOT")
    turn_id = card["content"]["turnId"]
    assert call["toolCallName"] == "request_user_input"
    assert interrupt["reason"] == "input_required"
    assert interrupt["toolCallId"] == call["toolCallId"]
    assert interrupt["responseSchema"] == MEETING_FORM.schema
    assert asked.index("ACTIVITY_SNAPSHOT") < asked.index("RUN_FINISHED")
    assert card["messageId"] == f"{turn_id}:input:{call['toolCallId']}"
    assert card["activityType"] == "agent_form"
    assert card["content"] == {
        "turnId": turn_id,
        "actionId": call["toolCallId"],
        "formKey": "meeting_room_booking",
        "schema": MEETING_FORM.schema,
        "status": "PENDING",
        "actions": ["SUBMIT"],
        "version": 1,
    }
    assert runs == []

    done = await thread.resume(submitted(interrupt, BOOKING, submittedBy="user-1001"))

    (moved,) = done.of("ACTIVITY_SNAPSHOT")
    assert moved["messageId"] == card["messageId"]
    assert moved["content"]["status"] == "SUBMITTED"
    assert moved["content"]["submittedValues"] == BOOKING
    assert moved["content"]["submittedBy"] == "user-1001"
    assert datetime.fromisoformat(moved["content"]["submittedAt"]).tzinfo is not None
    assert (moved["content"]["actions"], moved["content"]["version"]) == ([], 2)
    form_result = json.loads(done.results()[call["toolCallId"]]["content"])
    assert form_result == {"status": "submitted", "formKey": "meeting_room_booking", "data": BOOKING}
    (booking,) = done.calls
    assert booking["toolCallName"] == "reserve_meeting_room"
    seen = {m.tool_call_id: m.content for m in backend.requests[1].messages if isinstance(m, ToolMessage)}
    assert json_content(seen[call["toolCallId"]]) == form_result
    assert [arguments(run) for run in runs] == [BOOKING]
    reservation = json.loads(done.results()[booking["toolCallId"]]["content"])
    assert reservation["topic"] == "Q3 planning"
    assert reservation["room"] == "Everest (12 seats)"
    assert reservation["reservationId"] in done.text
    assert done.outcome == {"type": "success"}


async def test_support_ticket_tool_asks_for_a_form_and_runs_again_with_it(serve: Serve) -> None:
    ticket, runs = spied(create_support_ticket)
    served = await serve(Adapter(ScriptedBackend(TICKET_RULES), tools=[ticket]))
    thread = served.client.thread()

    asked = await thread.say(TICKET_REQUEST)

    (call,) = asked.calls
    (interrupt,) = asked.interrupts
    (card,) = asked.of("ACTIVITY_SNAPSHOT")
    assert call["toolCallName"] == "create_support_ticket"
    assert interrupt["reason"] == "input_required"
    assert interrupt["toolCallId"] == call["toolCallId"]
    assert interrupt["responseSchema"] == SUPPORT_TICKET_FORM.schema
    assert asked.index("ACTIVITY_SNAPSHOT") < asked.index("RUN_FINISHED")
    assert card["content"]["formKey"] == "support_ticket_details"
    assert card["content"]["actionId"] == call["toolCallId"]
    assert card["content"]["status"] == "PENDING"
    assert asked.results() == {}

    done = await thread.resume(submitted(interrupt, DETAILS, submittedBy="user-1001", requestId="request-789"))

    (moved,) = done.of("ACTIVITY_SNAPSHOT")
    assert (moved["content"]["status"], moved["content"]["submittedValues"]) == ("SUBMITTED", DETAILS)
    assert moved["content"]["submittedBy"] == "user-1001"
    created = json.loads(done.results()[call["toolCallId"]]["content"])
    assert created == {
        "ticketId": created["ticketId"],
        "title": "Login failure",
        "priority": "HIGH",
        "affectedSystem": "统一登录系统",
        "impactScope": "ALL_USERS",
    }
    assert done.calls == []
    first, replay = runs
    assert [arguments(first), arguments(replay)] == [{"title": "Login failure", "priority": "HIGH"}] * 2
    assert (first["ctx"].submitted_form_data, replay["ctx"].submitted_form_data) == (None, DETAILS)
    assert first["ctx"].idempotency_key == replay["ctx"].idempotency_key
    assert created["ticketId"] == f"INC-{replay['ctx'].idempotency_key[:8]}"
    assert created["ticketId"] in done.text
    assert done.outcome == {"type": "success"}


async def test_plain_text_input_reaches_the_waiting_tool(serve: Serve) -> None:
    track, runs = spied(demo_agent.track_parcel)
    served = await serve(Adapter(ScriptedBackend(demo_agent.RULES), tools=[track]))
    thread = served.client.thread()

    asked = await thread.say("track my parcel")

    (interrupt,) = asked.interrupts
    assert interrupt["reason"] == "input_required"
    assert interrupt["responseSchema"] == {"type": "string"}
    assert interrupt["message"].startswith("请提供订单号")
    assert asked.of("ACTIVITY_SNAPSHOT") == []
    refused = await thread.resume(resolved(interrupt["id"], {"order": "O-1001"}))
    assert refused.error["code"] == "RESUME_PAYLOAD_INVALID"

    done = await thread.resume(resolved(interrupt["id"], "订单号是 O-1001"))

    assert [run["ctx"].answer for run in runs] == [None, "订单号是 O-1001"]
    parcel = json.loads(done.results()[interrupt["toolCallId"]]["content"])
    assert parcel["orderId"] == "O-1001"
    assert done.outcome == {"type": "success"}


async def test_an_unregistered_form_key_is_the_models_error_and_the_run_goes_on(serve: Serve) -> None:
    client, backend, _ = await meeting_room(serve)

    reply = await client.thread().say("file an expense claim")

    (call,) = reply.calls
    answer = next(m for m in backend.requests[-1].messages if isinstance(m, ToolMessage))
    assert answer.tool_call_id == call["toolCallId"]
    assert answer.error == "unknown_form"
    assert "expense_claim" in answer.content
    assert "Valid form keys: meeting_room_booking" in answer.content
    assert reply.of("ACTIVITY_SNAPSHOT") == []
    assert reply.outcome == {"type": "success"}
    assert "request_user_input was not completed (unknown_form)" in reply.text


async def test_an_invalid_submission_names_its_pointers_and_the_form_stays_open(serve: Serve) -> None:
    client, _, runs = await meeting_room(serve)
    thread, _, interrupt = await asked_to_book(client)

    refused = await thread.resume(submitted(interrupt, {"topic": "", "time": "tomorrow", "attendees": 0}))

    assert refused.types == ["RUN_STARTED", "RUN_ERROR"]
    assert refused.error["code"] == "RESUME_PAYLOAD_INVALID"
    for pointer in ("/topic", "/time", "/attendees"):
        assert f"{pointer}: " in refused.error["message"]
    assert (await stored_card(client, thread))["status"] == "PENDING"
    assert runs == []
    done = await thread.resume(submitted(interrupt, BOOKING))
    assert done.outcome == {"type": "success"}
    assert [arguments(run) for run in runs] == [BOOKING]


async def test_a_cancelled_form_becomes_a_cancelled_result_and_nothing_is_booked(serve: Serve) -> None:
    client, _, runs = await meeting_room(serve)
    thread, asked, interrupt = await asked_to_book(client)

    done = await thread.resume(cancelled(interrupt["id"]))

    (moved,) = done.of("ACTIVITY_SNAPSHOT")
    assert moved["messageId"] == asked.of("ACTIVITY_SNAPSHOT")[0]["messageId"]
    assert (moved["content"]["status"], moved["content"]["actions"]) == ("CANCELLED", [])
    assert "submittedValues" not in moved["content"]
    result = json.loads(done.results()[interrupt["toolCallId"]]["content"])
    assert result == {"status": "cancelled", "formKey": "meeting_room_booking"}
    assert done.calls == []
    assert runs == []
    assert done.text == "OK, no room was booked."
    assert (await stored_card(client, thread))["status"] == "CANCELLED"


async def test_a_wrong_action_id_is_refused_and_the_form_stays_open(serve: Serve) -> None:
    client, _, runs = await meeting_room(serve)
    thread, _, interrupt = await asked_to_book(client)

    refused = await thread.resume(submitted(interrupt, BOOKING, actionId="call_someone_else"))

    assert refused.types == ["RUN_STARTED", "RUN_ERROR"]
    assert refused.error["code"] == "RESUME_UNKNOWN_INTERRUPT"
    assert (await stored_card(client, thread))["status"] == "PENDING"
    done = await thread.resume(submitted(interrupt, BOOKING, actionId=interrupt["toolCallId"]))
    assert done.outcome == {"type": "success"}
    assert len(runs) == 1


async def test_the_same_request_id_twice_is_applied_once(serve: Serve) -> None:
    client, _, runs = await meeting_room(serve)
    thread, _, interrupt = await asked_to_book(client)
    first = await thread.resume(submitted(interrupt, BOOKING, requestId="request-789"))

    again = await thread.resume(submitted(interrupt, {**BOOKING, "attendees": 2}, requestId="request-789"))

    assert again.types == ["RUN_STARTED", "RUN_FINISHED"]
    assert again.outcome == first.outcome == {"type": "success"}
    assert [arguments(run) for run in runs] == [BOOKING]
    card = await stored_card(client, thread)
    assert (card["submittedValues"], card["version"]) == (BOOKING, 2)


async def test_a_second_answer_cannot_move_a_submitted_card(serve: Serve) -> None:
    client, _, runs = await meeting_room(serve)
    thread, _, interrupt = await asked_to_book(client)
    await thread.resume(submitted(interrupt, BOOKING, submittedBy="user-1001"))

    changed = await thread.resume(submitted(interrupt, {**BOOKING, "attendees": 2}, submittedBy="user-2002"))
    withdrawn = await thread.resume(cancelled(interrupt["id"]))

    assert changed.error["code"] == withdrawn.error["code"] == "RESUME_CONFLICT"
    card = await stored_card(client, thread)
    assert (card["status"], card["submittedBy"], card["version"]) == ("SUBMITTED", "user-1001", 2)
    assert len(runs) == 1


async def test_a_page_restores_itself_after_a_reload(serve: Serve) -> None:
    client, _, _ = await meeting_room(serve)
    thread, asked, interrupt = await asked_to_book(client)

    restored = await client.get(f"/threads/{thread.id}")

    assert restored.status_code == 200
    body = restored.json()
    assert body["threadId"] == thread.id
    assert body["interrupts"] == asked.interrupts
    assert [m["id"] for m in body["messages"]] == [m["id"] for m in asked.snapshot]
    (card,) = cards(body["messages"])
    assert card["activityType"] == "agent_form"
    assert card["content"] == asked.of("ACTIVITY_SNAPSHOT")[0]["content"]
    reloaded = client.thread(thread_id=thread.id)
    reloaded.messages = body["messages"]
    (waiting,) = body["interrupts"]

    await reloaded.resume(submitted(waiting, BOOKING, submittedBy="user-1001"))

    after = (await client.get(f"/threads/{thread.id}")).json()
    assert after["interrupts"] == []
    (card,) = cards(after["messages"])
    assert card["content"]["status"] == "SUBMITTED"
    assert card["content"]["submittedValues"] == BOOKING
    assert (await client.get("/threads/thread-never-seen")).status_code == 404


async def test_activity_messages_a_client_sends_back_never_reach_the_model(serve: Serve) -> None:
    client, backend, _ = await meeting_room(serve)
    thread, _, interrupt = await asked_to_book(client)
    await thread.resume(submitted(interrupt, BOOKING))
    assert cards(thread.messages)

    again = await thread.say("book a meeting room")

    assert again.outcome["type"] == "interrupt"
    assert all(not isinstance(m, ActivityMessage) for r in backend.requests for m in r.messages)
    assert [card["content"]["status"] for card in cards(again.snapshot)] == ["SUBMITTED", "PENDING"]


async def test_a_stale_card_from_the_client_never_rolls_the_stored_status_back(serve: Serve) -> None:
    client, _, _ = await meeting_room(serve)
    thread, _, interrupt = await asked_to_book(client)
    await thread.resume(submitted(interrupt, BOOKING))
    (stale,) = cards(thread.messages)
    stale["content"] = {**stale["content"], "status": "PENDING", "actions": ["SUBMIT"], "version": 1}

    await thread.say("hello")

    card = await stored_card(client, thread)
    assert (card["status"], card["version"], card["submittedValues"]) == ("SUBMITTED", 2, BOOKING)
