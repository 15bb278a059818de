"""RFC 6902 patches, as STATE_DELTA events apply them to the run's state."""

from __future__ import annotations

from typing import Any

import pytest

from adapter._jsonpatch import PatchError, apply_patch  # private on purpose: the RFC 6902 engine, unit by unit

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
