"""A tool's state change is refused inside the tool when the engine could not send it, apply it or keep it.

The rule (adapter/_state/_shared.py): `patch_state` and `set_state` accept a change only if its `STATE_DELTA` or
`STATE_SNAPSHOT` event can be built and encoded, it applies, and the state stays within the nesting
limit. Otherwise the tool gets a `ValueError` and the state is unchanged; the run never fails after
the tool's side effects because of its state change.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest
from client_state import follow
from hypothesis import given, settings
from hypothesis import strategies as st

from adapter import Adapter, ToolContext, tool

# Private on purpose: the rule is checked against the state machinery, the limit and the framing it must agree with.
from adapter._edge._sse import encode_event
from adapter._limits import STATE_DEPTH, depth_exceeds
from adapter._state._shared import Kept, ToolState, commit
from adapter.backends import Call, Rule, ScriptedBackend

if TYPE_CHECKING:
    from conftest import Serve

SEEN: list[str] = []


@tool
def add_odd_item(ctx: ToolContext) -> str:
    """Adds an item under a key a person typed, as the review's tool did."""
    try:
        ctx.patch_state([{"op": "add", "path": "/cart/rock~n~roll", "value": 1}])
    except ValueError as refused:
        SEEN.append(str(refused))
        ctx.patch_state([{"op": "add", "path": "/cart/rock~0n~0roll", "value": 1}])  # the escaped key
    return "added"


@tool
def add_unescaped(ctx: ToolContext) -> str:
    """Does not catch the refusal: the call fails, the run goes on."""
    ctx.patch_state([{"op": "add", "path": "/cart/a~b", "value": 1}])
    return "never"


RULES = [Rule(r"odd", steps=[[Call("add_odd_item")]]), Rule(r"unescaped", steps=[[Call("add_unescaped")]])]


async def test_an_invalid_pointer_is_refused_inside_the_tool_and_the_run_finishes(serve: Serve) -> None:
    SEEN.clear()
    client = (await serve(Adapter(ScriptedBackend(RULES, fallback="ok"), tools=[add_odd_item]))).client
    thread = client.thread()

    reply = await thread.say("odd", state={"cart": {}})

    assert reply.outcome == {"type": "success"}
    assert len(SEEN) == 1
    assert "path" in SEEN[0]
    assert follow({"cart": {}}, reply.events) == {"cart": {"rock~n~roll": 1}}


async def test_a_tool_that_does_not_catch_the_refusal_fails_alone(serve: Serve) -> None:
    client = (await serve(Adapter(ScriptedBackend(RULES, fallback="ok"), tools=[add_unescaped]))).client

    reply = await client.thread().say("unescaped", state={"cart": {}})

    assert reply.outcome == {"type": "success"}
    (result,) = reply.results().values()
    assert "PatchError" in result["content"]  # a ValueError: the tool failed, not the run
    assert reply.of("STATE_DELTA") == []
    assert follow({"cart": {}}, reply.events) == {"cart": {}}


def deep(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("operations", "why"),
    [
        ([{"op": "add", "path": "/a~2", "value": 1}], "a ~ escape other than ~0 and ~1"),
        ([{"op": "add", "path": "/a~", "value": 1}], "a trailing ~"),
        ([{"op": "copy", "from": "/a~x", "path": "/b"}], "a bad from pointer"),
        ([{"op": "add", "path": "/s", "value": "\ud800"}], "a string with no UTF-8 form"),
        ([{"op": "add", "path": "/\udc00", "value": 1}], "a key with no UTF-8 form"),
        ([{"op": "add", "path": "/d", "value": deep(STATE_DEPTH)}], "a state nested too deeply"),
        ([{"op": "frobnicate", "path": "/x"}], "an unknown op"),
    ],
)
def test_what_the_engine_could_not_send_is_refused_at_patch_time(operations: Any, why: str) -> None:
    state = ToolState({"a": 1})

    with pytest.raises(ValueError):
        state.patch(operations)

    assert (state.value, state.operations, state.changed) == ({"a": 1}, [], False), why


def test_a_copy_or_move_that_would_nest_too_deeply_is_refused() -> None:
    state = ToolState({"a": deep(STATE_DEPTH - 1), "b": {}})  # exactly at the limit: the root and a's levels

    for op in ("copy", "move"):
        with pytest.raises(ValueError):
            state.patch([{"op": op, "from": "/a", "path": "/b/c"}])
    state.patch([{"op": "move", "from": "/a", "path": "/c"}])  # the same level is fine

    assert not depth_exceeds(state.value, STATE_DEPTH)
    assert depth_exceeds(state.value, STATE_DEPTH - 1)


def test_a_replacement_the_engine_could_not_send_is_refused() -> None:
    state = ToolState({"a": 1})

    for value in ({"s": "\ud800"}, {"d": deep(STATE_DEPTH)}):
        with pytest.raises(ValueError):
            state.replace(value)

    assert (state.value, state.changed) == ({"a": 1}, False)


_TOKENS = st.text(st.sampled_from(["a", "b", "~", "0", "1", "-", "/", "\ud800", "é"]), max_size=4)
_PATHS = st.lists(_TOKENS, max_size=3).map(lambda tokens: "".join("/" + token for token in tokens))
_VALUES = st.recursive(
    st.none() | st.integers(-3, 3) | st.text(st.sampled_from(["x", "~", "\ud800", "\x00"]), max_size=3),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(_TOKENS, inner, max_size=2),
    max_leaves=6,
)
_OPERATIONS = st.fixed_dictionaries(
    {"op": st.sampled_from(["add", "remove", "replace", "move", "copy", "test"]), "path": _PATHS},
    optional={"value": _VALUES | st.integers(STATE_DEPTH - 4, STATE_DEPTH + 1).map(deep), "from": _PATHS},
)


@settings(max_examples=400)
@given(start=_VALUES, operations=st.lists(_OPERATIONS, min_size=1, max_size=3))
def test_a_change_patch_state_accepts_is_one_the_client_receives_and_applies(start: Any, operations: Any) -> None:
    """Invariant: refused, and nothing changed; or accepted, encoded, and the client reaches the engine's state."""
    base = {"root": start}
    state = ToolState(base)
    try:
        state.patch(operations)
    except (ValueError, TypeError):
        assert (state.value, state.changed) == (base, False)
        return
    engine, events = commit(base, [Kept(tool=state)])
    frames = [encode_event(event).encode("utf-8") for event in events]  # raises on what cannot be sent
    wire = [json.loads(frame.removeprefix(b"data: ")) for frame in frames]
    assert engine == state.value
    assert follow(base, wire) == engine
    assert not depth_exceeds(engine, STATE_DEPTH)
