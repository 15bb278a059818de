"""One run as the client read it.

The HTTP answer, the events (wire JSON and `ag_ui.core` models), the calls, the outcome, every problem found on
the way, and the last event id read (where a reattach goes on from).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
from ag_ui.core import BaseEvent, Event, Interrupt
from pydantic import TypeAdapter, ValidationError

from adapter.client._calls import CallReader, StreamedCall
from adapter.client._enforce import enforce, version_warning
from adapter.client._lifecycle import Lifecycle
from adapter.client._limits import StreamLimits
from adapter.client._sse import Frame, SSEDecoder, event_of

_EVENT: TypeAdapter[Any] = TypeAdapter(Event)
_INTERRUPT = TypeAdapter(Interrupt)


@dataclass
class Run:
    """One request and what came back: a POST of an input, or a reattach (`input` then holds the ids it names).

    For a stream, `wire` holds each event object as sent, `events` the ones that match the protocol's
    models, and `problems` what broke framing, lifecycle or call assembly. A stream read across dropped
    connections is one `Run`: `chunks` holds the bytes of each as they arrived, `drops` what dropped each.
    """

    input: dict[str, Any]
    status: int = 0
    headers: httpx.Headers = field(default_factory=httpx.Headers)
    chunks: list[bytes] = field(default_factory=list)
    """The body as it arrived."""
    wire: list[dict[str, Any]] = field(default_factory=list)
    events: list[BaseEvent] = field(default_factory=list)
    frames: list[Frame] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    invalid: list[str] = field(default_factory=list)
    """Events that do not match the `ag_ui.core` models, by index and type."""
    stripped: dict[int, BaseEvent] = field(default_factory=dict)
    """The events the processing model stripped something from, by their index in `wire`, as handed on."""
    warnings: list[str] = field(default_factory=list)
    """What AG-UI 1.1's processing model left out of `events`, by index and type: an event of an unrecognised type
    (dropped), an undescribed property or union member (stripped), each with its path (`adapter.client._enforce`)."""
    reader: CallReader = field(default_factory=CallReader)
    stopped: str = ""
    """Why the client stopped reading: the limit (`max_bytes`, `event_timeout` ...), or `content_encoding` for a body
    that does not decompress; "" when it read the whole answer."""
    last_event_id: str | None = None
    """The `id:` of the last whole frame read (for a reattach after an id, that id until one comes); None without."""
    drops: list[str] = field(default_factory=list)
    """Each time the stream dropped before the run's end, why (a reset, a silence, an early end), and each reattach
    that failed; a reattach followed each, unless reading gave up there (`StreamDropped`)."""

    @property
    def body(self) -> bytes:
        """The whole body."""
        return b"".join(self.chunks)

    @property
    def content_type(self) -> str:
        """The response's Content-Type."""
        return str(self.headers.get("content-type", ""))

    @property
    def is_stream(self) -> bool:
        """True for a 200 `text/event-stream` answer."""
        return self.status == 200 and self.content_type.startswith("text/event-stream")

    def handed(self) -> list[dict[str, Any]]:
        """The wire events as the client hands them on: an event it stripped something from, as stripped."""
        if not self.stripped:
            return self.wire
        return [
            self.stripped[i].model_dump(mode="json", by_alias=True, exclude_unset=True) if i in self.stripped else e
            for i, e in enumerate(self.wire)
        ]

    def of(self, kind: str) -> list[dict[str, Any]]:
        """The wire events of one type, in order."""
        return [event for event in self.wire if event.get("type") == kind]

    @property
    def finished(self) -> dict[str, Any] | None:
        """The RUN_FINISHED event, if any."""
        return next(iter(self.of("RUN_FINISHED")), None)

    @property
    def error(self) -> dict[str, Any] | None:
        """The RUN_ERROR event, if any."""
        return next(iter(self.of("RUN_ERROR")), None)

    @property
    def outcome(self) -> dict[str, Any] | None:
        """The RUN_FINISHED outcome as wire JSON (absent reads as success); None when the run did not finish."""
        finished = self.finished
        if finished is None or self.error is not None:
            return None
        outcome = finished.get("outcome") or {"type": "success"}
        return outcome if isinstance(outcome, dict) else {"type": str(outcome)}

    @property
    def interrupts(self) -> list[Interrupt]:
        """The interrupts of an interrupt outcome; empty for any other ending."""
        found: list[Interrupt] = []
        for each in self.wire_interrupts:
            try:
                found.append(_INTERRUPT.validate_python(each))
            except ValidationError:
                continue  # counted in `invalid` with its RUN_FINISHED
        return found

    @property
    def wire_interrupts(self) -> list[dict[str, Any]]:
        """The interrupts of an interrupt outcome, as wire JSON."""
        outcome = self.outcome
        if outcome is None or outcome.get("type") != "interrupt":
            return []
        return [each for each in outcome.get("interrupts") or [] if isinstance(each, dict)]

    @property
    def pending_tool_call_ids(self) -> list[str] | None:
        """`pendingToolCallIds` of a success outcome: the calls the client must answer with a ToolMessage."""
        outcome = self.outcome
        pending = outcome.get("pendingToolCallIds") if outcome and outcome.get("type") == "success" else None
        return [str(each) for each in pending] if isinstance(pending, list) else None

    @property
    def calls(self) -> list[StreamedCall]:
        """Every tool call the stream made, from triads and chunks alike."""
        return list(self.reader.calls)

    def results(self, tool_call_id: str) -> list[dict[str, Any]]:
        """The TOOL_CALL_RESULT events that answer one call."""
        return [e for e in self.of("TOOL_CALL_RESULT") if e.get("toolCallId") == tool_call_id]

    @property
    def text(self) -> str:
        """All streamed text, assembled."""
        kinds = ("TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_CHUNK")
        return "".join(str(e.get("delta") or "") for e in self.wire if e.get("type") in kinds)

    def ending(self) -> str:
        """How the exchange ended, in a few words."""
        if not self.is_stream:
            return f"HTTP {self.status}"
        if self.stopped:
            return f"a stream cut off at {self.stopped}"
        if self.error is not None:
            return f"RUN_ERROR {self.error.get('code') or ''}".strip()
        outcome = self.outcome
        if outcome is None:
            return "a stream without a terminal event"
        if outcome.get("type") == "interrupt":
            return f"an interrupt outcome ({', '.join(str(i.get('id')) for i in self.wire_interrupts)})"
        pending = outcome.get("pendingToolCallIds")
        return f"{outcome.get('type')} outcome" + (f" pending {pending}" if pending else "")


