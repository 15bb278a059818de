"""The internals of shared state on purpose: a tool's view of it, committing a step's changes, predictions."""

from __future__ import annotations

import json
from typing import Any

import pytest
from ag_ui.core import BaseEvent, StateDeltaEvent, StateSnapshotEvent
from client_state import follow, states
from hypothesis import given, settings
from hypothesis import strategies as st

from adapter import PredictState

# Private on purpose: these test the state machinery below the public API, unit by unit.
from adapter._edge._sse import encode_event
from adapter._jsonpatch import PatchError
from adapter._state._predict import COALESCE_CHARS, ArgsPrediction, Predictor, announce
from adapter._state._shared import Kept, ToolState, advance_state, commit, resumed_state
from adapter._thread._record import OpenTurn, PendingCall
from adapter.client import parse_sse

ADD_A = {"op": "add", "path": "/a", "value": 1}


def test_a_tool_sees_its_own_changes_and_never_the_original_mutated() -> None:
    base = {"steps": [{"status": "pending"}]}
    state = ToolState(base)

    state.patch([{"op": "replace", "path": "/steps/0/status", "value": "completed"}])
    seen = state.value
    seen["steps"].clear()

    assert state.value == {"steps": [{"status": "completed"}]}
    assert base == {"steps": [{"status": "pending"}]}


def test_a_patch_that_does_not_apply_changes_nothing() -> None:
    state = ToolState({"a": 1})

    with pytest.raises(PatchError):
        state.patch([{"op": "add", "path": "/b", "value": 2}, {"op": "remove", "path": "/missing"}])

    assert (state.value, state.operations, state.changed) == ({"a": 1}, [], False)


def test_state_must_be_json() -> None:
    with pytest.raises(TypeError):
        ToolState({}).replace({"when": object()})


def test_commit_applies_predictions_then_tool_changes_as_deltas_a_client_can_follow() -> None:
    tool = ToolState({"steps": ["a", "b"]})
    tool.patch([{"op": "add", "path": "/done", "value": True}])
    predicted = [{"op": "add", "path": "/steps", "value": ["a", "b"]}]

    state, events = commit({"n": 1}, [Kept(predicted, tool)])

    assert state == {"n": 1, "steps": ["a", "b"], "done": True}
    assert [event.type for event in events] == ["STATE_DELTA"]
    shown = follow({"n": 1}, [{"type": "STATE_DELTA", "delta": predicted}])  # streamed with the arguments
    assert follow(shown, [event.model_dump(mode="json") for event in events]) == state


@pytest.mark.parametrize(
    ("kept", "resync"),
    [
        pytest.param([], True, id="a-dropped-prediction"),
        pytest.param([Kept(tool=ToolState(None))], False, id="a-replaced-state"),
    ],
)
def test_a_resync_or_a_replacement_is_one_snapshot(kept: list[Kept], resync: bool) -> None:
    for each in kept:
        assert each.tool is not None
        each.tool.replace({"fresh": True})

    state, events = commit({"old": True}, kept, resync=resync)

    assert [event.type for event in events] == ["STATE_SNAPSHOT"]
    assert events[0].snapshot == state  # type: ignore[attr-defined]


def test_a_change_at_odds_with_an_earlier_call_is_dropped_and_resynced() -> None:
    first, second = ToolState({"items": ["x"]}), ToolState({"items": ["x"]})
    first.patch([{"op": "remove", "path": "/items/0"}])
    second.patch([{"op": "replace", "path": "/items/0", "value": "y"}])

    state, events = commit({"items": ["x"]}, [Kept(tool=first), Kept(tool=second)])

    assert state == {"items": []}
    assert [event.type for event in events] == ["STATE_SNAPSHOT"]


def test_a_prediction_that_no_longer_applies_is_dropped_and_resynced() -> None:
    """The client shows the prediction already: only a snapshot takes it back."""
    gone = [{"op": "replace", "path": "/items/0", "value": "y"}]

    state, events = commit({"items": []}, [Kept(predicted=gone)])

    assert state == {"items": []}
    assert [(event.type, event.snapshot) for event in events] == [("STATE_SNAPSHOT", {"items": []})]  # type: ignore[attr-defined]


