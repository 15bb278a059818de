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
    every-run-fails    every run ends in RUN_ERROR
    refuses-everything every run is refused with HTTP 400
    runs-unasked       the refund runs at once, with no approval asked
    refuses-approvals  a message about a refund ends in RUN_ERROR; everything else works
    invents-answers    a new user message answers every call left open ("No result was recorded ...") with a
                       TOOL_CALL_RESULT, and drops the open approval
    invents-in-record  the same, but the invented answer is only stored: the thread read shows it
    keeps-history      the client's history replaces the record: a second answer, a rewrite or a replacement is kept
    echoes-answers     the reply to a tool message quotes it, as a model that was sent it does
    reuses-result-ids  every result for a call reuses the messageId of its first one (with not-once: a replay or a
                       concurrent copy runs the refund again, and reports it under the old id)
    invalid-is-denial  a resolved payload without a boolean `approved` is taken as a denial: the call is answered
    recursive-schema   the interrupt's responseSchema is {"$ref": "#"}
    endless-stream     every run streams text after RUN_STARTED and never ends (`sent` counts its bytes)
    endless-executions `GET /executions` answers a body that never ends (`sent` counts its bytes)
    bare-boolean       the interrupt's responseSchema is {"type": "boolean"} (AG2): a payload must be a bare boolean
    enum-decision      the responseSchema is {"decision": "approve" | "reject"}: a payload must say one of them
    never-interrupts   a refund message ends in success with a question, no interrupt (tRPC-Agent, Agent Spec)
    reruns-first       a resume runs every call approved before in the turn again (10xGraph's streaming path)
    unknown-warns      a resume entry naming an interrupt never raised is passed over with a warning, as AG-UI 1.1
                       says a producer SHOULD, and the open interrupt is issued again
    stateless          nothing is kept across runs (AG-UI 1.1 allows it): an interrupt id is `int-` and its call's id,
                       a resume answers the calls its history leaves open, an entry naming none of them is passed
                       over with a warning (1.1), and a new message while a call waits just gets a reply

"refund orders A1 and B2" opens two interrupts at once; a resume that answers one of them issues the other again.

`GET /executions?thread=ID` answers `{"executions": N}`: the refunds that really ran on the thread. `GET
/threads/ID` answers `{"messages": [...]}`: the record, which keeps the first answer of each call and rewrites nothing.
"""

from __future__ import annotations

import json
import re
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

Event = dict[str, Any]
APPROVAL = {"type": "object", "properties": {"approved": {"type": "boolean"}}, "required": ["approved"]}
DECISION = {
    "type": "object",
    "properties": {"decision": {"enum": ["reject", "approve"]}, "note": {"type": "string"}},
    "required": ["decision", "note"],
    "additionalProperties": False,
}
MISSING = "No result was recorded for this tool call."
ENDLESS_UP_TO = 1 << 16
"""Chunks an endless body sends at most (1 KiB each), so that a missing limit fails a test instead of hanging it."""


def _id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@dataclass
class FaultyTarget:
    """The server; `faults` switches misbehaviours on (see the module docstring)."""

    faults: frozenset[str] = frozenset()
    pending: list[Event] = field(default_factory=list)
    """The interrupts the current run ends with."""
    interrupts: dict[str, Event] = field(default_factory=dict)
    """Every interrupt issued, by id."""
    approved: dict[str, list[str]] = field(default_factory=dict)
    """Per thread: the calls approved so far in the turn (reruns-first runs them again)."""
    started: bool = False
    executions: Counter[str] = field(default_factory=Counter)
    open: dict[str, dict[str, str]] = field(default_factory=dict)
    """Per thread: open interrupt id -> the refund call it gates."""
    record: dict[str, list[Event]] = field(default_factory=dict)
    """Per thread: the messages as the server keeps them (`GET /threads/ID`)."""
    result_ids: dict[str, str] = field(default_factory=dict)
    """Per call: the messageId of its first result (reuses-result-ids)."""
    sent: int = 0
    """Bytes an endless body sent."""

    @property
    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/", self.run, methods=["POST"]),
                Route("/executions", self.count, methods=["GET"]),
                Route("/threads/{thread}", self.read, methods=["GET"]),
            ]
        )

    async def count(self, request: Request) -> Response:
        if "endless-executions" in self.faults:
            return StreamingResponse(self._endless(b'{"executions": 0', b" " * 1024), media_type="application/json")
        return JSONResponse({"executions": self.executions[request.query_params["thread"]]})

    async def _endless(self, first: bytes, then: bytes) -> AsyncIterator[bytes]:
        yield first
        for _ in range(ENDLESS_UP_TO):
            self.sent += len(then)
            yield then

    async def read(self, request: Request) -> Response:
        record = self.record.get(request.path_params["thread"])
        if record is None:
            return JSONResponse({"error": {"code": "THREAD_NOT_FOUND"}}, status_code=404)
        return JSONResponse({"messages": record, "next": None})

    async def run(self, request: Request) -> Response:
        if "refuses-everything" in self.faults:
            return JSONResponse({"error": {"code": "REFUSED", "message": "not today"}}, status_code=400)
        body = json.loads(await request.body())
        thread, run = body["threadId"], body["runId"]
        if "endless-stream" in self.faults:
            started = {"type": "RUN_STARTED", "threadId": thread, "runId": run, "protocolVersion": "1.0"}
            opened = {"type": "TEXT_MESSAGE_START", "messageId": "endless", "role": "assistant"}
            text = {"type": "TEXT_MESSAGE_CONTENT", "messageId": "endless", "delta": "x" * 960}
            first, then = (
                b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in part) for part in ((started, opened), (text,))
            )
            return StreamingResponse(self._endless(first, then), media_type="text/event-stream")
        events = [
            {"type": "RUN_STARTED", "threadId": thread, "runId": run, "protocolVersion": "1.0"},
            *self._turn(thread, body),
        ]
        if events[-1]["type"] != "RUN_ERROR":
            self._remember(thread, body["messages"])
            events.append({"type": "RUN_FINISHED", "threadId": thread, "runId": run, **self._outcome(thread, events)})
        return Response("".join(f"data: {json.dumps(e)}\n\n" for e in events), media_type="text/event-stream")

    def _remember(self, thread: str, messages: list[Event]) -> None:
        """Keep the client's new messages: a message already kept, or a second answer to a call, is left out."""
        record = self.record.setdefault(thread, [])
        if "keeps-history" in self.faults:
            record[:] = [dict(m) for m in messages] + [m for m in record if m["id"] not in {n["id"] for n in messages}]
            return
        for message in messages:
            answered = {m.get("toolCallId") for m in record if m.get("role") == "tool"}
            if message["id"] in {m["id"] for m in record}:
                continue
            if message.get("role") == "tool" and message.get("toolCallId") in answered:
                continue
            record.append(dict(message))

    def _turn(self, thread: str, body: dict[str, Any]) -> Iterator[Event]:
        if "every-run-fails" in self.faults or ("first-run-fails" in self.faults and not self.started):
            self.started = True
            yield {"type": "RUN_ERROR", "code": "WARMING_UP", "message": "try again"}
            return
        if "stateless" in self.faults:
            self.open[thread] = self._open_in(body["messages"])
        if body.get("resume"):
            yield from self._resume(thread, body["resume"])
            return
        last = body["messages"][-1]
        if last["role"] == "user" and self.faults & {"invents-answers", "invents-in-record"}:
            yield from self._invent(thread, body["messages"])
        if last["role"] == "tool":
            yield from _text(f"Thanks: {last['content']}" if "echoes-answers" in self.faults else "Thanks.")
        elif self.open.get(thread) and "stateless" not in self.faults:
            yield {"type": "RUN_ERROR", "code": "RESUME_REQUIRED", "message": "answer the open interrupt first"}
        elif "refund" in str(last.get("content")) and "refuses-approvals" in self.faults:
            yield {"type": "RUN_ERROR", "code": "NO_REFUNDS", "message": "refunds are off"}
        elif "refund" in str(last.get("content")) and "never-interrupts" in self.faults:
            yield from _text("Shall I refund it? Say yes to go ahead.")
        elif "refund" in str(last.get("content")):
            self.approved[thread] = []
            tool = "navigate" if "approval-is-client" in self.faults else "refund_order"
            for order in re.findall(r"\b[A-Z]\d+\b", str(last["content"])) or ["A1"]:
                yield from self._refund(thread, tool, order)
        elif "go to" in str(last.get("content")):
            yield from self._call("navigate", '{"page": "settings"}')
        else:
            yield from _text("Hello.")

    def _invent(self, thread: str, messages: list[Event]) -> Iterator[Event]:
        """Answer every call the history leaves open, as a server that repairs history for its model and keeps it."""
        self.open.pop(thread, None)
        answered = {m.get("toolCallId") for m in messages if m.get("role") == "tool"}
        calls = [c["id"] for m in messages if m.get("role") == "assistant" for c in m.get("toolCalls") or []]
        for call_id in (c for c in calls if c not in answered):
            if "invents-answers" in self.faults:
                yield from self._result(thread, call_id, MISSING)
            else:
                self.record.setdefault(thread, []).append(
                    {"id": _id("missing"), "role": "tool", "toolCallId": call_id, "content": MISSING}
                )

    def _refund(self, thread: str, tool: str, order: str) -> Iterator[Event]:
        call_id = _id("call")
        yield from self._call(tool, json.dumps({"order_id": order}), call_id)
        if "runs-unasked" in self.faults:
            self.executions[thread] += 1
            yield from self._result(thread, call_id, "refunded A1")
            return
        interrupt_id = f"int-{call_id}" if "stateless" in self.faults else _id("int")
        interrupt: Event = {"id": interrupt_id, "reason": "tool_call", "toolCallId": call_id}
        interrupt["responseSchema"] = APPROVAL
        if "recursive-schema" in self.faults:
            interrupt["responseSchema"] = {"$ref": "#"}
        if "bare-boolean" in self.faults:
            interrupt["responseSchema"] = {"type": "boolean"}
        if "enum-decision" in self.faults:
            interrupt["responseSchema"] = DECISION
        if "names-no-call" in self.faults:
            del interrupt["toolCallId"]
        if "adk-metadata" in self.faults:
            confirm = _id("confirm")
            yield from self._call("adk_request_confirmation", "{}", confirm)
            interrupt |= {"toolCallId": confirm, "metadata": {"adk": {"originalFunctionCall": {"id": call_id}}}}
        self.open.setdefault(thread, {})[interrupt["id"]] = call_id
        self.interrupts[interrupt["id"]] = interrupt
        self.pending.append(interrupt)

    def _resume(self, thread: str, entries: list[Event]) -> Iterator[Event]:
        opened = self.open.get(thread, {})
        if "reruns-first" in self.faults:
            for rerun in self.approved.get(thread, []):
                self.executions[thread] += 1
                yield from self._result(thread, rerun, "refunded")
        answered = {entry["interruptId"] for entry in entries}
        for entry in entries:
            call_id = opened.get(entry["interruptId"])
            if call_id is None and "any-id" in self.faults and opened:
                call_id = next(iter(opened.values()))
            if call_id is None and self.faults & {"stateless", "unknown-warns"}:
                yield {"type": "CUSTOM", "name": "warning", "value": f"passed over {entry['interruptId']}"}
                continue
            if call_id is None:
                yield {"type": "RUN_ERROR", "code": "RESUME_UNKNOWN_INTERRUPT", "message": "no such interrupt"}
                return
            approved = self._approved(entry.get("payload"))
            if entry.get("status") == "resolved" and approved is None:
                yield {"type": "RUN_ERROR", "code": "RESUME_PAYLOAD_INVALID", "message": "not the answer asked for"}
                return
            if "not-once" not in self.faults:
                opened.pop(entry["interruptId"], None)
            ran = entry.get("status") == "resolved" and approved is True
            self.executions[thread] += ran
            self.approved.setdefault(thread, []).extend([call_id] if ran else [])
            yield from self._result(thread, call_id, "refunded A1" if ran else "The user denied this call.")
        self.pending = [self.interrupts[i] for i in opened if i not in answered]
        yield from _text("Done.")

    def _open_in(self, messages: list[Event]) -> dict[str, str]:
        """The refund calls a history leaves without a result, by the interrupt id a stateless target gives each."""
        answered = {m.get("toolCallId") for m in messages if m.get("role") == "tool"}
        calls = [c for m in messages if m.get("role") == "assistant" for c in m.get("toolCalls") or []]
        refunds = [c["id"] for c in calls if c["function"]["name"] == "refund_order" and c["id"] not in answered]
        return {f"int-{call_id}": call_id for call_id in refunds}

    def _approved(self, payload: Any) -> bool | None:
        """What a resolved payload says, read as the interrupt's schema asks; None for a payload of another shape."""
        if "bare-boolean" in self.faults:
            return payload if isinstance(payload, bool) else None
        given = payload if isinstance(payload, dict) else {}
        if "enum-decision" in self.faults:
            fits = set(given) == {"decision", "note"} and given["decision"] in ("approve", "reject")
            return given["decision"] == "approve" if fits else None
        if "invalid-is-denial" in self.faults and not isinstance(given.get("approved"), bool):
            return False
        approved = given.get("approved")
        return approved if isinstance(approved, bool) else None

    def _result(self, thread: str, call_id: str, content: str) -> Iterator[Event]:
        message_id = _id("result")
        if "reuses-result-ids" in self.faults:
            message_id = self.result_ids.setdefault(call_id, message_id)
        message = {"id": message_id, "role": "tool", "toolCallId": call_id, "content": content}
        self.record.setdefault(thread, []).append(message)
        if "snapshot-only" in self.faults:
            yield {"type": "MESSAGES_SNAPSHOT", "messages": [message]}
        elif "silent" not in self.faults:
            result = {"type": "TOOL_CALL_RESULT", "messageId": message["id"], "toolCallId": call_id, "content": content}
            if "no-message-ids" in self.faults:
                del result["messageId"]
            yield result

    def _call(self, name: str, arguments: str, call_id: str | None = None) -> Iterator[Event]:
        call_id = call_id or _id("call")
        if "chunk-only" in self.faults:
            yield {"type": "TOOL_CALL_CHUNK", "toolCallId": call_id, "toolCallName": name, "delta": arguments[:1]}
            yield {"type": "TOOL_CALL_CHUNK", "delta": arguments[1:]}
            return
        yield {"type": "TOOL_CALL_START", "toolCallId": call_id, "toolCallName": name}
        yield {"type": "TOOL_CALL_ARGS", "toolCallId": call_id, "delta": arguments}
        yield {"type": "TOOL_CALL_END", "toolCallId": call_id}

    def _outcome(self, thread: str, events: list[Event]) -> Event:
        interrupts, self.pending = self.pending, []
        if interrupts:
            return {"outcome": {"type": "interrupt", "interrupts": interrupts}}
        kinds = ("TOOL_CALL_START", "TOOL_CALL_CHUNK")
        answered = {e["toolCallId"] for e in events if e["type"] == "TOOL_CALL_RESULT"}
        calls = [e["toolCallId"] for e in events if e["type"] in kinds and e.get("toolCallId") not in answered | {None}]
        return {"outcome": {"type": "success", "pendingToolCallIds": calls}} if calls else {}


def _text(text: str) -> Iterator[Event]:
    message_id = _id("msg")
    yield {"type": "TEXT_MESSAGE_START", "messageId": message_id, "role": "assistant"}
    yield {"type": "TEXT_MESSAGE_CONTENT", "messageId": message_id, "delta": text}
    yield {"type": "TEXT_MESSAGE_END", "messageId": message_id}
