"""The client's processing model (AG-UI 1.1): what it hands on is what the protocol describes, and what it left
out is said (`Run.warnings`); unrecognised material never fails a run, a malformed known value always does."""

from __future__ import annotations

import typing
from typing import Any

import pytest
from ag_ui.core import Event, EventType, TextMessageContentEvent
from hypothesis import given
from hypothesis import strategies as st
from protocol_models import instances, wire

from adapter.client import AGUIClient, ProtocolError, Run, fold_messages

# Private on purpose: the enforcement stage alone, over every event model.
from adapter.client._enforce import enforce, version_warning

UNKNOWN = st.from_regex(r"future[A-Z][a-z]{1,8}", fullmatch=True)


def any_event() -> st.SearchStrategy[dict[str, Any]]:
    """Any event of any type the protocol's models describe, as wire JSON."""
    models = typing.get_args(typing.get_args(Event)[0])  # Annotated[Union[...], discriminator]
    return st.sampled_from(models).flatmap(instances).map(wire)


@given(event=any_event(), name=UNKNOWN, value=st.integers() | st.text(max_size=5))
def test_an_undescribed_property_is_stripped_with_a_warning_naming_it_and_the_rest_survives(
    event: dict[str, Any], name: str, value: object
) -> None:
    enforced = enforce({**event, name: value})

    assert enforced.problem is None
    assert enforced.model is not None
    assert enforced.warnings == [f"stripped /{name}: an undescribed property"]
    assert wire(enforced.model) == wire(enforce(event).model)  # type: ignore[arg-type]


@given(kind=st.from_regex(r"[A-Z][A-Z_]{2,20}", fullmatch=True).filter(lambda k: k not in {e.value for e in EventType}))
def test_an_event_of_an_unrecognised_type_is_dropped_with_a_warning_naming_it(kind: str) -> None:
    enforced = enforce({"type": kind, "somethingNew": True})

    assert (enforced.model, enforced.problem) == (None, None)
    assert enforced.warnings == [f"dropped an event of unrecognised type {kind!r}"]


def test_an_unrecognised_outcome_is_stripped_and_a_malformed_one_is_fatal() -> None:
    finished = {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}

    stripped = enforce({**finished, "outcome": {"type": "paused"}})
    malformed = enforce({**finished, "outcome": ["success"]})

    assert stripped.model is not None
    assert stripped.model.outcome is None  # type: ignore[attr-defined]
    assert stripped.warnings == ["stripped /outcome: an unrecognised union member"]
    assert malformed.model is None
    assert malformed.problem is not None
    assert "outcome" in malformed.problem


def test_an_unrecognised_content_part_is_dropped_from_its_list() -> None:
    parts = [{"type": "text", "text": "a"}, {"type": "hologram", "x": 1}, {"type": "text", "text": "b"}]
    snapshot = {"type": "MESSAGES_SNAPSHOT", "messages": [{"id": "u", "role": "user", "content": parts}]}

    enforced = enforce(snapshot)

    assert enforced.model is not None
    assert [p.text for p in enforced.model.messages[0].content] == ["a", "b"]  # type: ignore[attr-defined]
    assert enforced.warnings == ["stripped /messages/0/content/1: an unrecognised union member"]
    assert len(parts) == 3, "the event as sent is left as it was"


