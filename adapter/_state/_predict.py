"""Predictive state updates: a tool whose arguments write part of the state, shown as the model streams them.

The mechanism is CopilotKit's, which AG-UI integrations share (LangGraph's `predict_state` metadata,
pydantic-ai's and the Dojo's `predictive_state_updates` agents, Microsoft Agent Framework's
`predict_state_config`):

- a `CUSTOM` event named `PredictState` whose value lists `{"state_key", "tool", "tool_argument"}`
  entries comes before the tool's call; CopilotKit's `useCoAgent` (packages/v1/react-core/src/hooks/
  use-coagent.ts) then mirrors the call's streamed `TOOL_CALL_ARGS` into `state[state_key]`;
- for every other client, `STATE_DELTA` events set `/state_key` to the argument's partial value as
  the arguments stream (Microsoft Agent Framework's `PredictiveStateHandler` does the same).

See https://docs.copilotkit.ai/langgraph-python/shared-state/predictive-state-updates and
https://learn.microsoft.com/en-us/agent-framework/integrations/ag-ui/state-management.

Each delta says what changed since the last one (`changes`): new object members and array items are
added, changed ones replaced, so a growing list costs what it adds. RFC 6902 cannot append to a string,
so a growing string is sent whole each time. To keep the bytes linear in the arguments all the same,
the streamed deltas share a budget: together they send at most `DELTA_BUDGET` bytes per byte of arguments
received, and a delta that does not fit waits (the arguments are parsed again at most about every
`COALESCE_CHARS` characters, and only while `PARSE_BUDGET` allows). The last delta, when the arguments are
complete, always goes: with it, a call's deltas send at most about `DELTA_BUDGET + 1` times its arguments'
size. A long document therefore shows each time it has about doubled, plus when it is done; CopilotKit
mirrors every `TOOL_CALL_ARGS` piece itself. The prediction is kept only if the call succeeds
(`adapter._state._shared.commit`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ag_ui.core import BaseEvent, CustomEvent, StateDeltaEvent
from pydantic_core import from_json

from adapter._jsonpatch import pointer as json_pointer
from adapter._state._shared import Operation

log = logging.getLogger("adapter.predict")

PREDICT_STATE: Final = "PredictState"
"""The CUSTOM event's name, as CopilotKit reads it."""
COALESCE_CHARS: Final = 200
"""The fewest characters of streamed arguments between two predicted STATE_DELTAs."""
DELTA_BUDGET: Final = 2
"""Bytes of streamed STATE_DELTA operations per byte of arguments received so far."""
PARSE_BUDGET: Final = 8
"""Characters parsed per character of arguments received so far: parsing is linear too."""
_ABSENT = object()
_FRAME: Final = len(f"data: {StateDeltaEvent(delta=[]).model_dump_json(by_alias=True)}\n\n")
"""The bytes a STATE_DELTA takes on the wire besides its operations."""


@dataclass(frozen=True, slots=True)
class PredictState:
    """A tool whose arguments write `state[state_key]`: the argument `tool_argument`, or all of them when None.

    The model's streamed arguments show in the state at once; once the call succeeds they stay (a
    server tool that ran without error, a client tool whose answer was not `cancelled`).
    """

    tool: str
    state_key: str
    tool_argument: str | None = None

    def payload(self) -> dict[str, str]:
        """The entry as CopilotKit's `PredictState` event lists it."""
        entry = {"state_key": self.state_key, "tool": self.tool}
        return entry | ({"tool_argument": self.tool_argument} if self.tool_argument is not None else {})

    def value(self, arguments: Mapping[str, Any]) -> Any:
        """What the arguments (perhaps partial) say for the state key; `_ABSENT` when nothing yet."""
        if self.tool_argument is None:
            return dict(arguments)
        return arguments.get(self.tool_argument, _ABSENT)


def pointer(key: str) -> str:
    """The JSON pointer of a top-level member."""
    return json_pointer([key])


def announce(entries: Sequence[PredictState]) -> CustomEvent:
    """The `PredictState` event that comes before a predicted call."""
    return CustomEvent(name=PREDICT_STATE, value=[entry.payload() for entry in entries])


