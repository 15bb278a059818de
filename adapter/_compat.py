"""What a peer older than the protocol it speaks sends and receives: 0.x's `binary` part (VER-5), 1.1's additions.

In: a 0.x `binary` content part becomes the typed 1.0 part it stands for, as the TypeScript SDK's
`convertBinaryToNewFormat` and pydantic-ai's AG-UI adapter read it: an `image`, `audio`, `video` or
`document` part by its media type, its bytes a `data` source (a `data:` URL is read as one) or a `url`
source, its `filename` kept in `metadata`. A part with only an `id` names no bytes a 1.0 source can
hold, and is dropped with a warning; so is a copy of a typed part the same message already has.

Out: an input without `protocolVersion` comes from a client older than AG-UI 1.0, such as
`@ag-ui/client` 0.0.x, which parses a success outcome strictly: `pendingToolCallIds` makes it reject
the whole run. Dropping that list is lossless (it is every call the run left without a result), so
such a peer gets `{"type": "success"}`. Its tool messages hold text only, so a tool result's content
parts reach it as their text, the way the specification's versioning rules permit (and the SDK's
`contentToText` does it): the text parts joined, every other part dropped with a warning. Nothing else
changes: not the outcome's type, not an id, not the order of events. A `cancelled` outcome cannot be
downgraded and is sent as it is.

1.1: `encryptedValueType` beside an encrypted value (a `REASONING_ENCRYPTED_VALUE` event, a reasoning message, a
tool call) is kept and returned with the value, as an extra field of the 1.0 models. A peer that declared 1.0 (or
none) is sent the events without it (`without_1_1`), and nothing else of them changes.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final, TypeVar

from ag_ui.core import (
    AssistantMessage,
    BaseEvent,
    ContentPart,
    EventType,
    MessagesSnapshotEvent,
    ReasoningEncryptedValueEvent,
    RunFinishedEvent,
    RunFinishedSuccessOutcome,
    TextPart,
    ToolCallResultEvent,
    ToolMessage,
)
from pydantic import BaseModel

logger = logging.getLogger(__name__)

ENCRYPTED_VALUE_TYPE: Final = "encryptedValueType"
"""AG-UI 1.1's type beside an encrypted value: an extra field of the 1.0 models, never sent to a 1.0 peer."""
CARRY_1_1: Final = frozenset({EventType.REASONING_ENCRYPTED_VALUE, EventType.MESSAGES_SNAPSHOT})
"""The events that may carry what 1.1 adds (`without_1_1`)."""


def speaks_1_1(protocol_version: str | None) -> bool:
    """Whether a peer that declared `protocol_version` (None: none, a peer older than 1.0) reads what 1.1 adds.

    Compared as numerals, never converted: a version of thousands of digits is an answer, not an error.
    """
    if protocol_version is None:
        return False
    major, _, rest = protocol_version.partition(".")
    minor = rest.partition(".")[0]
    if _NUMERAL.fullmatch(major) is None or _NUMERAL.fullmatch(minor) is None:
        return False
    return (_magnitude(major), _magnitude(minor)) >= (_magnitude("1"), _magnitude("1"))


def _magnitude(numeral: str) -> tuple[int, str]:
    """A decimal numeral's order: by its length once its leading zeros go, then digit by digit."""
    significant = numeral.lstrip("0") or "0"
    return len(significant), significant


def without_1_1(event: BaseEvent) -> BaseEvent:
    """`event` as a 1.0 peer is sent it: without `encryptedValueType`, wherever 1.1 puts it; the same event if none."""
    if isinstance(event, ReasoningEncryptedValueEvent):
        return _untyped(event)
    if isinstance(event, MessagesSnapshotEvent) and any(_carries_type(message) for message in event.messages):
        return event.model_copy(update={"messages": [_untyped_message(message) for message in event.messages]})
    return event


def _carries_type(message: Any) -> bool:
    calls = message.tool_calls or [] if isinstance(message, AssistantMessage) else []
    return any(ENCRYPTED_VALUE_TYPE in (model.model_extra or {}) for model in (message, *calls))


def _untyped_message(message: Any) -> Any:
    if not _carries_type(message):
        return message
    untyped = _untyped(message)
    if isinstance(untyped, AssistantMessage) and untyped.tool_calls:
        untyped = untyped.model_copy(update={"tool_calls": [_untyped(call) for call in untyped.tool_calls]})
    return untyped


def _untyped(model: _Model) -> _Model:
    """`model` without the 1.1 type of its encrypted value (an extra field); `model` itself when it has none."""
    extra = model.model_extra or {}
    if ENCRYPTED_VALUE_TYPE not in extra:
        return model
    copied = model.model_copy()
    copied.__pydantic_extra__ = {key: value for key, value in extra.items() if key != ENCRYPTED_VALUE_TYPE}
    return copied


