"""What the store keeps for a thread beside its messages: the open (suspended) turn, the last applied resume, grants.

These records are the server's truth about a suspended turn: which calls wait for an answer, with
which arguments, under which frozen response schema. A client's `messages` can never change them.
"""

from __future__ import annotations

import enum
import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from ag_ui.core import ActivityMessage, Interrupt, Message, TextPart, ToolMessage, UserMessage
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticSerializationError, SchemaSerializer

from adapter import _errors as codes
from adapter._collector import COLLECTOR
from adapter._errors import LimitExceeded
from adapter._types import JSON, wire_json
from adapter.stores import StoredMessage, ThreadHead


class CallKind(enum.StrEnum):
    """Why a call waits, and the rules its answer follows: each kind's rules are stated here, once.

    Stored as its value: a record written before the kind was a type reads the same.
    """

    FRONTEND = "frontend"
    """A client tool's call (or one the backend left open): the client runs it and sends its result."""
    APPROVAL = "approval"
    """A server tool that runs only once a person approves it."""
    INPUT = "input"
    """A server tool that asked for input: replayed with the answer."""
    FORM = "form"
    """The `request_user_input` control tool: the answer is the form's values."""
    BACKEND = "backend"
    """The backend's own interrupt: its answer goes back to the backend."""

    @property
    def decided(self) -> bool:
        """A person's decision (an approval): answered only by a resume entry, never by a tool result.

        Its payload says `approved`, and may carry a `reason`, `editedArgs` and `remember`; answering it needs
        the "approve" permission, any other kind "resume".
        """
        return self is CallKind.APPROVAL

    @property
    def clients_own(self) -> bool:
        """The client's own tool: a `ToolMessage` it sends answers it as the client likes (FE-4), unchecked."""
        return self is CallKind.FRONTEND

    @property
    def forwarded(self) -> bool:
        """The backend applies the answer: it is forwarded, never settled here (a schema the gate cannot use passes)."""
        return self is CallKind.BACKEND

    def starts_work(self, *, resolved: bool, approved: bool) -> bool:
        """Whether applying an answer may start work on the server (the claim then records it).

        An approved tool, a tool given its input, the backend; never a client's result or a form's values.
        """
        if self is CallKind.APPROVAL:
            return approved
        if self is CallKind.INPUT:
            return resolved
        return self is CallKind.BACKEND


_messages = TypeAdapter(list[Message])
_activity = TypeAdapter(ActivityMessage)


class PendingCall(BaseModel):
    """One tool call that waits for an answer, and the interrupt that asks for it."""

    interrupt_id: str
    tool_call_id: str | None
    """None only for a backend's own interrupt that is not about a tool call."""
    tool_name: str
    arguments: str
    """The arguments as the server proposed them: an approval applies to these and nothing else."""
    kind: CallKind
    reason: str
    response_schema: dict[str, Any]
    """Frozen when the turn suspends: later changes to tools or forms affect only new turns."""
    message: str | None = None
    expires_at: datetime | None = None
    metadata: dict[str, Any] | None = None
    form_key: str | None = None
    """Set when the call waits for a form, which the page sees as an `agent_form` activity message."""
    original: dict[str, Any] | None = None
    """A backend's own interrupt as it sent it: passed to the client unchanged."""
    state_patch: list[dict[str, Any]] = Field(default_factory=list)
    """The state change the call's streamed arguments predicted (`PredictState`): kept if the call succeeds."""

    @property
    def call_id(self) -> str:
        """The tool call this waits for; every kind but a backend's own interrupt has one."""
        if self.tool_call_id is None:
            raise ValueError(f"interrupt {self.interrupt_id} is not about a tool call")
        return self.tool_call_id

    def interrupt(self) -> Interrupt:
        """The interrupt as a client sees it."""
        if self.original is not None:
            return Interrupt.model_validate(self.original)
        return Interrupt(
            id=self.interrupt_id,
            reason=self.reason,
            message=self.message,
            tool_call_id=self.tool_call_id,
            response_schema=self.response_schema,
            expires_at=self.expires_at.isoformat() if self.expires_at else None,
            metadata=self.metadata,
        )


