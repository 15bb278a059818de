"""Shared state as tools see and change it, and how a step's changes reach the run's state.

    ToolState   one tool call's view: read it, patch it (RFC 6902), or replace it whole
    commit      the changes of the calls that succeeded, applied in order, and the events that tell the client

A call's changes count only if the call succeeds: a tool that raises, asks for input, gets invalid
arguments or is declined leaves the state as it was. The model's predicted changes (see
`adapter._state._predict`) follow the same rule.

Patches apply in place to a `PatchedDocument` that copies a shared state once, before its first change,
not once per patch: a run whose state is megabytes pays for each small delta in proportion to the delta
(`adapter._jsonpatch`). A tool's view copies the run's state only once the tool reads or changes it.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ag_ui.core import BaseEvent, StateDeltaEvent, StateSnapshotEvent
from pydantic import ValidationError
from pydantic_core import PydanticSerializationError

from adapter._errors import STATE_PATCH_TOO_LARGE, AdapterError
from adapter._jsonpatch import MAX_PATCHED_BYTES, PatchedDocument, PatchError, PatchTooLarge, StateWork
from adapter._limits import STATE_DEPTH, depth_exceeds
from adapter._thread._record import OpenTurn, PendingCall
from adapter._types import JSON

log = logging.getLogger("adapter.state")

Operation = dict[str, Any]
"""One RFC 6902 operation, as JSON."""


def as_json(value: Any) -> JSON:
    """`value` as plain JSON (tuples become lists); a TypeError names what is not JSON."""
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise TypeError(f"state must be JSON: {exc}") from None


def shared(state: JSON, max_bytes: int = MAX_PATCHED_BYTES, work: StateWork | None = None) -> PatchedDocument:
    """A document over `state`, copied before its first change; no state yet counts as `{}` (SNAP-4)."""
    if state is None:
        return PatchedDocument({}, max_bytes=max_bytes, work=work, owned=True)
    return PatchedDocument(state, max_bytes=max_bytes, work=work)


class ToolState:
    """The run's state as one tool call sees it, with the changes the call makes to it.

    The run's state is shared, not copied, until the tool reads or changes it; `predicted` (the state its
    own arguments predicted) applies then, or not at all when it no longer applies.
    """

    def __init__(self, base: JSON, max_bytes: int = MAX_PATCHED_BYTES, predicted: Sequence[Operation] = ()) -> None:
        self._base = base
        self._predicted = list(predicted)
        self._document: PatchedDocument | None = None
        self._max_bytes = max_bytes
        self.operations: list[Operation] = []
        self.replaced = False

    @property
    def value(self) -> JSON:
        """The state, with this call's changes so far; a copy."""
        if self._document is None and not self._predicted:
            return copy.deepcopy(self._base)
        return copy.deepcopy(self._own().value)

    @property
    def changed(self) -> bool:
        """True once the call patched or replaced the state."""
        return self.replaced or bool(self.operations)

    def _own(self) -> PatchedDocument:
        if self._document is None:
            self._document = shared(self._base, self._max_bytes)
            try:
                self._document.apply(self._predicted)
            except PatchError:  # a prediction that no longer applies: the tool starts from the run's state
                self._document = PatchedDocument(self._base, max_bytes=self._max_bytes)
        return self._document

    def patch(self, operations: Sequence[Mapping[str, Any]]) -> None:
        """Apply RFC 6902 operations now; all or nothing.

        Raises:
            PatchError: The operations do not apply, or the engine could not send them or keep the result
                (an invalid pointer such as `/a~b`, a string with no UTF-8 form, a state nested too deeply),
                or they would build more than `Adapter(max_state_bytes=...)` (`PatchTooLarge`).
                Refused here, the tool sees the error, rather than the run failing after the tool's effects.
        """
        ops = as_json([dict(operation) for operation in operations])
        _check_sendable(lambda: StateDeltaEvent(delta=ops))
        if ops:
            document = self._own()
            if document.value is None:
                document.reset({}, owned=True)
            document.apply(ops, max_depth=STATE_DEPTH)
        self.operations.extend(ops)

    def replace(self, value: Any) -> None:
        """Make `value` the whole state.

        Raises:
            TypeError: `value` is not JSON.
            PatchError: The engine could not send it or keep it (as `patch`).
        """
        state = as_json(value)
        _check_depth(state)
        _check_sendable(lambda: StateSnapshotEvent(snapshot=state))
        self._document = PatchedDocument(state, max_bytes=self._max_bytes, owned=True)
        self.replaced = True


