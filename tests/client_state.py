"""The state a client holds, rebuilt from a run's STATE_SNAPSHOT and STATE_DELTA events the way a consumer does.

Deltas are applied with ag-ui-validate's RFC 6902 implementation, not the adapter's, so a test can
catch the adapter emitting a patch only its own implementation accepts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ag_ui_validate.protocol.jsonpatch import PatchOk, apply_patch


def follow(state: Any, events: Iterable[Mapping[str, Any]]) -> Any:
    """`state` after the events; a delta that does not apply fails the test (SNAP-4)."""
    for event in events:
        if event["type"] == "STATE_SNAPSHOT":
            state = event["snapshot"]
        elif event["type"] == "STATE_DELTA":
            applied = apply_patch(state if state is not None else {}, event["delta"])
            assert isinstance(applied, PatchOk), f"a STATE_DELTA does not apply: {applied}"
            state = applied.result
    return state


def states(state: Any, events: Iterable[Mapping[str, Any]]) -> list[Any]:
    """Every state the client shows, one per state event, in order."""
    shown = []
    for event in events:
        if event["type"] in ("STATE_SNAPSHOT", "STATE_DELTA"):
            state = follow(state, [event])
            shown.append(state)
    return shown
