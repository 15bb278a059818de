"""The kit's AG-UI client: POST one `RunAgentInput`, read the SSE body, keep a thread's messages as a consumer does."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import httpx
from starlette.types import ASGIApp

Event: TypeAlias = dict[str, Any]
Target: TypeAlias = "str | ASGIApp"
"""An AG-UI endpoint URL, or an ASGI app served in-process (its run route at `/`)."""

_IN_PROCESS = "http://conformance.invalid/"


def new_id(prefix: str) -> str:
    """A fresh opaque id, recognisable as the kit's."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def parse_sse(body: bytes) -> tuple[list[Event], list[str]]:
    """The events of an SSE body and its framing problems (TRANS-3/4/7)."""
    problems = ["CR in the body: frames must be LF-only"] if b"\r" in body else []
    frames = body.decode("utf-8", errors="replace").replace("\r", "").split("\n\n")
    if frames[-1].strip():
        problems.append(f"the body ends in a partial frame: {frames[-1][:60]!r}")
    events: list[Event] = []
    for frame in frames[:-1]:
        data = [line[5:].removeprefix(" ") for line in frame.split("\n") if line.startswith("data:")]
        if not data:
            continue
        try:
            event = json.loads("\n".join(data))
        except ValueError:
            problems.append(f"data is not JSON: {data[0][:60]!r}")
            continue
        if isinstance(event, dict) and isinstance(event.get("type"), str):
            events.append(event)
        else:
            problems.append(f"data is not one event object: {data[0][:60]!r}")
    return events, problems


@dataclass
class Reply:
    """One POST's answer: HTTP status and content type, and for a stream its events."""

    status: int
    content_type: str
    body: bytes
    events: list[Event] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def is_stream(self) -> bool:
        """True for a 200 `text/event-stream` answer."""
        return self.status == 200 and self.content_type.startswith("text/event-stream")

    def of(self, kind: str) -> list[Event]:
        """The events of one type, in order."""
        return [event for event in self.events if event.get("type") == kind]

    @property
    def finished(self) -> Event | None:
        """The RUN_FINISHED event, if any."""
        return next(iter(self.of("RUN_FINISHED")), None)

    @property
    def error(self) -> Event | None:
        """The RUN_ERROR event, if any."""
        return next(iter(self.of("RUN_ERROR")), None)

    @property
    def outcome(self) -> dict[str, Any] | None:
        """The RUN_FINISHED outcome (an absent outcome reads as success); None when the run did not finish."""
        finished = self.finished
        if finished is None or self.error is not None:
            return None
        outcome = finished.get("outcome") or {"type": "success"}
        return outcome if isinstance(outcome, dict) else {"type": str(outcome)}

    @property
    def interrupts(self) -> list[dict[str, Any]]:
        """The interrupts of an interrupt outcome; empty for any other ending."""
        outcome = self.outcome
        if outcome is None or outcome.get("type") != "interrupt":
            return []
        return [each for each in outcome.get("interrupts") or [] if isinstance(each, dict)]

    def calls(self, name: str | None = None) -> list[Event]:
        """TOOL_CALL_START events, of one tool when `name` is given."""
        return [e for e in self.of("TOOL_CALL_START") if name is None or e.get("toolCallName") == name]

    def results(self, tool_call_id: str) -> list[Event]:
        """TOOL_CALL_RESULT events that answer one call."""
        return [e for e in self.of("TOOL_CALL_RESULT") if e.get("toolCallId") == tool_call_id]

    def ending(self) -> str:
        """How the exchange ended, in a few words: for evidence lines."""
        if not self.is_stream:
            return f"HTTP {self.status}"
        if self.error is not None:
            return f"RUN_ERROR {self.error.get('code') or ''}".strip()
        outcome = self.outcome
        if outcome is None:
            return "a stream without a terminal event"
        if outcome.get("type") == "interrupt":
            return f"an interrupt outcome ({', '.join(str(i.get('id')) for i in self.interrupts)})"
        pending = outcome.get("pendingToolCallIds")
        return f"{outcome.get('type')} outcome" + (f" pending {pending}" if pending else "")


@dataclass
class Exchange:
    """One request the kit made and what came back, kept for the stream-wide cases."""

    case: str
    body: dict[str, Any]
    reply: Reply

    @property
    def resumed(self) -> bool:
        """True when the request carried resume entries or answered calls (AGUI207 is then a false positive)."""
        return bool(self.body.get("resume")) or any(m.get("role") == "tool" for m in self.body.get("messages", []))