def _check_sendable(event: Callable[[], BaseEvent]) -> None:
    """Refuse a change whose event the engine could not build or encode: the event's own model decides."""
    try:
        event().model_dump_json(by_alias=True)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(part) for part in first["loc"])
        raise PatchError(f"not a state change a client can be sent: {where}: {first['msg']}") from None
    except PydanticSerializationError as exc:
        raise PatchError(f"not a state change a client can be sent: {exc}") from None


def _check_depth(state: JSON) -> None:
    if depth_exceeds(state, STATE_DEPTH):
        raise PatchError(f"the state would nest more than {STATE_DEPTH} levels deep")


@dataclass(slots=True)
class Kept:
    """A call that succeeded: the state its arguments predicted, and what the tool itself changed."""

    predicted: list[Operation] = field(default_factory=list)
    tool: ToolState | None = None


def commit(
    state: JSON, kept: Sequence[Kept], *, resync: bool = False, max_bytes: int = MAX_PATCHED_BYTES
) -> tuple[JSON, list[BaseEvent]]:
    """The state after the calls that succeeded, and the events that bring the client there.

    The client already shows every predicted change (streamed with the arguments), so predictions
    apply first, then each tool's own changes in call order, the order its STATE_DELTAs take. A
    whole-state replacement, a change that no longer applies (two calls at odds), or `resync` (a
    prediction the client shows was dropped) makes it one STATE_SNAPSHOT instead. `state` itself is
    not changed: it is copied once, before the first change.
    """
    snapshot = resync
    document = shared(state, max_bytes)
    for each in kept:
        try:
            document.apply(each.predicted)
        except PatchError:
            log.warning("a predicted state change no longer applies; it is dropped")
            snapshot = True
    deltas: list[BaseEvent] = []
    for each in kept:
        if each.tool is None or not each.tool.changed:
            continue
        if each.tool.replaced:
            document.reset(each.tool.value, owned=True)
            snapshot = True
            continue
        try:
            document.apply(each.tool.operations)
        except PatchError:
            log.warning("a tool's state change no longer applies after the other calls' changes; it is dropped")
            snapshot = True
            continue
        deltas.append(StateDeltaEvent(delta=each.tool.operations))
    state = document.value if document.changed else state
    if snapshot:
        return state, [StateSnapshotEvent(snapshot=state if state is not None else {})]
    return state, deltas


def advance_state(state: JSON, events: Sequence[BaseEvent], max_bytes: int = MAX_PATCHED_BYTES) -> JSON:
    """The state after a backend's STATE_SNAPSHOT and STATE_DELTA events; a delta that fails to apply is skipped.

    Raises:
        AdapterError: `STATE_PATCH_TOO_LARGE`, a delta that would build more than `max_bytes`.
    """
    document = shared(state, max_bytes)
    for event in events:
        follow(document, event)
    return document.value if document.changed else state


def follow(document: PatchedDocument, event: BaseEvent) -> None:
    """Move `document` by a backend's STATE_SNAPSHOT (copied: the event is sent on) or STATE_DELTA, in place.

    Raises:
        AdapterError: `STATE_PATCH_TOO_LARGE`, a delta that would build more than the document's `max_bytes`,
            or copy more than its `work` allows.
    """
    if isinstance(event, StateSnapshotEvent):
        document.reset(copy.deepcopy(event.snapshot), owned=True)
    elif isinstance(event, StateDeltaEvent):
        if document.value is None:
            document.reset({}, owned=True)
        try:
            document.apply(event.model_dump(mode="json", by_alias=True)["delta"])
        except PatchTooLarge as exc:
            raise AdapterError(f"The backend sent a state change that {exc}.", code=STATE_PATCH_TOO_LARGE) from None
        except PatchError:
            log.warning("a STATE_DELTA from the backend does not apply to the run's state; it is ignored")


def shown_state(state: JSON, pending: Sequence[PendingCall], max_bytes: int = MAX_PATCHED_BYTES) -> JSON:
    """The state as the client shows it while calls wait: the run's, with their predictions."""
    document = shared(state, max_bytes)
    for call in pending:
        try:
            document.apply(call.state_patch)
        except PatchError:
            log.warning("the prediction of waiting call %s no longer applies; it is not shown", call.tool_call_id)
    return document.value if document.changed else state


def resumed_state(
    turn: OpenTurn, kept: Sequence[Kept], max_bytes: int = MAX_PATCHED_BYTES
) -> tuple[JSON, list[BaseEvent]]:
    """The state once a turn's answers are applied, and one STATE_SNAPSHOT of it (the client's view is uncertain).

    No snapshot when the turn has no state and nothing changed it.
    """
    predicted = any(call.state_patch for call in turn.pending)
    changed = any(each.predicted or (each.tool is not None and each.tool.changed) for each in kept)
    if turn.state is None and not (predicted or changed):
        return None, []
    return commit(turn.state, kept, resync=True, max_bytes=max_bytes)