def test_a_declined_prediction_on_a_run_without_state_is_taken_back_with_an_empty_snapshot() -> None:
    predicting = PendingCall(
        interrupt_id="i1",
        tool_call_id="c1",
        tool_name="write_document",
        arguments="{}",
        kind="approval",
        reason="tool_call",
        response_schema={},
        state_patch=[{"op": "add", "path": "/document", "value": "draft"}],
    )

    state, events = resumed_state(OpenTurn(turn_id="t", run_id="r", pending=[predicting]), kept=[])

    assert state is None
    assert [(event.type, event.snapshot) for event in events] == [("STATE_SNAPSHOT", {})]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("start", "events", "end"),
    [
        pytest.param(None, [StateDeltaEvent(delta=[ADD_A])], {"a": 1}, id="a-delta-on-no-state"),
        pytest.param(
            {"old": 1},
            [StateSnapshotEvent(snapshot={"b": 2}), StateDeltaEvent(delta=[ADD_A])],
            {"b": 2, "a": 1},
            id="snapshot-then-delta",
        ),
        pytest.param(
            {"b": 2},
            [StateDeltaEvent(delta=[{"op": "remove", "path": "/x"}]), StateDeltaEvent(delta=[ADD_A])],
            {"b": 2, "a": 1},
            id="a-delta-that-fails-is-skipped",
        ),
    ],
)
def test_a_backends_state_events_move_the_runs_state(start: Any, events: list[BaseEvent], end: Any) -> None:
    assert advance_state(start, events) == end


def test_a_prediction_is_announced_the_way_copilotkit_reads_it() -> None:
    event = announce([PredictState("write_document", "document", "document"), PredictState("plan", "plan")])

    assert json.loads(event.model_dump_json(by_alias=True, exclude_none=True)) == {
        "type": "CUSTOM",
        "name": "PredictState",
        "value": [
            {"state_key": "document", "tool": "write_document", "tool_argument": "document"},
            {"state_key": "plan", "tool": "plan"},
        ],
    }


def test_a_streamed_argument_shows_in_the_state_as_it_grows() -> None:
    document = "Once upon a time, there was a dragon named Atlantis. " * 12
    arguments = json.dumps({"document": document})
    prediction = ArgsPrediction([PredictState("write_document", "document", "document")])

    streamed = [event for i in range(0, len(arguments), 7) for event in prediction.feed(arguments[i : i + 7])]
    final = prediction.finish(arguments)

    values = [event.model_dump(mode="json")["delta"][0]["value"] for event in [*streamed, *final]]
    assert (
        len(arguments) // COALESCE_CHARS <= len(values) <= len(arguments) // COALESCE_CHARS + 1
    )  # coalesced, yet streamed
    assert all(document.startswith(value) for value in values)
    assert values[-1] == document
    assert values == sorted(values, key=len)
    assert len(set(values)) == len(values)
    assert prediction.operations == [{"op": "add", "path": "/document", "value": document}]


def test_a_call_without_the_predicted_argument_predicts_nothing() -> None:
    prediction = ArgsPrediction([PredictState("write_document", "document", "document")])

    assert prediction.finish('{"title": "x"}') == []
    assert prediction.operations == []


def test_a_tool_without_a_predicted_argument_predicts_all_its_arguments_under_an_escaped_key() -> None:
    prediction = ArgsPrediction([PredictState("plan", "plan/v1~draft")])

    prediction.finish('{"steps": ["a"]}')

    assert prediction.operations == [{"op": "add", "path": "/plan~1v1~0draft", "value": {"steps": ["a"]}}]


def test_a_state_that_is_not_an_object_predicts_nothing() -> None:
    """No key of a list can be predicted: the predictor stays idle rather than send deltas that cannot apply."""
    predictor = Predictor([PredictState("write_document", "document", "document")], state=["not", "an", "object"])

    assert predictor.start("c1", "write_document") == []
    assert predictor.finish("c1", '{"document": "x"}') == []
    assert predictor.operations() == {}


def test_the_complete_arguments_resend_nothing_already_shown() -> None:
    arguments = json.dumps({"document": "x" * COALESCE_CHARS})
    prediction = ArgsPrediction([PredictState("write_document", "document", "document")])

    assert len(prediction.feed(arguments)) == 1
    assert prediction.finish(arguments) == []


