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

Deltas are coalesced, one per `COALESCE_CHARS` characters of arguments and one at the end, so a
long document does not resend itself with every token. The prediction is kept only if the call
succeeds (`adapter._state.commit`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ag_ui.core import BaseEvent, CustomEvent, StateDeltaEvent
from pydantic_core import from_json

from adapter._state import Operation

log = logging.getLogger("adapter.predict")

PREDICT_STATE: Final = "PredictState"
"""The CUSTOM event's name, as CopilotKit reads it."""
COALESCE_CHARS: Final = 200
"""Characters of streamed arguments between two predicted STATE_DELTAs."""
_ABSENT = object()


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
    return "/" + key.replace("~", "~0").replace("/", "~1")


def announce(entries: Sequence[PredictState]) -> CustomEvent:
    """The `PredictState` event that comes before a predicted call."""
    return CustomEvent(name=PREDICT_STATE, value=[entry.payload() for entry in entries])


class ArgsPrediction:
    """The state one call's arguments predict, followed as they stream."""

    def __init__(self, entries: Sequence[PredictState]) -> None:
        self.entries = list(entries)
        self._text: list[str] = []
        self._size = 0
        self._parsed_at = 0
        self.shown: dict[str, Any] = {}

    def feed(self, piece: str) -> list[BaseEvent]:
        """Take a piece of the arguments; a delta once enough has arrived since the last one."""
        self._text.append(piece)
        self._size += len(piece)
        if self._size - self._parsed_at < COALESCE_CHARS:
            return []
        self._parsed_at = self._size
        return self._deltas(_partial("".join(self._text)))

    def finish(self, arguments: str) -> list[BaseEvent]:
        """The complete arguments: the last delta, if they say more than was shown."""
        try:
            parsed = json.loads(arguments or "{}")
        except ValueError:
            parsed = _partial(arguments)
        return self._deltas(parsed if isinstance(parsed, dict) else {})

    @property
    def operations(self) -> list[Operation]:
        """The predicted change as patch operations: each state key set to its last shown value."""
        return [{"op": "add", "path": pointer(key), "value": value} for key, value in self.shown.items()]

    def _deltas(self, arguments: Mapping[str, Any]) -> list[BaseEvent]:
        changes: list[Operation] = []
        for entry in self.entries:
            value = entry.value(arguments)
            if value is _ABSENT or self.shown.get(entry.state_key, _ABSENT) == value:
                continue
            self.shown[entry.state_key] = value
            changes.append({"op": "add", "path": pointer(entry.state_key), "value": value})
        return [StateDeltaEvent(delta=changes)] if changes else []


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
