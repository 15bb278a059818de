"""The run's lifecycle, checked as the events arrive.

One RUN_STARTED first, one terminal event to each run, and every text message, tool call, step and reasoning span
that starts also ends before RUN_FINISHED. After a run closes, only a new run (RUN_STARTED) may follow, or, after
RUN_FINISHED, a late RUN_ERROR reporting a failure that surfaced after success (LIFE-3; AG-UI 1.0 and 1.1).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

TERMINAL: Final = frozenset({"RUN_FINISHED", "RUN_ERROR"})
_OPENERS: Final = {
    "TEXT_MESSAGE_START": ("text message", "messageId"),
    "TOOL_CALL_START": ("tool call", "toolCallId"),
    "STEP_STARTED": ("step", "stepName"),
    "REASONING_START": ("reasoning", "messageId"),
    "REASONING_MESSAGE_START": ("reasoning message", "messageId"),
    "SUBAGENT_STARTED": ("subagent", "subagentRunId"),
}
_CONTINUERS: Final = {
    "TEXT_MESSAGE_CONTENT": ("text message", "messageId"),
    "TOOL_CALL_ARGS": ("tool call", "toolCallId"),
    "REASONING_MESSAGE_CONTENT": ("reasoning message", "messageId"),
}
"""What continues an open item: its opener must have come, and it belongs to the opener's subagent."""
_LANES: Final[dict[str, tuple[str, dict[str, str | None], str]]] = {
    "TEXT_MESSAGE_CHUNK": ("messageId", {"role": "assistant"}, "TXT-5"),
    "REASONING_MESSAGE_CHUNK": ("messageId", {"role": "reasoning"}, "TXT-5"),
    "TOOL_CALL_CHUNK": ("toolCallId", {"toolCallName": None, "parentMessageId": None}, "TOOL-7"),
}
"""The chunked forms: the key their first chunk must carry, and the fields (with their defaults) a continuation may
repeat only unchanged."""
_CLOSERS: Final = {
    "TEXT_MESSAGE_END": ("text message", "messageId"),
    "TOOL_CALL_END": ("tool call", "toolCallId"),
    "STEP_FINISHED": ("step", "stepName"),
    "REASONING_END": ("reasoning", "messageId"),
    "REASONING_MESSAGE_END": ("reasoning message", "messageId"),
    "SUBAGENT_FINISHED": ("subagent", "subagentRunId"),
    "SUBAGENT_ERROR": ("subagent", "subagentRunId"),
}


