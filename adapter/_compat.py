"""What a peer from before AG-UI 1.0 sends (the retired `binary` part) and receives (VER-5).

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
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncGenerator, Mapping, Sequence
from contextlib import aclosing
from typing import Any, Final

from ag_ui.core import (
    BaseEvent,
    ContentPart,
    MessagesSnapshotEvent,
    RunFinishedEvent,
    RunFinishedSuccessOutcome,
    TextPart,
    ToolCallResultEvent,
    ToolMessage,
)

logger = logging.getLogger(__name__)

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


async def for_unversioned_peer(events: AsyncGenerator[BaseEvent, None]) -> AsyncGenerator[BaseEvent, None]:
    """The run's events, with `pendingToolCallIds` left out of a success outcome and tool results as text."""
    async with aclosing(events) as stream:
        async for event in stream:
            yield downgraded(event)


def downgraded(event: BaseEvent) -> BaseEvent:
    """One event as a peer older than 1.0 parses it."""
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
