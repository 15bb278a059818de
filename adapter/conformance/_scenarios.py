"""The reference agent's scenarios, and the backend that plays them.

A thread plays one scenario, chosen by its first input (`forwardedProps.scenario`, or a user message
that names it). The scenario acts on the thread's first user message; any later message gets a short
reply, so a client can follow up (several scenarios are graded on that follow-up).
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ag_ui.core import AssistantMessage, StateDeltaEvent, StateSnapshotEvent, UserMessage

from adapter._ids import new_id
from adapter._run._forms import FormDefinition
from adapter._run._tools import tool
from adapter.backends import BackendError, ModelRequest, Passthrough, TextDelta, ToolCall

EXPIRES_AFTER = 3.0
"""Seconds the `expiring` scenario's interrupt stays answerable."""
STATE_SNAPSHOT: dict[str, Any] = {"counter": 1, "items": []}
STATE_DELTA: list[dict[str, Any]] = [
    {"op": "add", "path": "/items/-", "value": "from a delta"},
    {"op": "replace", "path": "/counter", "value": 2},
]
FINAL_STATE: dict[str, Any] = {"counter": 2, "items": ["from a delta"]}
LONG_TEXT = " ".join(f"Line {n}: ünïcødé ✓ 👍🏽 text that streams in many deltas." for n in range(1, 301))

ORDER_FORM = FormDefinition(
    "reference_order",
    "An order: who it is for and how many.",
    {
        "type": "object",
        "properties": {"name": {"type": "string", "minLength": 1}, "quantity": {"type": "integer", "minimum": 1}},
        "required": ["name", "quantity"],
        "additionalProperties": False,
    },
)


@tool(requires_approval=True)
def send_email(to: str, subject: str, body: str) -> dict[str, str]:
    """Send an email; a person approves it first, and may edit it.

    Args:
        to: The recipient.
        subject: The subject line.
        body: The text.
    """
    return {"sent": "yes", "to": to, "subject": subject, "body": body}


@tool
def lookup_reference(key: str) -> dict[str, str]:
    """Look a reference up (the `cancelled` scenario's step before the run stops).

    Args:
        key: What to look up.
    """
    return {"key": key, "value": "found"}


SERVER_TOOLS = [send_email, lookup_reference]
OWN_TOOL_NAMES = frozenset({"send_email", "lookup_reference", "request_user_input"})


@dataclass(frozen=True, slots=True)
class Scenario:
    """One scenario: what it does, what the client should do, and which adapter serves it."""

    id: str
    does: str
    client_should: str
    adapter: str = "default"
    follow_up: bool = False
    """True when the client is expected to send one more message after the scenario's run."""

    def as_json(self) -> dict[str, Any]:
        """The scenario as `GET /scenarios` lists it."""
        return {"id": self.id, "does": self.does, "clientShould": self.client_should, "followUp": self.follow_up}


SCENARIOS = [
    Scenario("frontend-tool", "calls your first client tool: one interrupt", "resume it with `resolved` and a result"),
    Scenario("parallel", "calls your first client tool twice in one step: two interrupts", "answer both in one resume"),
    Scenario("approval-edits", "asks to approve send_email", "resolve with approved: true and editedArgs"),
    Scenario("form", "asks for a form (reference_order) with a responseSchema", "resolve with valid data"),
    Scenario(
        "expiring",
        f"calls your first client tool; the interrupt expires after {EXPIRES_AFTER:g} s",
        "answer before expiresAt, or cancel after it",
        adapter="expiring",
    ),
    Scenario(
        "cancelled",
        "runs lookup_reference, then stops: a cancelled outcome",
        "send one more message, no resume",
        adapter="cancelling",
        follow_up=True,
    ),
    Scenario(
        "pending",
        "calls your first client tool; success with pendingToolCallIds",
        "answer with a ToolMessage",
        adapter="pending",
    ),
    Scenario(
        "state", "sends a STATE_SNAPSHOT, then a STATE_DELTA", "send one more message with the state", follow_up=True
    ),
    Scenario("long-text", "streams 300 lines of text in many deltas", "send one more message with it", follow_up=True),
    Scenario("run-error", "fails mid-stream with RUN_ERROR", "send one more message, no resume", follow_up=True),
]
BY_ID = {scenario.id: scenario for scenario in SCENARIOS}


