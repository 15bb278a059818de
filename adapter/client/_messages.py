"""A thread's messages as a client keeps them.

A MESSAGES_SNAPSHOT replaces them; streamed text, reasoning, tool calls (triads or chunks) and tool results add
to them. As `@ag-ui/client` does, a REASONING_ENCRYPTED_VALUE sets the `encryptedValue` of the message (subtype
`message`) or the tool call (`tool-call`) it names, if the conversation has it, so that a later request carries
it back; an activity message takes no reasoning. An event's `metadata` is merged onto the message or tool call it
builds, per key, the last write winning.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from adapter._ids import new_id
from adapter._jsonpatch import PatchError, apply_patch
from adapter.client._calls import CallReader, StreamedCall
from adapter.client._enforce import known_operations

Message = dict[str, Any]
_REASONING = frozenset(
    {"REASONING_MESSAGE_START", "REASONING_MESSAGE_CONTENT", "REASONING_MESSAGE_CHUNK", "REASONING_ENCRYPTED_VALUE"}
)
SERVER_ROLES = frozenset({"activity", "reasoning"})
"""Roles a client may show but leave out of what it sends back (`fold_messages(..., drop_roles=SERVER_ROLES)`)."""


class MessageFolder:
    """Applies one run's events, in order, to a conversation."""

    def __init__(self, messages: Sequence[Mapping[str, Any]], *, drop_roles: frozenset[str] = frozenset()) -> None:
        self.drop_roles = drop_roles
        self.messages: list[Message] = [dict(message) for message in messages]
        self.calls = CallReader()
        self._text: str | None = None
        self._thought: str | None = None
        self._entries: dict[str, dict[str, Any]] = {}

    def feed(self, event: Mapping[str, Any]) -> None:
        """Apply one wire event."""
        kind = event.get("type")
        started = self.calls.feed(event)
        if started is not None:
            self._attach(started)
        elif kind in ("TOOL_CALL_ARGS", "TOOL_CALL_CHUNK"):
            self._sync(str(event.get("toolCallId") or ""))
        if kind not in ("TEXT_MESSAGE_CHUNK", "RAW"):  # RAW stands aside from chunk assembly
            self._text = None
        if kind not in ("REASONING_MESSAGE_CHUNK", "RAW"):
            self._thought = None
        if kind == "MESSAGES_SNAPSHOT":
            snapshot = event.get("messages") or []
            kept = [m for m in snapshot if isinstance(m, Mapping) and m.get("role") not in self.drop_roles]
            self.messages = [dict(message) for message in kept]
        elif kind == "TEXT_MESSAGE_START":
            opened = self._message(str(event.get("messageId")), str(event.get("role") or "assistant"))
            if event.get("subagentRunId") is not None:
                opened.setdefault("subagentRunId", event["subagentRunId"])
        elif kind in ("TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_CHUNK"):
            self._content(event)
        elif kind == "TOOL_CALL_RESULT" and not any(m.get("id") == event.get("messageId") for m in self.messages):
            self.messages.append(_tool_message(event))
        elif kind == "ACTIVITY_SNAPSHOT" and "activity" not in self.drop_roles:
            self._activity(event)
        elif kind == "ACTIVITY_DELTA" and "activity" not in self.drop_roles:
            self._activity_delta(event)
        elif kind in _REASONING and "reasoning" not in self.drop_roles:
            self._reasoning(event)
        if isinstance(event.get("metadata"), Mapping) and event["metadata"]:
            self._metadata(event)

    def _metadata(self, event: Mapping[str, Any]) -> None:
        """An event's metadata merged onto what it builds, per key, the last write winning (AG-UI 1.1, Metadata).

        A tool call's events merge onto the call, not the assistant message that owns it; a message's onto it.
        """
        kind = str(event.get("type"))
        target: dict[str, Any] | None = None
        if kind.startswith("TOOL_CALL_") and kind != "TOOL_CALL_RESULT":
            call_id = str(event.get("toolCallId") or "") or (self.calls.calls[-1].id if self.calls.calls else "")
            target = self._entries.get(call_id)
        elif kind.startswith(("TEXT_MESSAGE_", "REASONING_MESSAGE_")):
            message_id = event.get("messageId") or self._text or self._thought
            target = next((m for m in self.messages if m.get("id") == message_id), None)
        if target is not None:
            kept = target.get("metadata")
            target["metadata"] = {**(kept if isinstance(kept, Mapping) else {}), **event["metadata"]}

    def _reasoning(self, event: Mapping[str, Any]) -> None:
        """A reasoning message started or streamed, or an encrypted value for the message or call it names."""
        kind = event.get("type")
        if kind == "REASONING_ENCRYPTED_VALUE":
            self._encrypted(event)
            return
        message_id = str(event.get("messageId") or self._thought or new_id("reasoning"))
        if kind == "REASONING_MESSAGE_CHUNK":
            self._thought = message_id
        kept = next((m for m in self.messages if m.get("id") == message_id), None)
        if kept is not None and kept.get("role") == "activity":
            return  # ids are unique across roles: an activity takes no reasoning
        message = kept if kept is not None else self._message(message_id, "reasoning")
        message.setdefault("content", "")
        if kind != "REASONING_MESSAGE_START":
            message["content"] = str(message.get("content") or "") + str(event.get("delta") or "")

    def _encrypted(self, event: Mapping[str, Any]) -> None:
        entity_id = event.get("entityId")
        if event.get("subtype") == "tool-call":
            calls = (c for m in self.messages if m.get("role") == "assistant" for c in m.get("toolCalls") or ())
            target = next((c for c in calls if isinstance(c, dict) and c.get("id") == entity_id), None)
        else:
            target = next((m for m in self.messages if m.get("id") == entity_id and m.get("role") != "activity"), None)
        if target is not None:
            target["encryptedValue"] = event.get("encryptedValue")
            if event.get("encryptedValueType") is not None:  # AG-UI 1.1: kept and returned with the value
                target["encryptedValueType"] = event["encryptedValueType"]
            else:
                target.pop("encryptedValueType", None)

    def _activity(self, event: Mapping[str, Any]) -> None:
        """An activity message, new or replacing the one of its id (unless `replace` is false)."""
        message_id = str(event.get("messageId"))
        kept = next((m for m in self.messages if m.get("id") == message_id), None)
        if kept is None:
            self.messages.append(
                {
                    "id": message_id,
                    "role": "activity",
                    "activityType": event.get("activityType"),
                    "content": event.get("content"),
                }
            )
        elif event.get("replace", True) is not False:
            kept["content"] = event.get("content")

    def _activity_delta(self, event: Mapping[str, Any]) -> None:
        """An activity message's content patched in place.

        A delta for no activity, or one that does not apply as a whole, changes nothing and invents nothing (AG-UI
        1.1, activity).
        """
        kept = next((m for m in self.messages if m.get("id") == event.get("messageId")), None)
        if kept is None or kept.get("role") != "activity":
            return
        patch, _ = known_operations(event.get("patch") or [])
        try:
            kept["content"] = apply_patch(kept.get("content"), patch)
        except PatchError:
            return

    def _content(self, event: Mapping[str, Any]) -> None:
        message_id = event.get("messageId") or self._text or new_id("message")
        role = str(event.get("role") or "assistant")
        message = self._message(str(message_id), role)
        if event.get("subagentRunId") is not None:  # the message is the subagent's (AG-UI 1.1, subagents)
            message.setdefault("subagentRunId", event["subagentRunId"])
        message["content"] = (message.get("content") or "") + str(event.get("delta") or "")
        if event.get("type") == "TEXT_MESSAGE_CHUNK":
            self._text = str(message_id)

    def _attach(self, call: StreamedCall) -> None:
        entry = {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}
        parent = self._message(call.parent_message_id or new_id("assistant"), "assistant")
        parent.setdefault("toolCalls", []).append(entry)
        self._entries[call.id] = entry

    def _sync(self, call_id: str) -> None:
        call = self.calls.get(call_id) if call_id else (self.calls.calls[-1] if self.calls.calls else None)
        if call is not None and call.id in self._entries:
            self._entries[call.id]["function"]["arguments"] = call.arguments

    def _message(self, message_id: str, role: str) -> Message:
        for message in self.messages:
            if message.get("id") == message_id:
                return message
        made: Message = {"id": message_id, "role": role}
        self.messages.append(made)
        return made


def fold_messages(
    messages: Sequence[Mapping[str, Any]],
    events: Iterable[Mapping[str, Any]],
    *,
    drop_roles: frozenset[str] = frozenset(),
) -> list[Message]:
    """The conversation after one run's wire events: snapshots replace it, streamed messages add to it.

    `drop_roles` leaves a snapshot's messages of those roles out (e.g. `SERVER_ROLES`), and builds none of them:
    with "reasoning", the reasoning (and its encrypted values) stays with the server.
    """
    folder = MessageFolder(messages, drop_roles=drop_roles)
    for event in events:
        folder.feed(event)
    return folder.messages


def _tool_message(event: Mapping[str, Any]) -> Message:
    message: Message = {
        "id": event.get("messageId"),
        "role": "tool",
        "toolCallId": event.get("toolCallId"),
        "content": event.get("content", ""),
    }
    return message
