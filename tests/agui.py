"""Black-box helpers for AG-UI streams: SSE parsing, shape checks, the baseline assertions, an HTTP client."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx
from ag_ui._generated.models import Event
from ag_ui.core import (
    BaseEvent,
    Interrupt,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
)
from ag_ui.encoder import EventEncoder
from ag_ui_validate.pytest_plugin import validate_agui
from pydantic import BaseModel, TypeAdapter, ValidationError

from adapter.client import AGUIClient, Lifecycle, fold_messages
from adapter.client import parse_sse as client_parse_sse

_EVENT = TypeAdapter(Event)
TERMINAL = frozenset({"RUN_FINISHED", "RUN_ERROR"})

# Slots where `null` is a legal value, or that hold open JSON (state, payloads, schemas, metadata values).
_OPEN_MEMBERS = frozenset({"rawEvent", "responseSchema", "parameters", "payload", "state", "snapshot"})
_OPEN_BY_EVENT = {
    "STATE_SNAPSHOT": frozenset({"snapshot"}),
    "STATE_DELTA": frozenset({"delta"}),
    "CUSTOM": frozenset({"value"}),
    "RAW": frozenset({"event"}),
    "ACTIVITY_SNAPSHOT": frozenset({"content"}),
    "ACTIVITY_DELTA": frozenset({"patch"}),
}


def parse_sse(body: bytes) -> tuple[list[dict[str, Any]], list[str], list[str]]:
    """Split an SSE body into events, comments and framing problems (TRANS-3/4/7), through `adapter.client`.

    Stricter than the client, for this adapter's own streams: one data line per event, and no other fields.
    """
    parsed = client_parse_sse(body)
    problems = list(parsed.problems)
    for frame in parsed.frames:
        problems += [f"frame {frame.index}: unexpected line {line[:80]!r}" for line in frame.strange]
        if len(frame.data) > 1:
            problems.append(f"frame {frame.index}: {len(frame.data)} data lines; one event is one line")
    return parsed.events, parsed.comments, problems


def nulls_in(value: Any, path: str = "", *, event_type: str | None = None) -> list[str]:
    """Paths of `null`s outside the slots where the protocol allows them (EVT-1)."""
    if value is None:
        return [path or "/"]
    found: list[str] = []
    if isinstance(value, Mapping):
        if event_type is None and isinstance(value.get("type"), str):
            event_type = value["type"]
        open_here = _OPEN_BY_EVENT.get(event_type or "", frozenset()) if not path else frozenset()
        for key, member in value.items():
            if key in open_here or key in _OPEN_MEMBERS:
                continue
            if key == "metadata":
                if member is None:
                    found.append(f"{path}/{key}")
                continue
            found += nulls_in(member, f"{path}/{key}", event_type=event_type)
        if value.get("role") == "activity":
            found = [p for p in found if not p.startswith(f"{path}/content")]
    elif isinstance(value, list):
        for index, member in enumerate(value):
            found += nulls_in(member, f"{path}/{index}", event_type=event_type)
    return found


def extras_in(model: Any, path: str = "") -> list[str]:
    """Paths of members a model does not describe, found through pydantic's `model_extra` (EVT-2)."""
    found: list[str] = []
    if isinstance(model, BaseModel):
        found += [f"{path}/{key}" for key in (model.model_extra or {})]
        for name in type(model).model_fields:
            found += extras_in(getattr(model, name), f"{path}/{name}")
    elif isinstance(model, list | tuple):
        for index, member in enumerate(model):
            found += extras_in(member, f"{path}/{index}")
    return found