class OpenTurn(BaseModel):
    """A turn that ended with interrupts and waits for its resume."""

    turn_id: str
    run_id: str
    pending: list[PendingCall]
    state: JSON = None
    deferred_calls: list[str] = Field(default_factory=list)
    """Calls the backend made and will answer itself once its interrupt is answered."""
    provisional_results: list[ToolMessage] = Field(default_factory=list)
    """Results the backend reported for deferred calls before its interrupt: each stands unless it sends another."""
    counted_calls: list[str] = Field(default_factory=list)
    """Tool calls already counted against `max_tool_calls` in this turn: a replay is not a new call."""
    claimed_by: str | None = None
    """The run applying a resume right now; a second resume is refused while it is set."""
    claimed_at: datetime | None = None

    def claim_holds(self, now: datetime, lease: timedelta) -> bool:
        """A run claimed the turn less than `lease` ago; an older claim is a crashed replica's, and lapses."""
        return self.claimed_by is not None and self.claimed_at is not None and now - self.claimed_at < lease

    def claim_lapsed(self, now: datetime, lease: timedelta) -> bool:
        """A run claimed the turn and never finished applying it within `lease`: another may take over."""
        return self.claimed_by is not None and not self.claim_holds(now, lease)

    def retry_after(self, now: datetime, lease: timedelta) -> int:
        """Whole seconds until the claim lapses (at least 1): when another attempt may take the turn over."""
        return seconds_until(self.claimed_at, now, lease)

    def find(self, interrupt_id: str) -> PendingCall | None:
        """The pending call an interrupt id names."""
        return next((call for call in self.pending if call.interrupt_id == interrupt_id), None)


class AppliedResume(BaseModel):
    """The last resume applied on a thread, kept so that an identical replay changes nothing."""

    run_id: str
    fingerprints: dict[str, str]
    """interrupt id -> digest of the answer (status and payload)."""
    request_ids: dict[str, str] = Field(default_factory=dict)
    """interrupt id -> the `requestId` its answer carried in metadata: the same request applies once."""
    action_ids: dict[str, str] = Field(default_factory=dict)
    """tool call id -> interrupt id: a late submission addressed by action id (a form card's) finds its replay."""
    approvals: list[str] = Field(default_factory=list)
    """The interrupt ids that were approvals: replaying their answers needs the "approve" permission."""
    started: list[str] | None = None
    """The interrupt ids whose answers start work on the server (an approved tool, a tool given its input, the
    backend's own interrupt). None in a record from before this field."""
    outcome: dict[str, Any] | None = None
    """The RUN_FINISHED outcome of the resumed run, once it finished; the first one recorded stands."""
    applied_at: datetime | None = None
    """When the run that applies these answers claimed the turn. None in a record from before this field."""

    def still_applying(self, now: datetime, lease: timedelta) -> bool:
        """No outcome yet, and less than `lease` since the claim: the run applying these answers may still record one.

        After the lease none ever will (its replica died, or its store was cut before it could record it): a
        replay then records `lapsed_outcome`. A record from before `applied_at` has no lease left.
        """
        return self.outcome is None and self.applied_at is not None and now - self.applied_at < lease

    def retry_after(self, now: datetime, lease: timedelta) -> int:
        """Whole seconds until `still_applying` ends (at least 1)."""
        return seconds_until(self.applied_at, now, lease)

    def may_have_started(self) -> list[str]:
        """The interrupts whose answers may have started work; an older record's answered approvals all count."""
        return self.started if self.started is not None else [*self.approvals]

    def taken_over_by(self, later: AppliedResume) -> AppliedResume:
        """`later`, which took this unfinished resume over: this one's answers that `later` does not repeat stand."""
        return later.model_copy(
            update={
                "fingerprints": {**self.fingerprints, **later.fingerprints},
                "request_ids": {**self.request_ids, **later.request_ids},
                "action_ids": {**self.action_ids, **later.action_ids},
                "approvals": sorted({*self.approvals, *later.approvals}),
                "started": sorted({*self.may_have_started(), *later.may_have_started()}),
            }
        )


