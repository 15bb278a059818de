"""Forms through the Python API: registration, frozen schemas, resume by action id and its audit, cancel_turn, CAS."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from agui import collect
from formkit import BOOKING, DETAILS, TICKET_REQUEST, arguments, cards, interrupt_of, of, say, spied

from adapter import Adapter, ConfigurationError, FormDefinition, UserInputTool
from adapter._run._forms import (  # private on purpose: the card's status moves
    ActivityConflict,
    pending_form,
    transition,
)
from adapter.backends import ScriptedBackend
from adapter.stores import MemoryStore
from examples import meeting_room
from examples.meeting_room import MEETING_FORM, RULES, reserve_meeting_room
from examples.support_ticket import RULES as TICKET_RULES
from examples.support_ticket import create_support_ticket

KEPT = MEETING_FORM.schema["properties"]
RENAMED = FormDefinition(
    "meeting_room_booking",
    "The booking form after a change: `attendees` is now `participants`.",
    {
        "type": "object",
        "properties": {
            "topic": KEPT["topic"],
            "time": KEPT["time"],
            "participants": {"type": "integer", "minimum": 1},
        },
        "required": ["topic", "time", "participants"],
    },
)


def booking_adapter(**options: Any) -> tuple[Adapter, list[dict[str, Any]]]:
    reserve, runs = spied(reserve_meeting_room)
    options.setdefault("forms", [MEETING_FORM])
    return Adapter(ScriptedBackend(RULES), tools=[reserve], **options), runs


def ticket_adapter(**options: Any) -> tuple[Adapter, list[dict[str, Any]]]:
    ticket, runs = spied(create_support_ticket)
    return Adapter(ScriptedBackend(TICKET_RULES), tools=[ticket], **options), runs


def entry(action_id: str, payload: Any = None, *, status: str = "resolved") -> dict[str, Any]:
    return {"actionId": action_id, "status": status, "payload": payload}


@pytest.mark.parametrize(
    ("schema", "problem"),
    [
        pytest.param({"type": "object", "properties": {"a": {"type": "strin"}}}, "metaschema", id="not-a-schema"),
        pytest.param({"type": "object", "title": "<b>Form</b>"}, "markup", id="markup"),
        pytest.param({"properties": {"a": {"$ref": "https://example.com/a.json"}}}, "ref-remote", id="remote-ref"),
        pytest.param({"type": "string", "pattern": "("}, "pattern-invalid", id="bad-pattern"),
    ],
)
def test_a_form_with_a_bad_schema_fails_at_construction(schema: dict[str, Any], problem: str) -> None:
    with pytest.raises(ConfigurationError, match=problem):
        FormDefinition("broken", "A broken form.", schema)


def test_registration_refuses_what_could_only_fail_at_run_time() -> None:
    with pytest.raises(ConfigurationError):
        FormDefinition("", "No key.", {"type": "object"})
    with pytest.raises(ConfigurationError):
        UserInputTool([])
    with pytest.raises(ConfigurationError):
        UserInputTool([MEETING_FORM, RENAMED])
    with pytest.raises(ConfigurationError):
        Adapter(ScriptedBackend(), tools=[UserInputTool([MEETING_FORM])], forms=[MEETING_FORM])


def test_the_model_sees_the_form_keys_and_their_purpose_never_a_schema() -> None:
    ticket_form = FormDefinition("support_ticket_details", "Incident details.", {"type": "object"})
    explicit = Adapter(ScriptedBackend(), tools=[UserInputTool([MEETING_FORM, ticket_form])])
    shorthand = Adapter(ScriptedBackend(), forms=[MEETING_FORM, ticket_form])

    (spec,) = [tool.spec() for tool in shorthand.tools]

    assert spec == explicit.tools[0].spec()
    assert spec.name == "request_user_input"
    assert spec.parameters == {
        "type": "object",
        "properties": {"formKey": {"type": "string", "enum": ["meeting_room_booking", "support_ticket_details"]}},
        "required": ["formKey"],
        "additionalProperties": False,
    }
    assert f"meeting_room_booking: {MEETING_FORM.description}" in spec.description
    assert "support_ticket_details: Incident details." in spec.description
    assert "date-time" not in spec.model_dump_json()
    assert Adapter(ScriptedBackend()).tools == []


async def test_a_waiting_form_keeps_the_schema_it_was_asked_with() -> None:
    store = MemoryStore()
    before, _ = booking_adapter(store=store)
    asked = interrupt_of(await say(before, "t-frozen", "book a meeting room"))
    after, runs = booking_adapter(store=store, forms=[RENAMED])
    valid_only_now = {"topic": "Q3 planning", "time": "2030-01-02T10:00:00Z", "participants": 6}

    refused = await collect(after.resume("t-frozen", [entry(asked["toolCallId"], valid_only_now)]), resumed=True)
    done = await collect(after.resume("t-frozen", [entry(asked["toolCallId"], BOOKING)]), resumed=True)

    (error,) = of(refused, "RUN_ERROR")
    assert error["code"] == "RESUME_PAYLOAD_INVALID"
    assert "'attendees' is a required property" in error["message"]
    assert of(done, "RUN_FINISHED")[0]["outcome"] == {"type": "success"}
    assert [arguments(run) for run in runs] == [BOOKING]
    assert interrupt_of(await say(after, "t-new", "book a meeting room"))["responseSchema"] == RENAMED.schema
    await before.aclose()


async def test_resume_by_action_id_audits_the_card_and_the_same_answers_again_replay() -> None:
    adapter, runs = ticket_adapter()
    asked = interrupt_of(await say(adapter, "t-worker", TICKET_REQUEST))
    answers = [entry(asked["toolCallId"], DETAILS)]
    audit = {"submittedBy": "user-1001", "requestId": "request-789"}

    events = await collect(adapter.resume("t-worker", answers, metadata=audit), resumed=True)

    (finished,) = of(events, "RUN_FINISHED")
    assert finished["outcome"] == {"type": "success"}
    assert [run["ctx"].submitted_form_data for run in runs] == [None, DETAILS]
    (card,) = of(events, "ACTIVITY_SNAPSHOT")
    assert (card["content"]["status"], card["content"]["submittedBy"]) == ("SUBMITTED", "user-1001")
    replay = await collect(adapter.resume("t-worker", answers, metadata=audit), resumed=True)
    assert [event["type"] for event in replay] == ["RUN_STARTED", "RUN_FINISHED"]
    assert len(runs) == 2
    done = await adapter.thread("t-worker")
    assert done is not None
    assert done["interrupts"] == []


async def test_a_wrong_action_id_never_resumes_another_request() -> None:
    adapter, runs = booking_adapter()
    first = interrupt_of(await say(adapter, "t-late", "book a meeting room"))
    await collect(adapter.resume("t-late", [entry(first["toolCallId"], BOOKING)]), resumed=True)
    second = interrupt_of(await say(adapter, "t-late", "book a meeting room"))

    for wrong in (entry(first["toolCallId"], BOOKING), entry("call_never_made", BOOKING)):
        (late,) = of(await collect(adapter.resume("t-late", [wrong]), resumed=True), "RUN_ERROR")
        assert late["code"] == "RESUME_UNKNOWN_INTERRUPT"
    mismatched = {"interruptId": second["id"], "status": "resolved", "payload": BOOKING}
    crossing = adapter.resume("t-late", [mismatched], metadata={"actionId": first["toolCallId"]})
    (crossed,) = of(await collect(crossing, resumed=True), "RUN_ERROR")
    assert crossed["code"] == "RESUME_UNKNOWN_INTERRUPT"

    still = await adapter.thread("t-late")
    assert still is not None
    assert [i["id"] for i in still["interrupts"]] == [second["id"]]
    assert [card["content"]["status"] for card in cards(still["messages"])] == ["SUBMITTED", "PENDING"]
    assert len(runs) == 1
    done = await collect(adapter.resume("t-late", [entry(second["toolCallId"], BOOKING)]), resumed=True)
    assert of(done, "RUN_FINISHED")[0]["outcome"] == {"type": "success"}


async def test_cancel_turn_moves_the_card_to_cancelled_and_runs_nothing() -> None:
    adapter, runs = booking_adapter()
    asked = interrupt_of(await say(adapter, "t-cancel", "book a meeting room"))

    assert await adapter.cancel_turn("t-cancel") is True

    record = await adapter.thread("t-cancel")
    assert record is not None
    assert record["interrupts"] == []
    (card,) = cards(record["messages"])
    assert (card["content"]["status"], card["content"]["actions"], card["content"]["version"]) == ("CANCELLED", [], 2)
    assert "cancelledAt" in card["content"]
    (answer,) = [m for m in record["messages"] if m.get("toolCallId") == asked["toolCallId"]]
    assert answer["error"] == "cancelled"
    assert runs == []
    assert await adapter.cancel_turn("t-cancel") is False
    (gone,) = of(
        await collect(adapter.resume("t-cancel", [entry(asked["toolCallId"], BOOKING)]), resumed=True), "RUN_ERROR"
    )
    assert gone["code"] == "RESUME_UNKNOWN_INTERRUPT"
    assert await adapter.thread("t-unknown") is None


def test_a_card_moves_once_by_compare_and_set() -> None:
    card = pending_form("turn_1", "call_1", "meeting_room_booking", MEETING_FORM.schema)
    at = datetime(2030, 1, 1, tzinfo=UTC)

    moved = transition(card, "SUBMITTED", expected_version=1, submitted_values=BOOKING, submitted_by="u-1", at=at)

    assert moved.id == card.id == "turn_1:input:call_1"
    assert moved.content["status"] == "SUBMITTED"
    assert (moved.content["version"], moved.content["submittedAt"]) == (2, at.isoformat())
    assert card.content["status"] == "PENDING"
    with pytest.raises(ActivityConflict):
        transition(card, "SUBMITTED", expected_version=2, submitted_values=BOOKING)
    with pytest.raises(ActivityConflict):
        transition(moved, "CANCELLED", expected_version=1)
    with pytest.raises(ActivityConflict):
        transition(moved, "CANCELLED", expected_version=2)


async def test_the_example_apps_are_served_from_their_modules() -> None:
    adapter = meeting_room.build_adapter()
    asked = interrupt_of(await say(adapter, "t-example", "预定会议室"))

    events = await collect(adapter.resume("t-example", [entry(asked["toolCallId"], BOOKING)]), resumed=True)

    reservation = json.loads(of(events, "TOOL_CALL_RESULT")[-1]["content"])
    assert reservation["room"] == "Everest (12 seats)"
    assert meeting_room.app.routes
