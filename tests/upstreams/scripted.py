"""A hand-scripted AG-UI upstream for the tests: bare event sequences, framed as a real agent's SSE response.

`framed_run` wraps one run's events in RUN_STARTED and RUN_FINISHED (an `{"outcome": ...}` item last gives
the ending) and streams them; `Upstream` answers each run with the next script and keeps every request.
The event helpers build the pieces the scripts are made of.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

Script = Callable[[dict[str, Any]], list[dict[str, Any]]]


def framed_run(body: dict[str, Any], events: list[dict[str, Any]]) -> StreamingResponse:
    """One upstream run answering `body`: RUN_STARTED, `events`, RUN_FINISHED with the ending a last item gives."""
    events = list(events)
    ending = events.pop() if events and "outcome" in events[-1] else {"outcome": {"type": "success"}}
    ids = {"threadId": body["threadId"], "runId": body["runId"]}
    framed = [{"type": "RUN_STARTED", **ids}, *events, {"type": "RUN_FINISHED", **ids, **ending}]

    async def stream() -> AsyncIterator[bytes]:
        for event in framed:
            yield f"data: {json.dumps(event)}\n\n".encode()

    return StreamingResponse(stream(), media_type="text/event-stream")


@dataclass
class Upstream:
    """An AG-UI upstream that answers each run with the next script; it keeps every request body."""

    scripts: list[Script]
    bodies: list[dict[str, Any]] = field(default_factory=list)

    @property
    def app(self) -> Starlette:
        return Starlette(routes=[Route("/", self._run, methods=["POST"])])

    async def _run(self, request: Request) -> StreamingResponse:
        body = await request.json()
        self.bodies.append(body)
        return framed_run(body, self.scripts.pop(0)(body))


def fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def start(call_id: str, name: str, arguments: str = "{}") -> list[dict[str, Any]]:
    """A whole tool call: its start, arguments and end."""
    return [
        {"type": "TOOL_CALL_START", "toolCallId": call_id, "toolCallName": name, "parentMessageId": "up-m1"},
        {"type": "TOOL_CALL_ARGS", "toolCallId": call_id, "delta": arguments},
        {"type": "TOOL_CALL_END", "toolCallId": call_id},
    ]


def result(call_id: str, content: str) -> dict[str, Any]:
    return {"type": "TOOL_CALL_RESULT", "messageId": fresh("up-r"), "toolCallId": call_id, "content": content}


def text(words: str) -> list[dict[str, Any]]:
    message_id = fresh("up-t")
    return [
        {"type": "TEXT_MESSAGE_START", "messageId": message_id, "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": message_id, "delta": words},
        {"type": "TEXT_MESSAGE_END", "messageId": message_id},
    ]


def interrupted(interrupt_id: str, call_id: str | None = None) -> dict[str, Any]:
    """The ending of a run that interrupts (naming `call_id` when given)."""
    interrupt: dict[str, Any] = {"id": interrupt_id, "reason": "confirmation"}
    if call_id is not None:
        interrupt["toolCallId"] = call_id
    return {"outcome": {"type": "interrupt", "interrupts": [interrupt]}}
