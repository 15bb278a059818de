"""RFC 6902 patches, as STATE_DELTA events apply them to the run's state."""

from __future__ import annotations

import tracemalloc
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

# Private on purpose: the RFC 6902 engine unit by unit, and a tool's patch without a run around it.
from adapter._jsonpatch import PatchError, PatchTooLarge, apply_patch
from adapter._state._shared import ToolState

DOC = {"a": 1, "list": [1, 2, 3], "nested": {"b": {"c": "d"}}, "a/b": "slash", "m~n": "tilde"}


@pytest.mark.parametrize(
    ("patch", "expected"),
    [
        pytest.param([{"op": "add", "path": "/x", "value": 5}], {**DOC, "x": 5}, id="add-member"),
        pytest.param([{"op": "add", "path": "/list/1", "value": 9}], {**DOC, "list": [1, 9, 2, 3]}, id="add-insert"),
        pytest.param([{"op": "add", "path": "/list/-", "value": 4}], {**DOC, "list": [1, 2, 3, 4]}, id="add-append"),
        pytest.param([{"op": "remove", "path": "/list/0"}], {**DOC, "list": [2, 3]}, id="remove-item"),
        pytest.param([{"op": "replace", "path": "/a", "value": [1]}], {**DOC, "a": [1]}, id="replace"),
        pytest.param([{"op": "replace", "path": "", "value": 7}], 7, id="replace-root"),
        pytest.param(
            [{"op": "move", "from": "/nested/b", "path": "/b"}], {**DOC, "nested": {}, "b": {"c": "d"}}, id="move"
        ),
        pytest.param([{"op": "copy", "from": "/a", "path": "/list/0"}], {**DOC, "list": [1, 1, 2, 3]}, id="copy"),
        pytest.param([{"op": "test", "path": "/nested/b/c", "value": "d"}], DOC, id="test-passes"),
        pytest.param([{"op": "replace", "path": "/a~1b", "value": 0}], {**DOC, "a/b": 0}, id="escaped-slash"),
        pytest.param([{"op": "remove", "path": "/m~0n"}], {k: v for k, v in DOC.items() if k != "m~n"}, id="tilde"),
    ],
)
def test_patches_apply(patch: list[dict[str, Any]], expected: Any) -> None:
    assert apply_patch(DOC, patch) == expected


@pytest.mark.parametrize(
    "patch",
    [
        pytest.param([{"op": "remove", "path": "/missing"}], id="remove-missing"),
        pytest.param([{"op": "replace", "path": "/missing", "value": 1}], id="replace-missing"),
        pytest.param([{"op": "add", "path": "/list/9", "value": 1}], id="index-out-of-range"),
        pytest.param([{"op": "add", "path": "/list/01", "value": 1}], id="leading-zero"),
        pytest.param([{"op": "test", "path": "/a", "value": 2}], id="test-fails"),
        pytest.param([{"op": "add", "path": "a", "value": 1}], id="not-a-pointer"),
        pytest.param([{"op": "add", "path": "/rock~n~roll", "value": 1}], id="tilde-not-escaped"),
        pytest.param([{"op": "add", "path": "/a~", "value": 1}], id="tilde-at-the-end"),
        pytest.param([{"op": "copy", "from": "/a~2", "path": "/b"}], id="tilde-in-from"),
        pytest.param([{"op": "frobnicate", "path": "/a"}], id="unknown-op"),
        pytest.param([{"op": "add", "path": "/x"}], id="no-value"),
        pytest.param(["add"], id="not-an-operation"),
    ],
)
def test_bad_patches_are_refused_and_change_nothing(patch: list[Any]) -> None:
    before = repr(DOC)
    with pytest.raises(PatchError):
        apply_patch(DOC, [{"op": "add", "path": "/first", "value": 1}, *patch])
    assert repr(DOC) == before


def size(value: Any) -> int:
    """What the patch budget counts for `value`: its strings and keys, and 16 for each value and member."""
    if isinstance(value, str):
        return 16 + len(value)
    if isinstance(value, dict):
        return 16 + sum(16 + len(key) + size(item) for key, item in value.items())
    if isinstance(value, list):
        return 16 + sum(size(item) for item in value)
    return 16


def doubling(times: int) -> list[dict[str, Any]]:
    """A copy bomb: each operation copies the whole list into itself."""
    return [{"op": "copy", "from": "/a", "path": "/a/-"} for _ in range(times)]


def test_a_copy_bomb_is_refused_before_it_is_built() -> None:
    document = {"a": ["tiny"] * 10}
    tracemalloc.start()
    try:
        with pytest.raises(PatchTooLarge) as refused:
            apply_patch(document, doubling(21), max_bytes=1024 * 1024)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()

    assert refused.value.code == "STATE_PATCH_TOO_LARGE"
    assert isinstance(refused.value, ValueError)
    assert peak < 16 * 1024 * 1024
    assert document == {"a": ["tiny"] * 10}


OPERATIONS = st.one_of(
    st.builds(
        lambda s, t: {"op": "copy", "from": s, "path": t},
        st.sampled_from(["", "/a", "/b"]),
        st.sampled_from(["/a", "/b", "/c", "/a/-"]),
    ),
    st.builds(
        lambda t, v: {"op": "add", "path": t, "value": v}, st.sampled_from(["/a", "/b", "/b/-"]), st.text(max_size=200)
    ),
    st.builds(
        lambda s, t: {"op": "move", "from": s, "path": t}, st.sampled_from(["/a", "/b"]), st.sampled_from(["/c", "/d"])
    ),
)


@settings(max_examples=150)
@given(patch=st.lists(OPERATIONS, max_size=25), budget=st.integers(min_value=16, max_value=20_000))
def test_an_applied_patch_never_builds_more_than_its_budget(patch: list[dict[str, Any]], budget: int) -> None:
    document = {"a": ["x", "y"], "b": []}
    try:
        result = apply_patch(document, patch, max_bytes=budget)
    except PatchError:
        return
    assert size(result) <= budget


def test_a_tools_patch_state_gets_the_refusal_and_its_state_is_unchanged() -> None:
    state = ToolState({"a": ["tiny"] * 10}, max_bytes=64 * 1024)

    with pytest.raises(ValueError, match="exceed"):
        state.patch(doubling(21))

    assert (state.value, state.changed) == ({"a": ["tiny"] * 10}, False)