class Grant(BaseModel):
    """A tool a person allowed for the rest of a thread, approving one of its calls with `"remember": "thread"`.

    Stored and shown as the wire has it (`{"tool", "grantedBy", "grantedAt"}`), in `GET /threads/{id}`.
    """

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True)

    tool: str
    granted_by: str | None
    """Who approved the call that made the grant (the approver, under a four-eyes policy); None without auth."""
    granted_at: datetime

    def wire(self) -> dict[str, Any]:
        """The grant as the thread read shows it and the store keeps it; its time as approval records write theirs."""
        return {"tool": self.tool, "grantedBy": self.granted_by, "grantedAt": self.granted_at.isoformat()}


def with_grants(grants: Sequence[Grant], added: Sequence[Grant]) -> list[Grant]:
    """`grants` with `added`: one grant a tool, the latest for a tool granted again (its grantor may be another)."""
    by_tool = {grant.tool: grant for grant in [*grants, *added]}
    return sorted(by_tool.values(), key=lambda grant: grant.tool)


class ThreadRecord(BaseModel):
    """The small records the store keeps beside a thread's messages (see `adapter.stores`)."""

    thread_id: str
    owner: str | None = None
    """The principal of the run that created the thread; None leaves it open to all (`adapter._run._access`)."""
    open_turn: OpenTurn | None = None
    applied: AppliedResume | None = None
    grants: list[Grant] = Field(default_factory=list)
    """The tools a person allowed for the rest of the thread, one grant a tool."""

    @classmethod
    def from_head(cls, thread_id: str, head: ThreadHead) -> ThreadRecord:
        """The records of a stored head. Only these small records are validated, never the messages."""
        records = {"open_turn": head.open_turn, "applied": head.applied, "grants": head.grants or []}
        return cls.model_validate({"thread_id": thread_id, "owner": head.owner, **records})


LAPSED_AT: Final = datetime(1970, 1, 1, tzinfo=UTC)
"""The claim time of a claim its run ended on purpose (a draining replica's): no lease reaches back to it."""

LAPSED_MESSAGE = (
    "The answers were applied, but the run that applied them did not record how it ended within the claim lease "
    "(its server may have stopped). Read the thread, then send a new message."
)


def lapsed_outcome() -> dict[str, Any]:
    """The outcome a replay records for answers whose run recorded none within the lease: `RUN_INTERRUPTED`."""
    return {"type": "error", "code": codes.RUN_INTERRUPTED, "message": LAPSED_MESSAGE}


def seconds_until(since: datetime | None, now: datetime, lease: timedelta) -> int:
    """Whole seconds from `now` until `lease` after `since` (at least 1): what a "retry in" message says."""
    left = (since + lease - now).total_seconds() if since is not None else 0.0
    return max(1, math.ceil(left))


