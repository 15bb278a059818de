"""A hand-made AG-UI server for the kit's tests: an agent with one gated refund and one client tool, and faults to
switch on, each a way a real framework was seen to misbehave (issue 21).

    any-id             a resume entry with any interrupt id approves the thread's open call (CrewAI alone)
    not-once           an applied interrupt stays open: a replay or a concurrent copy runs the refund again
    names-no-call      the interrupt names no call (CrewAI)
    adk-metadata       the interrupt names a confirmation call; the gated call is in metadata.adk (ADK)
    snapshot-only      a refund's result shows only as a tool message in MESSAGES_SNAPSHOT
    silent             a refund's result is not reported at all
    chunk-only         calls stream as TOOL_CALL_CHUNK only (LlamaIndex)
    approval-is-client the approval message calls the client tool instead of the refund
    no-message-ids     a TOOL_CALL_RESULT carries no messageId (TOOL-4 says it must)
    first-run-fails    the first run of all ends in RUN_ERROR (a server still warming up)

`GET /executions?thread=ID` answers `{"executions": N}`: the refunds that really ran on the thread.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

Event = dict[str, Any]
APPROVAL = {"type": "object", "properties": {"approved": {"type": "boolean"}}, "required": ["approved"]}


def _id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@dataclass
class FaultyTarget:
    """The server; `faults` switches misbehaviours on (see the module docstring)."""

    faults: frozenset[str] = frozenset()
    pending: Event | None = None
    """The interrupt the current run ends with."""
    started: bool = False
    executions: Counter[str] = field(default_factory=Counter)
    open: dict[str, dict[str, str]] = field(default_factory=dict)
    """Per thread: open interrupt id -> the refund call it gates."""

    @property
    def app(self) -> Starlette:
        return Starlette(
            routes=[Route("/", self.run, methods=["POST"]), Route("/executions", self.count, methods=["GET"])]
        )

    async def count(self, request: Request) -> Response:
        return JSONResponse({"executions": self.executions[request.query_params["thread"]]})

    async def run(self, request: Request) -> Response:
        body = json.loads(await request.body())
        thread, run = body["threadId"], body["runId"]
        events = [
            {"type": "RUN_STARTED", "threadId": thread, "runId": run, "protocolVersion": "1.0"},
            *self._turn(thread, body),
        ]
        if events[-1]["type"] != "RUN_ERROR":
            events.append({"type": "RUN_FINISHED", "threadId": thread, "runId": run, **self._outcome(thread, events)})
        return Response("".join(f"data: {json.dumps(e)}\n\n" for e in events), media_type="text/event-stream")

    def _turn(self, thread: str, body: dict[str, Any]) -> Iterator[Event]:
        if "first-run-fails" in self.faults and not self.started:
            self.started = True
            yield {"type": "RUN_ERROR", "code": "WARMING_UP", "message": "try again"}
            return
        if body.get("resume"):
            yield from self._resume(thread, body["resume"])
            return
        last = body["messages"][-1]
        if last["role"] == "tool":
            yield from _text("Thanks.")
        elif self.open.get(thread):
            yield {"type": "RUN_ERROR", "code": "RESUME_REQUIRED", "message": "answer the open interrupt first"}
        elif "refund" in str(last.get("content")):
            yield from self._refund(thread, "navigate" if "approval-is-client" in self.faults else "refund_order")
        elif "go to" in str(last.get("content")):
            yield from self._call("navigate", '{"page": "settings"}')
        else:
            yield from _text("Hello.")

    def _refund(self, thread: str, tool: str) -> Iterator[Event]:
        call_id = _id("call")
        yield from self._call(tool, '{"order_id": "A1"}', call_id)
        interrupt: Event = {"id": _id("int"), "reason": "tool_call", "toolCallId": call_id, "responseSchema": APPROVAL}
        if "names-no-call" in self.faults:
            del interrupt["toolCallId"]
        if "adk-metadata" in self.faults:
            confirm = _id("confirm")
            yield from self._call("adk_request_confirmation", "{}", confirm)
            interrupt |= {"toolCallId": confirm, "metadata": {"adk": {"originalFunctionCall": {"id": call_id}}}}
        self.open.setdefault(thread, {})[interrupt["id"]] = call_id
        self.pending = interrupt

    def _resume(self, thread: str, entries: list[Event]) -> Iterator[Event]:
        opened = self.open.get(thread, {})
        for entry in entries:
            call_id = opened.get(entry["interruptId"])
            if call_id is None and "any-id" in self.faults and opened:
                call_id = next(iter(opened.values()))
            if call_id is None:
                yield {"type": "RUN_ERROR", "code": "RESUME_UNKNOWN_INTERRUPT", "message": "no such interrupt"}
                return
            payload = entry.get("payload") if isinstance(entry.get("payload"), dict) else {}
            if entry.get("status") == "resolved" and not isinstance(payload.get("approved"), bool):
                yield {"type": "RUN_ERROR", "code": "RESUME_PAYLOAD_INVALID", "message": "approved must be a boolean"}
                return
            if "not-once" not in self.faults:
                opened.pop(entry["interruptId"], None)
            ran = entry.get("status") == "resolved" and payload.get("approved") is True
            self.executions[thread] += ran
            yield from self._result(call_id, "refunded A1" if ran else "The user denied this call.")
        yield from _text("Done.")

    def _result(self, call_id: str, content: str) -> Iterator[Event]:
        message = {"id": _id("result"), "role": "tool", "toolCallId": call_id, "content": content}
        if "snapshot-only" in self.faults:
            yield {"type": "MESSAGES_SNAPSHOT", "messages": [message]}
        elif "silent" not in self.faults:
            result = {"type": "TOOL_CALL_RESULT", "messageId": message["id"], "toolCallId": call_id, "content": content}
            if "no-message-ids" in self.faults:
                del result["messageId"]
            yield result

    def _call(self, name: str, arguments: str, call_id: str | None = None) -> Iterator[Event]:
        call_id = call_id or _id("call")
        self.pending = None
        if "chunk-only" in self.faults:
            yield {"type": "TOOL_CALL_CHUNK", "toolCallId": call_id, "toolCallName": name, "delta": arguments[:1]}
            yield {"type": "TOOL_CALL_CHUNK", "delta": arguments[1:]}
            return
        yield {"type": "TOOL_CALL_START", "toolCallId": call_id, "toolCallName": name}
        yield {"type": "TOOL_CALL_ARGS", "toolCallId": call_id, "delta": arguments}
        yield {"type": "TOOL_CALL_END", "toolCallId": call_id}

    def _outcome(self, thread: str, events: list[Event]) -> Event:
        interrupt, self.pending = self.pending, None
        if interrupt is not None:
            return {"outcome": {"type": "interrupt", "interrupts": [interrupt]}}
        kinds = ("TOOL_CALL_START", "TOOL_CALL_CHUNK")
        calls = [e["toolCallId"] for e in events if e["type"] in kinds and "toolCallId" in e]
        return {"outcome": {"type": "success", "pendingToolCallIds": calls}} if calls else {}


def _text(text: str) -> Iterator[Event]:
    message_id = _id("msg")
    yield {"type": "TEXT_MESSAGE_START", "messageId": message_id, "role": "assistant"}
    yield {"type": "TEXT_MESSAGE_CONTENT", "messageId": message_id, "delta": text}
    yield {"type": "TEXT_MESSAGE_END", "messageId": message_id}