_Model = TypeVar("_Model", bound=BaseModel)
_NUMERAL: Final = re.compile(r"[0-9]+")
_DATA_URL: Final = re.compile(r"data:([^;,]*)((?:;[^;,]*)*);base64,(.*)", re.DOTALL)
_LOGGED_CHARS: Final = 64


def upgrade_parts(parts: Sequence[Any], message_id: Any) -> list[Any]:
    """A message's content parts with each 0.x `binary` part replaced by its typed 1.0 part (or dropped)."""
    upgraded: list[Any] = []
    for part in parts:
        if not (isinstance(part, dict) and part.get("type") == "binary"):
            upgraded.append(part)
            continue
        typed = typed_part(part)
        if typed is None:
            logger.warning("dropping a binary part with no data or url from message %r", _label(message_id))
        elif not any(_mirrors(other, typed) for other in parts):
            upgraded.append(typed)  # a client that sends both shapes of one attachment means it once
    return upgraded


def _mirrors(part: Any, typed: Mapping[str, Any]) -> bool:
    """Whether `part` is a typed part with the same kind and source as `typed`, and its filename if it has one."""
    if not isinstance(part, dict) or (part.get("type"), part.get("source")) != (typed["type"], typed["source"]):
        return False
    return "metadata" not in typed or part.get("metadata") == typed["metadata"]


def typed_part(binary: Mapping[str, Any]) -> dict[str, Any] | None:
    """The typed 1.0 part a 0.x `binary` part stands for; None when it names no bytes (only an `id`)."""
    mime_type = binary.get("mimeType")
    data, url = binary.get("data"), binary.get("url")
    if not isinstance(mime_type, str):
        return None
    if isinstance(url, str) and url and not data:
        inline = _DATA_URL.fullmatch(url)
        if inline is not None:
            mime_type, data = inline[1] or mime_type, inline[3]
    if isinstance(data, str) and data:
        source = {"type": "data", "value": data, "mimeType": mime_type}
    elif isinstance(url, str) and url:
        source = {"type": "url", "value": url, "mimeType": mime_type}
    else:
        return None
    part: dict[str, Any] = {"type": _kind(mime_type), "source": source}
    if isinstance(binary.get("filename"), str) and binary["filename"]:
        part["metadata"] = {"filename": binary["filename"]}
    return part


def _kind(mime_type: str) -> str:
    family = mime_type.split("/", 1)[0].strip().lower()
    return family if family in ("image", "audio", "video") else "document"


def _label(value: Any) -> str:
    return value[:_LOGGED_CHARS] if isinstance(value, str) else "?"


DOWNGRADED: Final = frozenset({EventType.RUN_FINISHED, EventType.TOOL_CALL_RESULT, EventType.MESSAGES_SNAPSHOT})
"""The events a peer older than 1.0 may be sent otherwise (`downgraded`)."""


def downgraded(event: BaseEvent) -> BaseEvent:
    """One event as a peer older than 1.0 parses it (the run applies it to each event it sends such a peer)."""
    if event.type not in DOWNGRADED:  # most of a stream: one lookup, not three class checks an event
        return event
    if isinstance(event, RunFinishedEvent) and isinstance(event.outcome, RunFinishedSuccessOutcome):
        if event.outcome.pending_tool_call_ids is not None:
            if event.outcome.pending_tool_call_ids:  # said where a newcomer whose curl body has no version looks
                logger.info(
                    "run %r: the input declared no protocolVersion (a client older than AG-UI 1.0), so its outcome"
                    ' leaves out pendingToolCallIds %s; send "protocolVersion": "1.0" to get them',
                    _label(event.run_id),
                    [_label(each) for each in event.outcome.pending_tool_call_ids],
                )
            return event.model_copy(update={"outcome": RunFinishedSuccessOutcome()})
    if isinstance(event, ToolCallResultEvent) and not isinstance(event.content, str):
        return event.model_copy(update={"content": as_text(event.content, event.tool_call_id)})
    if isinstance(event, MessagesSnapshotEvent) and any(_has_parts(message) for message in event.messages):
        messages = [
            message.model_copy(update={"content": as_text(message.content, message.tool_call_id)})
            if isinstance(message, ToolMessage) and not isinstance(message.content, str)
            else message
            for message in event.messages
        ]
        return event.model_copy(update={"messages": messages})
    return event


def as_text(parts: Sequence[ContentPart], tool_call_id: str) -> str:
    """A tool result's parts as text: its text parts joined; the rest dropped, with a warning."""
    if any(not isinstance(part, TextPart) for part in parts):
        logger.warning(
            "the result of tool call %r has parts a client older than 1.0 cannot hold: it gets their text only",
            _label(tool_call_id),
        )
    return "".join(part.text for part in parts if isinstance(part, TextPart))


def _has_parts(message: Any) -> bool:
    return isinstance(message, ToolMessage) and not isinstance(message.content, str)