class Lifecycle:
    """Feeds on one run's wire events and says what breaks the lifecycle rules (LIFE-1..4), each with its rule id.

    `joined`: the events start after the run's first ones (a reattach after an event id), so RUN_STARTED is not
    expected first, and an item may end that started before them.
    """

    def __init__(self, thread_id: str | None = None, run_id: str | None = None, *, joined: bool = False) -> None:
        self.expected = (thread_id, run_id)
        self.joined = joined
        self.seen = 0
        self.started = 0
        self.terminal: str | None = None
        self.opened: dict[tuple[str, str], Any] = {}
        """Each open item, with the subagentRunId its opener named (None: the run's own)."""
        self.late = False
        """A late RUN_ERROR came after RUN_FINISHED: the run closed twice, as 1.0 allows once."""
        self.run_ids: list[Any] = []
        """The runId of each RUN_STARTED: a stream that replays history carries the runs before the one asked for."""
        self._active = False
        """Between a RUN_STARTED and its terminal event."""
        self._chunks: dict[str, tuple[Any, dict[str, Any]]] = {}
        """The open chunk stream of each chunked form: its item's id and the values a continuation may repeat."""

    def feed(self, event: Mapping[str, Any]) -> list[str]:
        """The problems this event shows."""
        kind = str(event.get("type"))
        problems: list[str] = []
        if self.seen == 0 and not self.joined and kind not in ("RUN_STARTED", "RUN_ERROR"):
            problems.append(f"the first event is {kind}, not RUN_STARTED (LIFE-1)")
        self.seen += 1
        if self.terminal is not None:
            if kind == "RUN_ERROR" and self.terminal == "RUN_FINISHED" and not self.late:
                self.late = True  # a failure that surfaced after success: the run failed after all
                self.terminal = kind
                return problems
            if kind != "RUN_STARTED":
                return [*problems, f"{kind} after {self.terminal} (LIFE-3)"]
            self.terminal, self.late = None, False  # a new run on the same stream, with nothing open
            self.opened.clear()
        problems += self._chunk(kind, event)
        if kind == "RUN_STARTED":
            problems += self._started(event)
        elif kind in TERMINAL:
            self.terminal, self._active = kind, False
            if kind == "RUN_FINISHED" and self.opened:
                shown = ", ".join(f"{item} {key}" for item, key in self.opened)
                problems.append(f"open at RUN_FINISHED: {shown} (LIFE-4)")
        elif kind in _OPENERS:
            item, key = _OPENERS[kind]
            self.opened[(item, str(event.get(key)))] = event.get("subagentRunId")
        elif kind in _CONTINUERS or kind in _CLOSERS:
            problems += self._continued(kind, event)
        return problems

    def _continued(self, kind: str, event: Mapping[str, Any]) -> list[str]:
        """A continuation or a closer: of an item that is open, and by the subagent that opened it (if it says)."""
        closing = kind in _CLOSERS
        item, key = _CLOSERS[kind] if closing else _CONTINUERS[kind]
        name = (item, str(event.get(key)))
        if name not in self.opened:
            return [] if self.joined else [f"{kind} for a {item} that is not open: {event.get(key)} (LIFE-4)"]
        owner = self.opened.pop(name) if closing else self.opened[name]
        said = event.get("subagentRunId")
        if item != "subagent" and said is not None and said != owner:
            return [f"{kind} subagentRunId {said!r} does not match its opener's {owner!r} (TXT-5, TOOL-3)"]
        return []

    def _chunk(self, kind: str, event: Mapping[str, Any]) -> list[str]:
        """A chunk opens its stream (naming its item) or continues the open one; any other event but RAW ends it."""
        if kind == "RAW":
            return []  # stands aside from chunk assembly (AG-UI 1.1, streaming)
        self._chunks = {lane: opened for lane, opened in self._chunks.items() if lane == kind}
        if kind not in _LANES:
            return []
        key, repeated, rule = _LANES[kind]
        opened, given = self._chunks.get(kind), event.get(key)
        if given is None and opened is None:
            return [f"the first {kind} of a stream has no {key} ({rule})"]
        if opened is None or (given is not None and given != opened[0]):
            self._chunks[kind] = (given, {name: event.get(name) or default for name, default in repeated.items()})
            if kind == "TOOL_CALL_CHUNK" and not event.get("toolCallName"):
                return [f"the first {kind} of call {given} has no toolCallName ({rule})"]
            return []
        return [
            f"{kind} {name} {event[name]!r} does not match the open stream's {name} {opened[1][name]!r} ({rule})"
            for name in repeated
            if event.get(name) is not None and opened[1][name] is not None and event[name] != opened[1][name]
        ]

    def close(self) -> list[str]:
        """The stream ended: without a terminal event, that is a problem."""
        if self.seen == 0:
            return ["an empty stream (LIFE-1)"]
        if not self.terminal:
            return ["the stream ended without RUN_FINISHED or RUN_ERROR (LIFE-3)"]
        _, run_id = self.expected
        if run_id is not None and self.run_ids and run_id not in self.run_ids:  # earlier runs replay history
            return ["RUN_STARTED does not echo the input's threadId and runId (LIFE-2)"]
        return []

    def _started(self, event: Mapping[str, Any]) -> list[str]:
        self.started += 1
        if self._active:
            return ["a RUN_STARTED while a run is active (LIFE-5)"]
        self._active = True
        thread_id, run_id = self.expected
        self.run_ids.append(event.get("runId"))
        if thread_id is not None and event.get("threadId") != thread_id:
            return ["RUN_STARTED does not echo the input's threadId and runId (LIFE-2)"]
        return []