class RunReader:
    """Fills a `Run` from the bytes of its body as they arrive, checking as it goes.

    `joined`: the body starts after the run's first events (a reattach after an id; `Lifecycle`). `numbered`: the
    events' ids are the run's event numbers, 1, 2, 3, ..., which reattaching relies on: each id must be the one
    after the last read, an event at or before it is not taken again, and either is a problem.
    """

    def __init__(
        self, run: Run, limits: StreamLimits | None = None, *, joined: bool = False, numbered: bool = False
    ) -> None:
        self.run = run
        self.decoder = SSEDecoder(limits=limits)
        self.lifecycle = Lifecycle(_str(run.input.get("threadId")), _str(run.input.get("runId")), joined=joined)
        self.numbered = numbered

    @property
    def ended(self) -> bool:
        """The run's terminal event was read."""
        return self.lifecycle.terminal is not None

    def feed(self, chunk: bytes) -> list[BaseEvent]:
        """The protocol events `chunk` completes; problems go to the run."""
        run = self.run
        known = len(self.decoder.problems)
        frames = self.decoder.feed(chunk)  # first: a chunk past a limit is not kept
        run.chunks.append(chunk)
        typed: list[BaseEvent] = []
        for frame in frames:
            typed += self._frame(frame)
        run.problems += self.decoder.problems[known:]
        return typed

    def _frame(self, frame: Frame) -> list[BaseEvent]:
        self.run.frames.append(frame)
        if frame.id is not None and not self._numbered(frame.id):
            return []
        event, problem = event_of(frame)
        if problem is not None:
            self.run.problems.append(problem)
        return self._event(event) if event is not None else []

    def _numbered(self, given: str) -> bool:
        """Take a frame's id as the last read; False for a frame to leave out (with `numbered`, one read already)."""
        run = self.run
        if self.numbered:
            last, number = _number(run.last_event_id or "0"), _number(given)
            if number is None:
                run.problems.append(f"event id {given[:20]!r} is not one of the run's event numbers, 1, 2, 3, ...")
            elif last is not None and number != last + 1:
                twice = number <= last
                run.problems.append(
                    f"event id {number} after {last}: the run's events come once each, numbered with no gap"
                    + (" (left out: it was read already)" if twice else "")
                )
                if twice:
                    return False
        run.last_event_id = given
        return True

    def close(self) -> list[BaseEvent]:
        """The body ended: the protocol events its end completes; problems go to the run."""
        known = len(self.decoder.problems)
        typed = [event for frame in self.decoder.close() for event in self._frame(frame)]
        self.run.problems += self.decoder.problems[known:] + self.lifecycle.close()
        return typed

    def _event(self, event: dict[str, Any]) -> list[BaseEvent]:
        run = self.run
        run.wire.append(event)
        run.problems += self.lifecycle.feed(event)
        known = len(run.reader.problems)
        run.reader.feed(event)
        run.problems += run.reader.problems[known:]
        enforced = enforce(event)
        index = len(run.wire) - 1
        if event.get("type") == "RUN_STARTED" and (newer := version_warning(event.get("protocolVersion"))):
            enforced.warnings.append(newer)
        run.warnings += [f"event {index} ({event.get('type')}): {warning}" for warning in enforced.warnings]
        if enforced.problem is not None:
            run.invalid.append(f"event {index} ({event.get('type')}): {enforced.problem} (EVT-2)")
        if enforced.model is None:
            return []
        if enforced.warnings:
            run.stripped[index] = enforced.model
        run.events.append(enforced.model)
        return [enforced.model]


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _number(text: str) -> int | None:
    """An event id as the run's event number; None for one that is not a whole number."""
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 18 else None


def wire_input(run_input: Mapping[str, Any] | BaseEvent | Any) -> dict[str, Any]:
    """A `RunAgentInput` (model or mapping) as wire JSON."""
    if isinstance(run_input, Mapping):
        return dict(run_input)
    dumped: dict[str, Any] = run_input.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dumped