def pick(body: Mapping[str, Any]) -> str | None:
    """The scenario an input asks for: `forwardedProps.scenario`, or a user message naming one."""
    props = body.get("forwardedProps")
    if isinstance(props, dict) and props.get("scenario") in BY_ID:
        return str(props["scenario"])
    for message in reversed(body.get("messages") or []):
        if isinstance(message, dict) and message.get("role") == "user" and isinstance(message.get("content"), str):
            words = message["content"].lower().replace("scenario:", " ").split()
            return next((word for word in words if word in BY_ID), None)
    return None


Play = Callable[[ModelRequest, int], list[Any]]


class ReferenceBackend:
    """Plays each thread's scenario; `scenarios` maps thread ids to scenario ids (the recorder fills it)."""

    def __init__(self, scenarios: Mapping[str, str]) -> None:
        self.scenarios = scenarios

    async def stream(self, request: ModelRequest) -> AsyncIterator[Any]:
        """One assistant step of the thread's scenario."""
        users = [m for m in request.messages if isinstance(m, UserMessage)]
        scenario = self.scenarios.get(request.thread_id)
        if scenario is None or len(users) > 1:
            yield TextDelta(f"Scenario {scenario} is over; thank you." if scenario else _MENU)
            return
        last_user = max(i for i, m in enumerate(request.messages) if isinstance(m, UserMessage))
        rounds = sum(1 for m in request.messages[last_user:] if isinstance(m, AssistantMessage) and m.tool_calls)
        for item in _PLAYS[scenario](request, rounds):
            if isinstance(item, Exception):
                raise item
            yield item


_MENU = "Name a scenario to play: " + ", ".join(s.id for s in SCENARIOS) + " (GET /scenarios describes them)."


def _client_tool(request: ModelRequest, count: int = 1) -> list[Any]:
    tools = [t for t in request.tools if t.name not in OWN_TOOL_NAMES]
    if not tools:
        return [TextDelta("This scenario calls your first client tool: declare one in RunAgentInput.tools.")]
    arguments = json.dumps(_arguments(tools[0].parameters))
    return [ToolCall(new_id("call"), tools[0].name, arguments) for _ in range(count)]


def _arguments(schema: Any) -> dict[str, Any]:
    """Arguments that fill a tool's required properties with plain values."""
    samples = {"string": "reference", "integer": 1, "number": 1, "boolean": True, "array": [], "object": {}}
    properties = schema.get("properties", {}) if isinstance(schema, dict) else {}
    required = schema.get("required", []) if isinstance(schema, dict) else []
    return {name: samples.get(str(properties.get(name, {}).get("type")), "reference") for name in required}


def _then_say(first: Callable[[ModelRequest], list[Any]], reply: str) -> Play:
    return lambda request, rounds: first(request) if rounds == 0 else [TextDelta(reply)]


def _call(name: str, arguments: dict[str, Any]) -> Callable[[ModelRequest], list[Any]]:
    return lambda request: [ToolCall(new_id("call"), name, json.dumps(arguments))]


_EMAIL = {"to": "ada@example.com", "subject": "Hello", "body": "Proposed text."}
_PLAYS: dict[str, Play] = {
    "frontend-tool": _then_say(_client_tool, "Thanks, I got your tool's result."),
    "parallel": _then_say(lambda request: _client_tool(request, 2), "Thanks, I got both results."),
    "approval-edits": _then_say(_call("send_email", _EMAIL), "Done, the email went out as approved."),
    "form": _then_say(_call("request_user_input", {"formKey": ORDER_FORM.form_key}), "Thanks, the order is noted."),
    "expiring": _then_say(_client_tool, "Thanks, I got your answer in time."),
    "cancelled": _then_say(_call("lookup_reference", {"key": "k1"}), "This step is past max_steps."),
    "pending": _then_say(_client_tool, "Thanks, I got your tool's result."),
    "state": lambda request, rounds: [
        Passthrough(StateSnapshotEvent(snapshot=STATE_SNAPSHOT)),
        Passthrough(StateDeltaEvent(delta=STATE_DELTA)),
        TextDelta("The state is now counter 2 with one item."),
    ],
    "long-text": lambda request, rounds: [TextDelta(piece) for piece in re.findall(r"\S+\s*", LONG_TEXT)],
    "run-error": lambda request, rounds: [
        TextDelta("Starting, then failing on purpose. "),
        BackendError("The reference agent failed on purpose."),
    ],
}


def scenario_ids() -> Sequence[str]:
    """Every scenario id, in order."""
    return [scenario.id for scenario in SCENARIOS]