def answer_fingerprint(status: str, payload: JSON) -> str:
    """A digest that is equal exactly when two answers say the same thing."""
    canonical = json.dumps([status, payload], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def stored_message(message: Message) -> StoredMessage:
    """A message as the store keeps it: its wire JSON text (`message_text`)."""
    return StoredMessage(message.id, message.role, message_text(message))


def message_text(message: Message) -> str:
    """The canonical wire JSON text of a message: what the store keeps, and what a client's copy is compared by.

    `model_dump_json(by_alias=True, exclude_none=True)`, character for character (camelCase, no
    nulls, compact); a text with a lone surrogate, which has no UTF-8 form, is ASCII-escaped instead.
    """
    try:
        return _plain.to_json(message, by_alias=True, exclude_none=True).decode()
    except PydanticSerializationError:
        return json.dumps(wire_json(message))


def _without_omitting(schema: Any) -> Any:
    """The message schema without the SDK's per-model Python serializer, which only drops None fields.

    `exclude_none` drops them anyway, so the output is the same; the serializer then never leaves Rust
    (tests/history/test_history_reuse.py compares the two on any message).
    """
    if isinstance(schema, list):
        return [_without_omitting(node) for node in schema]
    if not isinstance(schema, dict):
        return schema
    wrap = schema.get("serialization")
    omitting = isinstance(wrap, dict) and getattr(wrap.get("function"), "__name__", "") == "_omit_fields_without_value"
    return {key: _without_omitting(value) for key, value in schema.items() if not (omitting and key == "serialization")}


_plain = SchemaSerializer(_without_omitting(TypeAdapter(Message).core_schema))


_PAUSED_FROM: Final = 256
"""Messages from which a thread is parsed with the collector paused (`adapter._collector`): below, the parse makes
about one young collection's worth of objects (700) or fewer."""


def parse_messages(stored: Sequence[StoredMessage]) -> list[Message]:
    """Stored messages as protocol messages, validated in one pass (a long thread's with the collector paused)."""
    if not stored:
        return []
    text = "[" + ",".join(message.json for message in stored) + "]"
    with COLLECTOR.paused() if len(stored) >= _PAUSED_FROM else nullcontext():
        try:
            return _messages.validate_json(text)
        except ValidationError:
            return _messages.validate_python(json.loads(text))  # pydantic's JSON parser refuses escaped lone surrogates


def stored_conversation(stored: Sequence[StoredMessage], offered: Mapping[str, Message]) -> list[Message]:
    """The stored messages as protocol messages, in one pass over the thread.

    A message `offered` (the client's copy, already validated at the edge) under the same id whose
    text is the stored text is the stored message: it is used as it is. Every other stored message is
    validated from the store, so a copy that differs in anything never replaces the server's.
    """
    same: dict[int, Message] = {}
    for position, kept in enumerate(stored):
        copy = offered.get(kept.id)
        if copy is not None and copy.role == kept.role and message_text(copy) == kept.json:
            same[position] = copy
    parsed = iter(parse_messages([kept for position, kept in enumerate(stored) if position not in same]))
    return [same[position] if position in same else next(parsed) for position in range(len(stored))]


def stored_cards(stored: Sequence[StoredMessage]) -> dict[str, ActivityMessage]:
    """The activity messages (form cards) among stored messages, by id; no other message is decoded."""
    return {m.id: _activity.validate_python(json.loads(m.json)) for m in stored if m.role == "activity"}


TITLE_CHARS: Final = 80
"""Characters of the first user message a default title keeps."""
MAX_TITLE_CHARS: Final = 200
"""Characters a title may have (a rename's)."""
_UNSHOWABLE: Final = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")  # control characters, lone surrogates


def default_title(messages: Sequence[Message]) -> str | None:
    """The start of the first user message's text, on one line; None when there is none."""
    for message in messages:
        if isinstance(message, UserMessage):
            content = message.content
            if isinstance(content, str):
                text = content
            else:
                text = " ".join(part.text for part in content if isinstance(part, TextPart))
            text = _UNSHOWABLE.sub("", " ".join(text.split()))
            if text:
                return text if len(text) <= TITLE_CHARS else text[: TITLE_CHARS - 1].rstrip() + "…"
    return None


def check_title(title: object) -> str | None:
    """A title a rename may set: a non-blank string of at most 200 characters, or None to clear it.

    Raises:
        LimitExceeded: 422 `INVALID_TITLE`, before the store is asked.
    """
    if title is None:
        return None
    if not isinstance(title, str):
        raise LimitExceeded("A title is a string, or null to clear it.", code=codes.INVALID_TITLE, status_code=422)
    if not title.strip() or len(title) > MAX_TITLE_CHARS or _UNSHOWABLE.search(title):
        message = f"A title has 1 to {MAX_TITLE_CHARS} characters, none a control character, and is not blank."
        raise LimitExceeded(message, code=codes.INVALID_TITLE, status_code=422)
    return title