def wire(events: list[Any]) -> list[dict[str, Any]]:
    return parse_sse("".join(encode_event(event) for event in events).encode()).events


def predicted(entry: PredictState, arguments: str, cuts: list[int], state: Any = None) -> tuple[list[Any], int]:
    """The STATE_DELTAs of one call whose arguments arrive in pieces of the `cuts` sizes, and their wire bytes."""
    prediction = ArgsPrediction([entry])
    events, start, i = [], 0, 0
    while start < len(arguments):
        size = cuts[i % len(cuts)]
        events += prediction.feed(arguments[start : start + size])
        start, i = start + size, i + 1
    events += prediction.finish(arguments)
    return events, sum(len(encode_event(event).encode()) for event in events)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=300),
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=8), inner, max_size=6),
    max_leaves=60,
)


@settings(max_examples=60)
@given(
    document=st.text(max_size=3000) | st.integers(0, 120_000).map(lambda n: "lorem ipsum é " * (n // 14)),
    cuts=st.lists(st.integers(min_value=1, max_value=400), min_size=1, max_size=6),
)
def test_a_streamed_string_costs_at_most_three_times_its_arguments(document: str, cuts: list[int]) -> None:
    arguments = json.dumps({"document": document, "title": "t"}, ensure_ascii=False)
    events, sent = predicted(PredictState("write", "document", "document"), arguments, cuts)

    assert sent <= 3 * len(arguments.encode()) + 256
    shown = states({"document": "old"}, wire(events))
    assert all(document.startswith(each["document"]) for each in shown)
    assert shown[-1] == {"document": document}


@settings(max_examples=80)
@given(
    value=st.dictionaries(st.text(max_size=8), JSON_VALUES, max_size=6),
    whole=st.booleans(),
    cuts=st.lists(st.integers(min_value=1, max_value=60), min_size=1, max_size=6),
)
def test_a_streamed_value_arrives_by_changes_any_client_can_apply(
    value: dict[str, Any], whole: bool, cuts: list[int]
) -> None:
    arguments = json.dumps({"plan": value} if not whole else value, ensure_ascii=False)
    entry = PredictState("plan", "plan", None if whole else "plan")
    events, sent = predicted(entry, arguments, cuts)

    assert sent <= 3 * len(arguments.encode()) + 256
    assert follow({"plan": ["stale"], "other": 1}, wire(events)) == {"plan": value, "other": 1}


def test_a_long_document_is_sent_in_few_deltas_and_linear_bytes() -> None:
    document = "All work and no play makes Jack a dull boy. " * 2400  # about 100 KB
    arguments = json.dumps({"document": document})

    events, sent = predicted(PredictState("write", "document", "document"), arguments, [4])

    # was 25.6 MB in 501 deltas
    assert sent <= 3 * len(arguments)
    assert len(events) < 20
    assert follow({}, wire(events)) == {"document": document}


def test_after_another_state_event_the_next_delta_sends_the_value_whole() -> None:
    items = [f"step {i}" for i in range(60)]
    arguments = json.dumps({"steps": items})
    prediction = ArgsPrediction([PredictState("plan", "steps", "steps")])
    first = prediction.feed(arguments[: len(arguments) // 2])

    prediction.rebase()  # e.g. the backend sent STATE_SNAPSHOT {}: the client lost the steps it had
    rest = prediction.feed(arguments[len(arguments) // 2 :]) + prediction.finish(arguments)

    assert first
    assert follow({}, wire(rest)) == {"steps": items}


def test_a_growing_list_is_sent_as_its_new_items() -> None:
    items = [{"description": f"step number {i}", "status": "pending"} for i in range(200)]
    arguments = json.dumps({"steps": items})

    events, sent = predicted(PredictState("plan", "steps", "steps"), arguments, [25])

    assert len(events) > 20
    assert sent < 2 * len(arguments)
    wholes = [op for event in wire(events) for op in event["delta"] if op["path"] == "/steps"]
    assert len(wholes) <= 3  # the first delta, and any while a list of a few items costs less whole
    assert follow({}, wire(events)) == {"steps": items}
