"""Every event goes on the wire as exactly the text pydantic gives it, whichever path encodes it.

`adapter._wire.event_json` builds the JSON of events whose fields hold strings directly, and hands the rest to
`model_dump_json(by_alias=True)`. The property: for any event of any class the SDK exports, with any values its
models accept (strings with control characters, non-ASCII and lone surrogates, extra fields, nulls where a
field takes one), the two give the same text, or raise the same error. The same holds of a client's tool
declaration (`model_json`, the same function by its general name).
"""

from __future__ import annotations

import inspect
from typing import Any

import ag_ui.core
import pytest
from ag_ui.core import (
    AssistantMessage,
    BaseEvent,
    CustomEvent,
    FunctionCall,
    Interrupt,
    MessagesSnapshotEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    TextMessageContentEvent,
    ToolCall,
    ToolCallStartEvent,
    UserMessage,
)
from ag_ui.core import Tool as ToolDeclaration
from hypothesis import example, given
from hypothesis import strategies as st
from protocol_models import instances
from pydantic import ValidationError, field_serializer

# Private on purpose: the translation's text deltas skip `__init__`; they must be the events `__init__` makes.
from adapter._run._translate import _text_content

# Private on purpose: the fast path is an internal of the journal's encoding, checked against pydantic here.
from adapter._wire import event_json, model_json

EVENT_CLASSES = sorted(
    (
        cls
        for cls in vars(ag_ui.core).values()
        if inspect.isclass(cls) and issubclass(cls, BaseEvent) and cls is not BaseEvent
    ),
    key=lambda cls: cls.__name__,
)
ANY_TEXT = st.text(max_size=12)
"""Any `str`, lone surrogates included: pydantic accepts them in a model and refuses them in UTF-8."""


def same_text_or_same_error(event: Any) -> None:
    try:
        expected = event.model_dump_json(by_alias=True)
    except Exception as error:
        with pytest.raises(type(error)):
            model_json(event)
        return
    assert model_json(event) == expected


def test_the_sdk_exports_the_event_classes_this_checks() -> None:
    assert len(EVENT_CLASSES) >= 30
    assert TextMessageContentEvent in EVENT_CLASSES


@given(st.sampled_from(EVENT_CLASSES).flatmap(instances))
@example(CustomEvent(name="a required null", value=None))
@example(RunErrorEvent(message="an optional field left out"))
@example(
    RunFinishedEvent(
        thread_id="t",
        run_id="r",
        outcome=RunFinishedInterruptOutcome(
            interrupts=[Interrupt(id="i", reason="tool_call", metadata={"n": 1, "x": 0.1, "none": None, "l": [1e16]})]
        ),
    )
)
@example(
    MessagesSnapshotEvent(
        messages=[
            UserMessage(id="u", content="go"),
            AssistantMessage(id="a", tool_calls=[ToolCall(id="c", function=FunctionCall(name="n", arguments="{}"))]),
        ]
    )
)
def test_any_event_of_the_sdk_is_the_text_pydantic_gives(event: BaseEvent) -> None:
    same_text_or_same_error(event)


@given(instances(ToolDeclaration))
@example(ToolDeclaration(name="go", description="", parameters={"type": "object", "x": [1, 0.5, None, {"y": True}]}))
def test_any_tool_declaration_is_the_text_pydantic_gives(declared: ToolDeclaration) -> None:
    same_text_or_same_error(declared)


@given(st.sampled_from(EVENT_CLASSES).flatmap(instances), st.dictionaries(st.sampled_from(["x", "zeta"]), ANY_TEXT))
def test_an_event_with_extra_fields_is_the_text_pydantic_gives(event: BaseEvent, extra: dict[str, str]) -> None:
    same_text_or_same_error(event.model_copy(update=extra))


@given(ANY_TEXT.filter(bool), ANY_TEXT.filter(bool), st.one_of(st.none(), ANY_TEXT))
def test_any_string_is_the_text_pydantic_gives_or_its_error(first: str, second: str, third: str | None) -> None:
    same_text_or_same_error(TextMessageContentEvent(message_id=first, delta=second))
    same_text_or_same_error(ToolCallStartEvent(tool_call_id=first, tool_call_name=second, parent_message_id=third))


class Shouted(TextMessageContentEvent):
    """A subclass from outside the SDK with a serializer of its own."""

    @field_serializer("delta")
    def _shout(self, delta: str) -> str:
        return delta.upper()


def test_a_subclass_with_its_own_serializer_keeps_it() -> None:
    event: Any = Shouted(message_id="m", delta="quiet")
    assert event_json(event) == '{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"QUIET"}'


_ENCODABLE = st.characters(exclude_categories=["Cs"])
"""Text UTF-8 encodes (a lone surrogate fails in pydantic alike either way)."""


@given(message_id=st.text(_ENCODABLE, min_size=1), delta=st.text(_ENCODABLE))
@example(message_id="msg_1", delta="caf\u00e9 \U0001f600")
def test_a_text_delta_built_by_the_validator_is_the_event_init_makes(message_id: str, delta: str) -> None:
    made = TextMessageContentEvent(message_id=message_id, delta=delta)
    built = _text_content({"message_id": message_id, "delta": delta})
    assert type(built) is TextMessageContentEvent
    assert built == made
    assert built.model_fields_set == made.model_fields_set
    assert event_json(built) == event_json(made) == made.model_dump_json(by_alias=True)


def test_a_text_delta_built_by_the_validator_is_still_validated() -> None:
    with pytest.raises(ValidationError):
        _text_content({"message_id": "msg_1", "delta": 3})  # type: ignore[dict-item]
