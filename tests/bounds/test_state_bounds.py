"""Applying a state patch costs in proportion to the patch, not to the state.

Work is counted in the units of the patch budget (about a byte of JSON, each value 16 more): what a
`StateWork` measured and copied, and what `copy.deepcopy` was handed during a run.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from typing import Any

import pytest
from ag_ui.core import StateDeltaEvent, StateSnapshotEvent
from ag_ui_validate.protocol.jsonpatch import PatchOk
from ag_ui_validate.protocol.jsonpatch import apply_patch as reference
from agui import run_events, run_input, user
from hypothesis import given
from hypothesis import strategies as st

from adapter import Adapter
from adapter._jsonpatch import (  # private on purpose: the patch engine and its counters
    PatchedDocument,
    PatchError,
    StateWork,
    _measure,
)
from adapter._run._translate import Step  # private on purpose: where a backend's state events are followed
from adapter.backends import BackendItem, ModelRequest, Passthrough, TextDelta

KEYS = st.sampled_from(["a", "b", "c", "d"])
VALUES = st.recursive(
    st.none() | st.integers(-5, 5) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=16,
)
DOCUMENTS = st.dictionaries(KEYS, VALUES, max_size=4)
PATHS = st.lists(KEYS | st.sampled_from(["0", "1", "2", "-"]), max_size=3).map(
    lambda tokens: "".join(f"/{t}" for t in tokens)
)
OPERATIONS = st.one_of(
    st.builds(
        lambda op, path, value: {"op": op, "path": path, "value": value},
        st.sampled_from(["add", "replace", "test"]),
        PATHS,
        VALUES,
    ),
    st.builds(lambda path: {"op": "remove", "path": path}, PATHS),
    st.builds(
        lambda op, source, path: {"op": op, "from": source, "path": path},
        st.sampled_from(["move", "copy"]),
        PATHS,
        PATHS,
    ),
)
PATCHES = st.lists(OPERATIONS, min_size=1, max_size=5)


@given(document=DOCUMENTS, patch=PATCHES)
def test_a_patch_applied_in_place_is_the_patch_a_client_applies(document: dict[str, Any], patch: list[Any]) -> None:
    """In place, atomically, with the size kept: the same document as ag-ui-validate's RFC 6902 builds, or none."""
    target = PatchedDocument(copy.deepcopy(document), max_bytes=10**9, owned=True)
    expected = reference(document, patch)
    try:
        target.apply(patch)
    except PatchError:
        assert target.value == document
    else:
        assert isinstance(expected, PatchOk)
        assert target.value == expected.result

    assert target.size == _measure(target.value)


@given(document=DOCUMENTS, patches=st.lists(PATCHES, max_size=12))
def test_the_work_of_a_run_of_patches_is_in_proportion_to_the_patches(
    document: dict[str, Any], patches: list[list[Any]]
) -> None:
    """Measured and copied: at most thrice the document once, the patches, and what the budget was charged.

    A value a patch removes is measured once it is gone, and only if the patch applied: each value leaves at
    most once after it entered, so a patch that removes the whole state and then fails costs no more than itself.
    """
    work = StateWork(10**9)
    target = PatchedDocument(document, max_bytes=10**9, work=work)
    for patch in patches:
        try:
            target.apply(patch)
        except PatchError:
            pass
        assert target.size == _measure(target.value)

    brought = _measure(document) + sum(_measure(patch) for patch in patches)
    assert work.measured + work.copied <= 3 * (brought + work.charged)


@given(items=st.integers(0, 2_000), value=VALUES, key=KEYS)
def test_one_small_delta_on_a_large_state_costs_the_delta(items: int, value: Any, key: str) -> None:
    work = StateWork(10**9)
    target = PatchedDocument({"items": ["x" * 40] * items, "n": 0}, max_bytes=10**9, work=work, owned=True)
    target.apply([{"op": "add", "path": "/n", "value": 1}])  # the first patch measures the state, once
    before = work.measured + work.copied

    delta = [{"op": "add", "path": f"/{key}", "value": value}]
    target.apply(delta)

    assert work.measured + work.copied - before <= 2 * _measure(delta) + (_measure({key: 0}) if key == "n" else 0)


@given(limit=st.integers(1, 200_000), rounds=st.integers(1, 40))
def test_copies_that_patches_do_not_bring_are_charged_to_the_steps_limit(limit: int, rounds: int) -> None:
    """A copy and a remove, again and again: each patch is tiny, each copies the large value once."""
    step = Step("msg", state={"big": ["y" * 100] * 50}, max_state_bytes=10**6, state_work=StateWork(limit))
    loop = [{"op": "copy", "from": "/big", "path": "/again"}, {"op": "remove", "path": "/again"}]
    try:
        for _ in range(rounds):
            step.track(StateDeltaEvent(delta=loop))
    except Exception as refused:
        assert getattr(refused, "code", None) == "STATE_PATCH_TOO_LARGE"

    assert step.state_work is not None
    assert step.state_work.charged <= limit


class BigStateThenDeltas:
    """An upstream's shape from the issue: one state snapshot of megabytes, then one-value STATE_DELTAs."""

    def __init__(self, snapshot: dict[str, Any], deltas: int) -> None:
        self.snapshot = snapshot
        self.deltas = deltas

    async def stream(self, request: ModelRequest) -> AsyncIterator[BackendItem]:
        yield Passthrough(StateSnapshotEvent(snapshot=self.snapshot))
        for number in range(self.deltas):
            yield Passthrough(StateDeltaEvent(delta=[{"op": "replace", "path": "/count", "value": number}]))
        yield TextDelta("done")


async def test_one_value_deltas_after_a_large_snapshot_copy_nothing_but_themselves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The issue's 3.5 MB snapshot and 40 deltas: each delta copied and measured the whole state (0.29 s)."""
    snapshot = {"rows": [{"id": n, "text": "z" * 100} for n in range(25_000)], "count": -1}
    copied: list[int] = []
    deepcopy = copy.deepcopy

    def counting(value: Any, memo: Any = None) -> Any:
        if memo is None:  # a copy begins; deepcopy's own recursion passes its memo
            copied.append(_measure(value))
        return deepcopy(value, memo)

    monkeypatch.setattr(copy, "deepcopy", counting)
    events = await run_events(Adapter(BigStateThenDeltas(snapshot, 40)), run_input("t", [user("hi")]))

    assert [e["type"] for e in events].count("STATE_DELTA") == 40
    assert sum(copied) <= 2 * _measure(snapshot) + 40 * 1_000