class ArgsPrediction:
    """The state one call's arguments predict, followed as they stream."""

    def __init__(self, entries: Sequence[PredictState]) -> None:
        self.entries = list(entries)
        self._text: list[str] = []
        self._size = 0
        self._bytes = 0
        self._parsed_at = 0
        self._parsed = 0
        self._sent = 0
        self.shown: dict[str, Any] = {}
        self._whole: set[str] = set()
        """State keys the client may hold another value for: their next delta sends the value whole."""

    def feed(self, piece: str) -> list[BaseEvent]:
        """Take a piece of the arguments; a delta once enough has arrived since the last one, within the budget."""
        self._text.append(piece)
        self._size += len(piece)
        self._bytes += len(piece.encode(errors="surrogatepass"))
        if self._size - self._parsed_at < COALESCE_CHARS or self._parsed + self._size > PARSE_BUDGET * self._size:
            return []
        self._parsed_at = self._size
        self._parsed += self._size
        self._text = ["".join(self._text)]
        return self._deltas(_partial(self._text[0]), room=DELTA_BUDGET * self._bytes - self._sent)

    def finish(self, arguments: str) -> list[BaseEvent]:
        """The complete arguments: the last delta, if they say more than was shown."""
        try:
            parsed = json.loads(arguments or "{}")
        except ValueError:
            parsed = _partial(arguments)
        return self._deltas(parsed if isinstance(parsed, dict) else {}, room=None)

    def rebase(self) -> None:
        """Another state event reached the client: send each key whole next time."""
        self._whole.update(self.shown)

    @property
    def operations(self) -> list[Operation]:
        """The predicted change as patch operations: each state key set to its last shown value."""
        return [{"op": "add", "path": pointer(key), "value": value} for key, value in self.shown.items()]

    def _deltas(self, arguments: Mapping[str, Any], room: int | None) -> list[BaseEvent]:
        """The delta from what the client shows to what `arguments` say; none if it costs more than `room` bytes."""
        changed: dict[str, Any] = {}
        operations: list[Operation] = []
        for entry in self.entries:
            value = entry.value(arguments)
            if value is _ABSENT:
                continue
            key = entry.state_key
            ops = changes(self.shown.get(key, _ABSENT) if key not in self._whole else _ABSENT, value, pointer(key))
            if ops:
                changed[key] = value
                operations += ops
        if not operations:
            return []
        cost = _FRAME + _cost(operations)
        if room is not None and cost > room:
            return []
        self._sent += cost
        self.shown.update(changed)
        self._whole.difference_update(changed)
        return [StateDeltaEvent(delta=operations)]


def changes(shown: Any, value: Any, path: str) -> list[Operation]:
    """RFC 6902 operations from `shown` to `value` at `path`: what changed, or `value` whole when that is shorter."""
    whole: list[Operation] = [{"op": "add", "path": path, "value": value}]
    if shown is _ABSENT:
        return whole
    ops = _diff(shown, value, path)
    return whole if ops and len(ops) > 1 and _cost(ops) > _cost(whole) else ops


def _diff(old: Any, new: Any, path: str) -> list[Operation]:
    if isinstance(old, dict) and isinstance(new, dict):
        ops: list[Operation] = [{"op": "remove", "path": _at(path, key)} for key in old if key not in new]
        for key, value in new.items():
            at = _at(path, key)
            ops += _diff(old[key], value, at) if key in old else [{"op": "add", "path": at, "value": value}]
        return ops
    if isinstance(old, list) and isinstance(new, list) and len(old) <= len(new):
        ops = [op for i, (a, b) in enumerate(zip(old, new, strict=False)) for op in _diff(a, b, f"{path}/{i}")]
        return ops + [{"op": "add", "path": f"{path}/{i}", "value": v} for i, v in enumerate(new[len(old) :], len(old))]
    if type(old) is type(new) and old == new:
        return []
    return [{"op": "replace", "path": path, "value": new}]


def _at(path: str, key: str) -> str:
    return path + pointer(key)


def _cost(operations: list[Operation]) -> int:
    """The bytes the operations take on the wire, near enough."""
    return len(json.dumps(operations, ensure_ascii=False, separators=(",", ":")).encode(errors="surrogatepass"))


def _partial(text: str) -> dict[str, Any]:
    """As much of a JSON object as has arrived, its last string cut where the text ends."""
    try:
        parsed = from_json(text, allow_partial="trailing-strings")
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


class Predictor:
    """The predictions of one step's calls, by tool name; idle when the state is not a JSON object."""

    def __init__(self, entries: Sequence[PredictState] = (), state: Any = None) -> None:
        self._by_tool: dict[str, list[PredictState]] = {}
        if entries and not (state is None or isinstance(state, dict)):
            log.warning("the state is not a JSON object, so no tool's arguments can predict a key of it")
            entries = ()
        for entry in entries:
            self._by_tool.setdefault(entry.tool, []).append(entry)
        self._calls: dict[str, ArgsPrediction] = {}

    def start(self, call_id: str, name: str) -> list[BaseEvent]:
        """A call begins: the `PredictState` announcement, when its tool predicts state."""
        entries = self._by_tool.get(name)
        if not entries:
            return []
        self._calls[call_id] = ArgsPrediction(entries)
        return [announce(entries)]

    def feed(self, call_id: str, piece: str) -> list[BaseEvent]:
        """A piece of a call's arguments: the deltas it makes, if any."""
        prediction = self._calls.get(call_id)
        return prediction.feed(piece) if prediction else []

    def rebase(self) -> None:
        """Another STATE_SNAPSHOT or STATE_DELTA reached the client: each prediction's next delta is whole."""
        for prediction in self._calls.values():
            prediction.rebase()

    def finish(self, call_id: str, arguments: str) -> list[BaseEvent]:
        """A call's complete arguments: the last delta, if any."""
        prediction = self._calls.get(call_id)
        return prediction.finish(arguments) if prediction else []

    def operations(self) -> dict[str, list[Operation]]:
        """Each predicting call's change to the state, by call id."""
        return {call_id: p.operations for call_id, p in self._calls.items() if p.operations}


def predicted_operations(entries: Sequence[PredictState], name: str, arguments: str) -> list[Operation]:
    """The state change a call's complete arguments predict (for arguments a person edited)."""
    prediction = ArgsPrediction([entry for entry in entries if entry.tool == name])
    prediction.finish(arguments)
    return prediction.operations