class Client:
    """Posts run inputs to one target and records every exchange."""

    def __init__(self, target: Target, *, timeout: float = 60.0) -> None:
        if isinstance(target, str):
            self.url = target
            self.http = httpx.AsyncClient(timeout=timeout)
        else:
            self.url = _IN_PROCESS
            self.http = httpx.AsyncClient(transport=httpx.ASGITransport(app=target), timeout=timeout)
        self.exchanges: list[Exchange] = []
        self.case = ""

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self.http.aclose()

    async def post(self, body: Mapping[str, Any]) -> Reply:
        """POST one input and read the whole answer."""
        headers = {"content-type": "application/json", "accept": "text/event-stream"}
        async with self.http.stream("POST", self.url, content=json.dumps(body), headers=headers) as response:
            raw = b"".join([chunk async for chunk in response.aiter_raw()])
        reply = Reply(response.status_code, response.headers.get("content-type", ""), raw)
        if reply.is_stream:
            reply.events, reply.problems = parse_sse(raw)
        self.exchanges.append(Exchange(self.case, dict(body), reply))
        return reply

    def thread(self, tools: Sequence[Mapping[str, Any]] = ()) -> Thread:
        """A conversation on a fresh thread."""
        return Thread(self, new_id("conformance-thread"), list(tools))


class Thread:
    """One thread's conversation, rebuilt from each finished run's events the way a consumer keeps it."""

    def __init__(self, client: Client, thread_id: str, tools: list[Mapping[str, Any]]) -> None:
        self.client = client
        self.id = thread_id
        self.tools = tools
        self.messages: list[dict[str, Any]] = []

    def body(self, *, resume: Sequence[Mapping[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
        """The next input as it stands, with a fresh run id."""
        body: dict[str, Any] = {
            "threadId": self.id,
            "runId": new_id("conformance-run"),
            "messages": [dict(message) for message in self.messages],
            "tools": [dict(tool) for tool in self.tools],
            "context": [],
            "state": {},
            "forwardedProps": {},
            "protocolVersion": "1.0",
        }
        if resume is not None:
            body["resume"] = [dict(entry) for entry in resume]
        body.update(extra)
        return body

    async def say(self, text: str) -> Reply:
        """Send a new user message."""
        self.messages.append({"id": new_id("user"), "role": "user", "content": text})
        return await self.send(self.body())

    async def resume(self, *entries: Mapping[str, Any]) -> Reply:
        """Answer interrupts with resume entries."""
        return await self.send(self.body(resume=entries))

    async def answer(self, tool_call_id: str, content: str, *, error: str | None = None) -> Reply:
        """Answer a pending call with a ToolMessage, AG-UI's ordinary frontend-tool path."""
        message = {"id": new_id("tool"), "role": "tool", "toolCallId": tool_call_id, "content": content}
        if error is not None:
            message["error"] = error
        self.messages.append(message)
        return await self.send(self.body())

    async def send(self, body: Mapping[str, Any]) -> Reply:
        """POST `body`; a run that finishes moves the conversation on."""
        reply = await self.client.post(body)
        if reply.outcome is not None:
            self.messages = apply_events(self.messages, reply.events)
        return reply


def resolved(interrupt_id: str, payload: Any) -> dict[str, Any]:
    """A resume entry that answers an interrupt."""
    return {"interruptId": interrupt_id, "status": "resolved", "payload": payload}


def cancelled(interrupt_id: str) -> dict[str, Any]:
    """A resume entry that abandons an interrupt."""
    return {"interruptId": interrupt_id, "status": "cancelled"}


def apply_events(messages: Sequence[Mapping[str, Any]], events: Iterable[Event]) -> list[dict[str, Any]]:
    """The conversation after applying a run's events to `messages`: snapshots replace, triads append."""
    history = [dict(message) for message in messages]
    calls: dict[str, dict[str, Any]] = {}
    for event in events:
        kind = event.get("type")
        if kind == "MESSAGES_SNAPSHOT":
            history = [dict(m) for m in event.get("messages", []) if m.get("role") not in ("activity", "reasoning")]
        elif kind == "TEXT_MESSAGE_START":
            _message(history, event["messageId"])
        elif kind == "TEXT_MESSAGE_CONTENT":
            message = _message(history, event["messageId"])
            message["content"] = (message.get("content") or "") + event.get("delta", "")
        elif kind == "TOOL_CALL_START":
            call = {"id": event["toolCallId"], "type": "function", "function": {"name": event["toolCallName"]}}
            call["function"]["arguments"] = ""
            calls[call["id"]] = call
            parent = _message(history, event.get("parentMessageId") or new_id("assistant"))
            parent.setdefault("toolCalls", []).append(call)
        elif kind == "TOOL_CALL_ARGS" and event.get("toolCallId") in calls:
            calls[event["toolCallId"]]["function"]["arguments"] += event.get("delta", "")
        elif kind == "TOOL_CALL_RESULT" and not any(m.get("id") == event.get("messageId") for m in history):
            content = event.get("content", "")
            history.append(
                {"id": event["messageId"], "role": "tool", "toolCallId": event["toolCallId"], "content": content}
            )
    return history


def _message(history: list[dict[str, Any]], message_id: str) -> dict[str, Any]:
    for message in history:
        if message.get("id") == message_id:
            return message
    message = {"id": message_id, "role": "assistant"}
    history.append(message)
    return message
