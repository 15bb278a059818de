"""A form the model asks for: it requests the booking details, then books the room itself.

`python -m examples.meeting_room [--port 8000]` serves it at http://127.0.0.1:8000/agui; say "book a
meeting room" (or "预定会议室"), then resume with the form's data.
"""

from __future__ import annotations

from datetime import UTC, datetime

from starlette.applications import Starlette

from adapter import Adapter, FormDefinition, ToolContext, create_app, mount, tool
from adapter.backends import Call, Progress, Rule, ScriptedBackend
from adapter.stores import TurnStore

from . import serving

MEETING_FORM = FormDefinition(
    "meeting_room_booking",
    "Collect the meeting's topic, time and number of attendees before a room is booked.",
    {
        "type": "object",
        "title": "Book a meeting room",
        "description": "What the meeting is about, when it starts and how many people come: the room is picked to fit.",
        "properties": {
            "topic": {"type": "string", "title": "Topic", "minLength": 1},
            "time": {"type": "string", "format": "date-time", "title": "Start time"},
            "attendees": {"type": "integer", "minimum": 1, "title": "Attendees"},
        },
        "required": ["topic", "time", "attendees"],
    },
)


@tool
def reserve_meeting_room(topic: str, time: str, attendees: int, ctx: ToolContext) -> dict[str, object]:
    """Book a meeting room once the topic, the start time and the number of attendees are known."""
    room = "Kilimanjaro (4 seats)" if attendees <= 4 else "Everest (12 seats)"
    return {"reservationId": f"MR-{ctx.idempotency_key[:8]}", "room": room, "topic": topic, "time": time}


def _booked(progress: Progress) -> str:
    booking = progress.result("reserve_meeting_room")
    if not isinstance(booking, dict):
        return "OK, no room was booked."
    when = _readable(booking["time"])
    return f"Booked {booking['room']} for {booking['topic']!r} on {when}, reference {booking['reservationId']}."


def _readable(iso: str) -> str:
    """An ISO 8601 time as a person reads it: 4 May 2030, 10:30 UTC."""
    try:
        moment = datetime.fromisoformat(iso)
    except ValueError:
        return iso
    if moment.tzinfo is not None:
        return f"{moment.astimezone(UTC):%-d %B %Y, %H:%M} UTC"
    return f"{moment:%-d %B %Y, %H:%M}"


RULES = [
    Rule(
        r"book a meeting room|预定会议室",
        steps=[
            [Call("request_user_input", {"formKey": MEETING_FORM.form_key})],
            [Call("reserve_meeting_room", lambda progress: progress.result("request_user_input")["data"])],
        ],
        reply=_booked,
    ),
]


def build_adapter(store: TurnStore | None = None) -> Adapter:
    """The form is registered with `forms=`; the model picks `reserve_meeting_room` after the submission."""
    return Adapter(ScriptedBackend(RULES), tools=[reserve_meeting_room], forms=[MEETING_FORM], store=store)


app = Starlette(routes=[mount("/agui", create_app(build_adapter()))])

if __name__ == "__main__":
    serving.serve(app, description="Serve the meeting-room example (a form the model asks for).")