def check_event_shape(event: Mapping[str, Any]) -> list[str]:
    """Everything wrong with one wire event: schema errors, undescribed members, stray nulls."""
    try:
        model = _EVENT.validate_python(event, by_alias=True, by_name=False)
    except ValidationError as error:
        return [f"{'/'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors(include_url=False)]
    return [f"undescribed member {p}" for p in extras_in(model)] + [f"null at {p}" for p in nulls_in(event)]


def split_runs(events: Sequence[Mapping[str, Any]]) -> list[list[dict[str, Any]]]:
    """One list per run: a run begins at RUN_STARTED, or with whatever comes first."""
    runs: list[list[dict[str, Any]]] = []
    for event in events:
        if event["type"] == "RUN_STARTED" or not runs:
            runs.append([])
        runs[-1].append(dict(event))
    return runs


def lifecycle_problems(run: Sequence[Mapping[str, Any]]) -> list[str]:
    """What breaks one run's lifecycle (LIFE-1..4), by `adapter.client`'s own `Lifecycle`, the table of what opens
    and what closes it: RUN_STARTED (or RUN_ERROR) first, one terminal event last, and every text message, tool
    call, step, reasoning span and subagent that starts also ends, before RUN_FINISHED and only once."""
    lifecycle = Lifecycle()
    problems = [problem for event in run for problem in lifecycle.feed(event)]
    return problems + lifecycle.close()


def severity_overrides(*, resumed: bool) -> dict[str, str]:
    """ag-ui-validate's false positives against 1.0, switched off or down (§14, §15); AGUI504: content parts."""
    overrides = {"AGUI105": "off", "AGUI204": "warning", "AGUI504": "off"}
    if resumed:
        overrides["AGUI207"] = "off"
    return overrides


def assert_clean_stream(body: bytes, *, resumed: bool = False) -> list[dict[str, Any]]:
    """The §14 baseline assertions for one captured stream; returns its events."""
    events, _, problems = parse_sse(body)
    assert problems == []
    assert events, "the stream carries no events"
    shapes = {index: check_event_shape(event) for index, event in enumerate(events)}
    assert {index: found for index, found in shapes.items() if found} == {}
    for run in split_runs(events):
        assert lifecycle_problems(run) == [], [event["type"] for event in run]
        finished = [event for event in run if event["type"] == "RUN_FINISHED"]
        if run[0]["type"] == "RUN_STARTED" and finished:
            started = run[0]
            assert (finished[0]["threadId"], finished[0]["runId"]) == (started["threadId"], started["runId"])
    assert events[-1]["type"] in TERMINAL
    report = validate_agui(events, severity_overrides=severity_overrides(resumed=resumed))
    findings = [f"{d.rule} at event {d.event_index}: {d.message}" for d in report.diagnostics if d.severity == "error"]
    assert report.summary.errors == 0, findings
    return events


async def collect(events: AsyncIterable[BaseEvent], *, resumed: bool = False) -> list[dict[str, Any]]:
    """A run's events as wire JSON, framed as SSE the way the HTTP layer frames them, after the baseline checks."""
    encoder = EventEncoder()
    body = "".join([encoder.encode(event) async for event in events]).encode()
    return assert_clean_stream(body, resumed=resumed)


class Runs(Protocol):
    """Anything that runs the agent for one input: an `Adapter`."""

    def run(self, run_input: RunAgentInput) -> AsyncIterable[BaseEvent]: ...


async def run_events(
    agent: Runs, body: Mapping[str, Any] | RunAgentInput, *, resumed: bool = False
) -> list[dict[str, Any]]:
    """Run `agent` in-process for one input (a `RunAgentInput` or its wire JSON) and `collect` its events."""
    run_agent_input = body if isinstance(body, RunAgentInput) else RunAgentInput.model_validate(body)
    return await collect(agent.run(run_agent_input), resumed=resumed)


def new_id(prefix: str) -> str:
    """A fresh opaque id."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def user(text: str) -> dict[str, Any]:
    """A user message as wire JSON."""
    return {"id": new_id("user"), "role": "user", "content": text}


def tool_answer(tool_call_id: str, content: str, *, error: str | None = None) -> dict[str, Any]:
    """A tool message answering `tool_call_id`, as wire JSON."""
    message = {"id": new_id("tool"), "role": "tool", "toolCallId": tool_call_id, "content": content}
    if error is not None:
        message["error"] = error
    return message


def frontend_tool(name: str, **properties: Any) -> dict[str, Any]:
    """A client-declared tool, as `RunAgentInput.tools` carries it."""
    return {
        "name": name,
        "description": f"The client's {name}.",
        "parameters": {"type": "object", "properties": properties or {}},
    }


ORDER = {"order": "A17", "status": "shipped", "total": 42.5}
"""What the scenarios' `lookup_order` tool finds."""

NAVIGATE = frontend_tool("navigate", path={"type": "string"})
SHOW_TOAST = frontend_tool("show_toast", text={"type": "string"})
CONFIRM_ACTION = frontend_tool("confirm_action", action={"type": "string"})
FRONTEND_TOOLS = [NAVIGATE, SHOW_TOAST, CONFIRM_ACTION]
"""The client tools of the scenarios (seed 002): page navigation, a toast, a yes/no confirmation."""


def run_input(
    thread_id: str,
    messages: Sequence[Mapping[str, Any]],
    *,
    tools: Sequence[Mapping[str, Any]] = (),
    resume: Sequence[Mapping[str, Any]] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A `RunAgentInput` as wire JSON, with a fresh run id."""
    body: dict[str, Any] = {
        "threadId": thread_id,
        "runId": new_id("run"),
        "messages": list(messages),
        "tools": list(tools),
        "context": [],
        "protocolVersion": "1.0",
    }
    if resume is not None:
        body["resume"] = list(resume)
    body.update(extra)
    return body


def interrupts_of(event: BaseEvent) -> list[Interrupt]:
    """The interrupts a typed RUN_FINISHED event opens; any other event or outcome fails the test."""
    assert isinstance(event, RunFinishedEvent), event
    assert isinstance(event.outcome, RunFinishedInterruptOutcome), event.outcome
    return list(event.outcome.interrupts)


def error_code(event: BaseEvent) -> str | None:
    """The code of a typed RUN_ERROR event; any other event fails the test."""
    assert isinstance(event, RunErrorEvent), event
    return event.code


def json_content(content: object) -> Any:
    """A message's text content, parsed as JSON; content that is not text (a list of parts) fails the test."""
    assert isinstance(content, str), content
    return json.loads(content)


def resolved(interrupt_id: str, payload: Any) -> dict[str, Any]:
    """A resume entry that answers an interrupt."""
    return {"interruptId": interrupt_id, "status": "resolved", "payload": payload}


def cancelled(interrupt_id: str) -> dict[str, Any]:
    """A resume entry that abandons an interrupt."""
    return {"interruptId": interrupt_id, "status": "cancelled"}


@dataclass
class Reply:
    """One POST's answer: the status, headers, raw body and, for a stream, its events."""

    status: int
    headers: httpx.Headers
    body: bytes
    events: list[dict[str, Any]] = field(default_factory=list)

    @property
    def types(self) -> list[str]:
        """The event types in order."""
        return [event["type"] for event in self.events]

    def of(self, kind: str) -> list[dict[str, Any]]:
        """The events of one type, in order."""
        return [event for event in self.events if event["type"] == kind]

    def index(self, kind: str) -> int:
        """The position of the first event of `kind`."""
        return self.types.index(kind)

    def with_call(self, tool_call_id: str) -> list[dict[str, Any]]:
        """Every event that names this tool call."""
        return [event for event in self.events if event.get("toolCallId") == tool_call_id]

    @property
    def started(self) -> dict[str, Any]:
        """The RUN_STARTED event."""
        (event,) = self.of("RUN_STARTED")
        return event

    @property
    def finished(self) -> dict[str, Any]:
        """The RUN_FINISHED event."""
        (event,) = self.of("RUN_FINISHED")
        return event

    def refusal(self, status: int) -> dict[str, Any]:
        """The error body of a request refused with `status` before any stream opened."""
        assert (self.status, self.events) == (status, []), self.body[:300]
        error: dict[str, Any] = json.loads(self.body)["error"]
        return error

    @property
    def error(self) -> dict[str, Any]:
        """The RUN_ERROR event."""
        (event,) = self.of("RUN_ERROR")
        return event

    @property
    def outcome(self) -> dict[str, Any]:
        """The RUN_FINISHED outcome; an absent outcome reads as success."""
        outcome: dict[str, Any] = self.finished.get("outcome", {"type": "success"})
        return outcome

    @property
    def interrupts(self) -> list[dict[str, Any]]:
        """The interrupts of an interrupt outcome."""
        assert self.outcome["type"] == "interrupt", self.outcome
        return list(self.outcome["interrupts"])

    @property
    def calls(self) -> list[dict[str, Any]]:
        """The TOOL_CALL_START events."""
        return self.of("TOOL_CALL_START")

    def results(self) -> dict[str, dict[str, Any]]:
        """TOOL_CALL_RESULT events by tool call id."""
        return {event["toolCallId"]: event for event in self.of("TOOL_CALL_RESULT")}

    @property
    def text(self) -> str:
        """All assistant text of the stream, assembled."""
        return "".join(event["delta"] for event in self.of("TEXT_MESSAGE_CONTENT"))

    @property
    def snapshot(self) -> list[dict[str, Any]]:
        """The messages of the last MESSAGES_SNAPSHOT."""
        return list(self.of("MESSAGES_SNAPSHOT")[-1]["messages"])


def apply_events(messages: Sequence[Mapping[str, Any]], events: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The conversation as a client holds it after applying `events` to `messages` (`adapter.client`)."""
    return fold_messages(messages, events)


class Client:
    """Posts run inputs to a served adapter over real HTTP and reads the SSE stream as it arrives."""

    def __init__(self, http: httpx.AsyncClient, base_url: str) -> None:
        self.http = http
        self.base_url = base_url
        self.agui = AGUIClient(base_url + "/", http=http, strict=False)

    async def post(self, body: Mapping[str, Any] | bytes, *, resumed: bool = False, clean: bool = True) -> Reply:
        """POST one input through `adapter.client`; a 200 stream gets the baseline assertions unless not `clean`."""
        run = await self.agui.run(body)
        reply = Reply(run.status, run.headers, run.body)
        if run.is_stream:
            if clean:
                assert run.problems == [], run.problems
                reply.events = assert_clean_stream(run.body, resumed=resumed)
            else:
                reply.events = run.wire
        return reply

    async def get(self, path: str) -> httpx.Response:
        """GET a route of the sub-app."""
        return await self.http.get(self.base_url + path)

    def thread(self, *, tools: Sequence[Mapping[str, Any]] = (), thread_id: str | None = None) -> Thread:
        """A conversation on a new thread, kept the way a client keeps it."""
        return Thread(self, thread_id or new_id("thread"), list(tools))


class Thread:
    """One thread's conversation as a consumer keeps it: messages rebuilt from each run's events."""

    def __init__(self, client: Client, thread_id: str, tools: list[Mapping[str, Any]]) -> None:
        self.client = client
        self.id = thread_id
        self.tools = tools
        self.messages: list[dict[str, Any]] = []
        self.replies: list[Reply] = []

    async def say(self, text: str, **extra: Any) -> Reply:
        """Send a new user message."""
        self.messages.append(user(text))
        return await self.send(**extra)

    async def resume(self, *entries: Mapping[str, Any], **extra: Any) -> Reply:
        """Answer interrupts with resume entries."""
        return await self.send(resume=list(entries), **extra)

    async def answer(self, tool_call_id: str, content: Any, **extra: Any) -> Reply:
        """Answer a pending frontend call with a ToolMessage, as the frontend-tool path does."""
        text = content if isinstance(content, str) else json.dumps(content)
        self.messages.append(tool_answer(tool_call_id, text))
        return await self.send(**extra)

    async def send(self, *, resumed: bool | None = None, clean: bool = True, **extra: Any) -> Reply:
        """POST the conversation as it stands, then apply the reply's events to it."""
        body = run_input(self.id, self.messages, tools=self.tools, **extra)
        is_resume = resumed if resumed is not None else bool(extra.get("resume"))
        reply = await self.client.post(body, resumed=is_resume, clean=clean)
        if reply.status == 200 and "RUN_FINISHED" in reply.types:
            self.messages = apply_events(self.messages, reply.events)
        self.replies.append(reply)
        return reply


def http_scope(headers: list[tuple[bytes, bytes]]) -> dict[str, Any]:
    """An ASGI scope for `POST /`, for tests that drive the app with hand-written `receive` and `send`."""
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/",
        "raw_path": b"/",
        "root_path": "",
        "query_string": b"",
        "headers": headers,
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
    }
