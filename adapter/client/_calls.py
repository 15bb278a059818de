"""Tool calls assembled from a stream: START/ARGS/END triads and TOOL_CALL_CHUNK runs.

Chunks are read exactly as the adapter's upstream reader reads them (adapter/backends/_upstream_events.py):
a chunk names its call, or continues the call the previous chunk built; a chunk naming another call ends
the one before; any event that is not a chunk ends the chunked call; a chunk that starts a call must name
its tool. `tests/clients/test_client.py` holds the two readers to the same calls.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(slots=True)
class StreamedCall:
    """One tool call the stream made: its id, tool name, arguments as streamed, and the message that made it."""

    id: str
    name: str
    arguments: str = ""
    parent_message_id: str | None = None
    chunked: bool = False
    """True when the call came as TOOL_CALL_CHUNK events rather than a START/ARGS/END triad."""
    ended: bool = False


class CallReader:
    """Feeds on wire events; `calls` holds every call in the order it started, `problems` what did not add up.

    `joined`: the events start after the run's first ones (a reattach after an event id), so arguments may come
    for a call that started before them; they are not assembled, and not a problem.
    """

    def __init__(self, *, joined: bool = False) -> None:
        self.joined = joined
        self.calls: list[StreamedCall] = []
        self.problems: list[str] = []
        self._open: dict[str, StreamedCall] = {}
        self._chunked: str | None = None

    def feed(self, event: Mapping[str, Any]) -> StreamedCall | None:
        """Take one event; returns the call it started, if it started one."""
        kind = event.get("type")
        if self._chunked is not None and kind != "TOOL_CALL_CHUNK":
            self._end(self._chunked)
        if kind == "TOOL_CALL_START":
            return self._start(str(event.get("toolCallId")), str(event.get("toolCallName")), event, chunked=False)
        if kind == "TOOL_CALL_ARGS":
            call = self._open.get(str(event.get("toolCallId")))
            if call is None and not self.joined:
                self.problems.append(f"TOOL_CALL_ARGS for a call that is not open: {event.get('toolCallId')} (TOOL-1)")
            elif call is not None:
                call.arguments += str(event.get("delta") or "")
        elif kind == "TOOL_CALL_END":
            self._end(str(event.get("toolCallId")))
        elif kind == "TOOL_CALL_CHUNK":
            return self._chunk(event)
        return None

    def get(self, call_id: str) -> StreamedCall | None:
        """The latest call with this id."""
        return next((call for call in reversed(self.calls) if call.id == call_id), None)

    @property
    def open(self) -> list[StreamedCall]:
        """Calls started and not yet ended."""
        return list(self._open.values())

    def _chunk(self, event: Mapping[str, Any]) -> StreamedCall | None:
        call_id = event.get("toolCallId") or self._chunked
        if call_id is None:
            if not self.joined:
                self.problems.append("a TOOL_CALL_CHUNK that names no call and continues none (TOOL-1)")
            return None
        if self._chunked is not None and call_id != self._chunked:
            self._end(self._chunked)
        started = None
        if call_id not in self._open:
            name = event.get("toolCallName")
            if not name:
                if not self.joined:  # joined: the rest of a call that started before
                    self.problems.append(f"a TOOL_CALL_CHUNK starts {call_id} without a toolCallName (TOOL-1)")
                return None
            started = self._start(str(call_id), str(name), event, chunked=True)
        self._chunked = str(call_id)
        self._open[str(call_id)].arguments += str(event.get("delta") or "")
        return started

    def _start(self, call_id: str, name: str, event: Mapping[str, Any], *, chunked: bool) -> StreamedCall:
        parent = event.get("parentMessageId")
        call = StreamedCall(call_id, name, "", str(parent) if parent else None, chunked)
        self._open[call_id] = call
        self.calls.append(call)
        return call

    def _end(self, call_id: str) -> None:
        if self._chunked == call_id:
            self._chunked = None
        call = self._open.pop(call_id, None)
        if call is not None:  # an END for no open call is the lifecycle check's to report (LIFE-4)
            call.ended = True