def test_a_malformed_known_value_is_fatal() -> None:
    enforced = enforce({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": 42})

    assert enforced.model is None
    assert enforced.problem is not None
    assert "delta" in enforced.problem


async def test_a_strict_client_finishes_a_run_with_unrecognised_material_and_says_what_it_left_out() -> None:
    events: list[dict[str, Any]] = [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
        {"type": "FUTURE_EVENT", "x": 1},
        {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "hi", "futureProp": 1},
        {"type": "TEXT_MESSAGE_END", "messageId": "m"},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
    ]
    run = await served(events)

    assert [e.type for e in run.events] == [
        "RUN_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ]
    content = run.events[2]
    assert isinstance(content, TextMessageContentEvent)
    assert content.model_extra == {}
    assert run.warnings == [
        "event 1 (FUTURE_EVENT): dropped an event of unrecognised type 'FUTURE_EVENT'",
        "event 3 (TEXT_MESSAGE_CONTENT): stripped /futureProp: an undescribed property",
    ]
    assert run.wire[3]["futureProp"] == 1, "the wire keeps what was sent"


async def served(events: list[dict[str, Any]], *, strict: bool = True) -> Run:
    import json

    body = "".join(f"data: {json.dumps(e)}\n\n" for e in events).encode()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        while (await receive())["type"] != "http.request":
            pass
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        await send({"type": "http.response.body", "body": body})

    async with AGUIClient(app, strict=strict) as client:
        return await client.run({"threadId": "t", "runId": "r", "messages": []})


async def test_a_malformed_known_value_fails_a_strict_run() -> None:
    events: list[dict[str, Any]] = [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
        {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": 42},
        {"type": "TEXT_MESSAGE_END", "messageId": "m"},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
    ]
    try:
        await served(events)
    except ProtocolError as error:
        assert "delta" in str(error)
    else:
        raise AssertionError("a malformed delta must fail the run")


@pytest.mark.parametrize(
    ("declared", "said"),
    [
        pytest.param(None, None, id="absent"),
        pytest.param("1.0", None, id="1.0"),
        pytest.param("1.1", None, id="same"),
        pytest.param("0.0.47", None, id="older"),
        pytest.param("1.2", "the producer declares protocolVersion 1.2, newer than 1.1", id="newer-minor"),
        pytest.param("2.0.1", "the producer declares protocolVersion 2.0.1, newer than 1.1", id="newer-major"),
        pytest.param("draft", "cannot interpret the producer's protocolVersion 'draft'", id="uninterpretable"),
    ],
)
def test_a_producer_declaring_a_version_it_cannot_read_as_its_own_is_read_with_a_warning(
    declared: str | None, said: str | None
) -> None:
    """AG-UI 1.1 Versioning: a newer or uninterpretable declaration is served, not rejected, and warned about."""
    warning = version_warning(declared)

    assert (warning is None) == (said is None)
    assert said is None or (warning is not None and warning.startswith(said))


@given(metadata=st.lists(st.dictionaries(st.sampled_from("abc"), st.integers() | st.lists(st.integers())), max_size=3))
def test_metadata_lands_on_the_call_and_the_message_it_builds_the_last_write_winning(
    metadata: list[dict[str, Any]],
) -> None:
    """AG-UI 1.1 Metadata: per key, last write wins, no recursion; a tool call's on the call, a message's on it."""
    start, args, end = (metadata + [{}, {}, {}])[:3]
    call = [
        {"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "f", "parentMessageId": "a", "metadata": start},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c", "delta": "{}", "metadata": args},
        {"type": "TOOL_CALL_END", "toolCallId": "c", "metadata": end},
    ]
    text = [
        {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant", "metadata": start},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "hi", "metadata": args},
        {"type": "TEXT_MESSAGE_END", "messageId": "m", "metadata": end},
    ]

    owner, message = fold_messages([], call + text)

    merged = {**start, **args, **end}
    assert owner["toolCalls"][0].get("metadata", {}) == merged
    assert "metadata" not in owner
    assert message.get("metadata", {}) == merged


async def test_a_patch_operation_no_rfc_defines_is_dropped_and_the_rest_applies() -> None:
    """AG-UI 1.1: an unknown `op` is an unrecognised union member of the patch; an operation's other members are
    open (RFC 6902 section 4), so a `remove` with a leftover `value` arrives whole."""
    events: list[dict[str, Any]] = [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
        {"type": "STATE_SNAPSHOT", "snapshot": {"count": 1, "gone": 0}},
        {
            "type": "STATE_DELTA",
            "delta": [
                {"op": "increment", "path": "/count", "value": 1},
                {"op": "replace", "path": "/count", "value": 5},
                {"op": "remove", "path": "/gone", "value": "leftover"},
            ],
        },
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
    ]
    import json

    body = "".join(f"data: {json.dumps(e)}\n\n" for e in events).encode()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        while (await receive())["type"] != "http.request":
            pass
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        await send({"type": "http.response.body", "body": body})

    async with AGUIClient(app) as client:
        thread = client.thread(thread_id="t")
        run = await thread.send(thread.input(runId="r"))

    assert thread.state == {"count": 5}
    assert run.warnings == ["event 2 (STATE_DELTA): stripped /delta/0: an unrecognised union member"]
    kept = run.events[2].model_dump(mode="json", by_alias=True, exclude_unset=True)["delta"]
    assert kept == events[2]["delta"][1:], "the rest arrives whole, the remove's leftover value too"


def test_an_activity_delta_patches_its_activity_and_invents_none() -> None:
    """AG-UI 1.1 activity: a delta patches the activity message in place; one naming no activity changes nothing."""
    snapshot = {"type": "ACTIVITY_SNAPSHOT", "messageId": "a", "activityType": "search", "content": {"found": 0}}
    delta = {"type": "ACTIVITY_DELTA", "messageId": "a", "activityType": "search"}
    patch = [{"op": "replace", "path": "/found", "value": 3}]

    folded = fold_messages(
        [],
        [
            snapshot,
            {**delta, "patch": patch},
            {**delta, "messageId": "never-made", "patch": patch},
            {**delta, "patch": [{"op": "replace", "path": "/missing/x", "value": 1}]},
        ],
    )

    assert folded == [{"id": "a", "role": "activity", "activityType": "search", "content": {"found": 3}}]


async def test_a_thread_keeps_what_the_processing_model_hands_on_not_what_was_sent() -> None:
    """An unrecognised content part stripped from a snapshot is not in the conversation the thread keeps either."""
    import json

    parts = [{"type": "text", "text": "before"}, {"type": "hologram", "x": 1}, {"type": "text", "text": "after"}]
    events = [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
        {"type": "MESSAGES_SNAPSHOT", "messages": [{"id": "u", "role": "user", "content": parts}]},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
    ]
    body = "".join(f"data: {json.dumps(e)}\n\n" for e in events).encode()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        while (await receive())["type"] != "http.request":
            pass
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        await send({"type": "http.response.body", "body": body})

    async with AGUIClient(app) as client:
        thread = client.thread(thread_id="t")
        run = await thread.send(thread.input(runId="r"))

    assert thread.messages == [{"id": "u", "role": "user", "content": [parts[0], parts[2]]}]
    assert run.wire[1]["messages"][0]["content"] == parts, "the wire keeps what was sent"


def test_the_encrypted_value_type_1_1_adds_is_kept_and_folded_with_its_value() -> None:
    """AG-UI 1.1: `encryptedValueType` beside every `encryptedValue` is stored and returned with it, never read; the
    same property elsewhere is still undescribed, and stripped."""
    valued = {"type": "REASONING_ENCRYPTED_VALUE", "subtype": "message", "entityId": "m", "encryptedValue": "x"}
    typed = {**valued, "encryptedValueType": "provider.thinking"}
    text = {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant", "encryptedValueType": "t"}

    assert enforce(typed).warnings == []
    assert enforce(typed).model is not None
    assert enforce(text).warnings == ["stripped /encryptedValueType: an undescribed property"]
    started = {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"}
    (message,) = fold_messages([], [started, typed])
    assert (message["encryptedValue"], message["encryptedValueType"]) == ("x", "provider.thinking")
    (untyped,) = fold_messages([message], [valued])
    assert "encryptedValueType" not in untyped, "a value sent again without a type has none"
