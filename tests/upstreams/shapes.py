"""A hand-made AG-UI upstream for each way an interrupt may refer to the call it gates (issue 20).

No framework's code: each shape is the bare event sequence, so the adapter's rule is shown to hold for
an upstream it has never seen. On "refund order 42" the upstream calls its own `refund_order` and
interrupts; on the resume it refunds (approved) or refuses (anything else) and says so; any other
message gets a plain answer. `refunds` counts the refunds it really made.

    tool_call_id    the interrupt's toolCallId names the call (Pydantic AI, Strands, LangGraph)
    metadata        a provisional result first; only the interrupt's metadata names the call (ADK's link)
    confirmation    a provisional result, then a separate confirmation call the interrupt names
    confirmation_and_metadata   both: toolCallId names the confirmation call, metadata the gated one (ADK)
    no_reference    the interrupt names no call at all (CrewAI)
    snapshot_only   as tool_call_id, but the real result comes only in a MESSAGES_SNAPSHOT
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

SHAPES = ("tool_call_id", "metadata", "confirmation", "confirmation_and_metadata", "no_reference", "snapshot_only")
PENDING = '{"error": "This tool call requires confirmation, please approve or reject."}'
SCHEMA = {"type": "object", "properties": {"approved": {"type": "boolean"}}, "required": ["approved"]}


def _call(call_id: str, name: str, arguments: str) -> list[dict[str, Any]]:
    return [
        {"type": "TOOL_CALL_START", "toolCallId": call_id, "toolCallName": name, "parentMessageId": f"m-{call_id}"},
        {"type": "TOOL_CALL_ARGS", "toolCallId": call_id, "delta": arguments},
        {"type": "TOOL_CALL_END", "toolCallId": call_id},
    ]


def _result(call_id: str, content: str) -> dict[str, Any]:
    return {"type": "TOOL_CALL_RESULT", "messageId": f"r-{call_id}-{len(content)}", "toolCallId": call_id,
            "content": content}  # fmt: skip


def _text(text: str) -> list[dict[str, Any]]:
    message_id = f"t-{abs(hash(text))}"
    return [
        {"type": "TEXT_MESSAGE_START", "messageId": message_id, "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": message_id, "delta": text},
        {"type": "TEXT_MESSAGE_END", "messageId": message_id},
    ]


@dataclass
class ShapedUpstream:
    """The upstream of one shape; its ASGI app is `app`."""

    shape: str
    refunds: list[str] = field(default_factory=list)

    @property
    def app(self) -> Starlette:
        return Starlette(routes=[Route("/", self._run, methods=["POST"])])

    async def _run(self, request: Request) -> StreamingResponse:
        body = await request.json()
        events = self._answer(body) if body.get("resume") else self._ask(body)
        started = {"type": "RUN_STARTED", "threadId": body["threadId"], "runId": body["runId"]}
        return StreamingResponse(_sse([started, *events]), media_type="text/event-stream")

    def _ask(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        if "refund order 42" not in str(body["messages"][-1].get("content")):
            return [*_text("You are welcome."), _finished(body)]
        call_id, confirm_id = f"refund-{body['runId'][-6:]}", f"confirm-{body['runId'][-6:]}"
        events = _call(call_id, "refund_order", '{"order": "42"}')
        interrupt: dict[str, Any] = {"id": f"int-{call_id}", "reason": "confirmation", "responseSchema": SCHEMA}
        if self.shape in ("tool_call_id", "snapshot_only"):
            interrupt["toolCallId"] = call_id
        elif self.shape == "metadata":
            events.append(_result(call_id, PENDING))
            interrupt["metadata"] = {"adk": {"originalFunctionCall": {"id": call_id, "name": "refund_order"}}}
        elif self.shape.startswith("confirmation"):
            events += [_result(call_id, PENDING), *_call(confirm_id, "request_confirmation", "{}")]
            interrupt["toolCallId"] = confirm_id
        if self.shape == "confirmation_and_metadata":
            interrupt["metadata"] = {"adk": {"originalFunctionCall": {"id": call_id, "name": "refund_order"}}}
        interrupt["message"] = f"Refund order 42? ({call_id})"
        return [*events, _finished(body, {"type": "interrupt", "interrupts": [interrupt]})]

    def _answer(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        (entry,) = body["resume"]
        call_id = entry["interruptId"].removeprefix("int-")
        approved = entry.get("status") == "resolved" and (entry.get("payload") or {}).get("approved") is True
        if approved:
            self.refunds.append("42")
        content = '"refunded order 42"' if approved else '"The refund was refused by the user."'
        if self.shape == "snapshot_only":
            told = {"id": f"r-{call_id}", "role": "tool", "toolCallId": call_id, "content": content}
            events = [{"type": "MESSAGES_SNAPSHOT", "messages": [*body["messages"], told]}]
        else:
            events = [_result(call_id, content)]
        return [*events, *_text(f"Done: refund_order said {content}"), _finished(body)]


def _finished(body: dict[str, Any], outcome: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"type": "RUN_FINISHED", "threadId": body["threadId"], "runId": body["runId"],
            "outcome": outcome or {"type": "success"}}  # fmt: skip


async def _sse(events: list[dict[str, Any]]) -> AsyncIterator[bytes]:
    for event in events:
        yield f"data: {json.dumps(event)}\n\n".encode()
