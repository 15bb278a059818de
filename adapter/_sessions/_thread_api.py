"""The thread API beside HTTP, behind `Adapter`'s methods: answer a turn, read a thread, revoke a grant, cancel."""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from ag_ui.core import PROTOCOL_VERSION, ResumeEntry, RunAgentInput

from adapter import _errors as codes
from adapter._errors import Forbidden, InvalidPage
from adapter._ids import new_id
from adapter._limits import check_id, id_problem
from adapter._run._access import ANSWERS, answer_action
from adapter._run._answers import cancelled, settle_answers
from adapter._run._calls import CallScope, tool_message
from adapter._run._config import EngineConfig
from adapter._run._events import TurnEvent, TurnEventType, notify
from adapter._run._gate import Answer, Resume, claimable, refuse_contradiction
from adapter._run._tools import Toolset
from adapter._thread._handle import RecordHandle
from adapter._thread._record import ThreadRecord
from adapter._types import wire_json
from adapter.stores import StoredMessage

log = logging.getLogger("adapter.thread_api")

EntryLike = ResumeEntry | Mapping[str, Any]
DEFAULT_PAGE: Final = 100
MAX_PAGE: Final = 1000


def resume_entries(
    record: ThreadRecord | None, entries: Iterable[EntryLike], metadata: Mapping[str, Any] | None
) -> list[ResumeEntry]:
    """Entries as `ResumeEntry`, addressed by `interruptId` or by the seed's `actionId` (the tool call id).

    `metadata` (audit fields such as `submittedBy` and `requestId`) is added to every entry. An action id that no
    open or applied request has is kept as the entry's interrupt id: the gate refuses it (RESUME_UNKNOWN_INTERRUPT)
    after the policy, as any unknown interrupt, so a caller learns no more of the thread than the policy lets it.
    """
    resolved = []
    for entry in entries:
        raw = entry.model_dump(by_alias=True, exclude_none=True) if isinstance(entry, ResumeEntry) else dict(entry)
        extra = {**dict(metadata or {}), **dict(raw.get("metadata") or {})}
        action_id = raw.pop("actionId", None) or extra.get("actionId")
        if action_id is not None:
            extra["actionId"] = action_id
            if "interruptId" not in raw:
                raw["interruptId"] = _interrupt_for(record, str(action_id))
        raw["metadata"] = extra or None
        resolved.append(ResumeEntry.model_validate({k: v for k, v in raw.items() if v is not None}))
    return resolved


def _interrupt_for(record: ThreadRecord | None, action_id: str) -> str:
    """The interrupt of the open request with this action id, or of the last applied one (a replay)."""
    turn = record.open_turn if record else None
    call = next((c for c in turn.pending if c.tool_call_id == action_id), None) if turn else None
    if call is not None:
        return call.interrupt_id
    applied = record.applied if record else None
    if applied is not None and action_id in applied.action_ids:
        return applied.action_ids[action_id]
    return action_id  # no request has it: the gate refuses it by its action id (`_gate._addressed`)


async def resume_input(
    config: EngineConfig,
    thread_id: str,
    entries: Iterable[EntryLike],
    metadata: Mapping[str, Any] | None,
    principal: str | None,
    run_id: str | None = None,
) -> RunAgentInput:
    """The input `Adapter.resume` runs: the answers `entries` (see `resume_entries`) on the thread, and nothing else.

    The run asks the policy for each answer (`Access.check_input`); an outsider is refused first, on the head
    alone, so that no action id tells it anything.

    Raises:
        Forbidden: THREAD_FORBIDDEN for a caller the policy lets neither read the thread nor answer on it.
        LimitExceeded: 422 `INVALID_ID` for a thread id no store can keep, before the store is asked.
    """
    check_id(thread_id, "/threadId")
    record = await RecordHandle(config.threads, thread_id).load(messages=False)
    await config.access.admit(principal, record, ANSWERS)
    resolved = resume_entries(record, entries, metadata)
    # A 1.0 input: without `protocolVersion` the run would downgrade its events for a pre-1.0 peer (`_compat`).
    run_id = run_id or new_id("run")
    return RunAgentInput(
        thread_id=thread_id, run_id=run_id, messages=[], resume=resolved, protocol_version=PROTOCOL_VERSION
    )


async def read_thread(
    config: EngineConfig, thread_id: str, principal: str | None, page: Page | None = None
) -> dict[str, Any] | None:
    """The stored conversation (form cards included) and any open interrupts, as wire JSON.

    With a `page`, only the messages after `page.after` (from the start without one), at most
    `page.limit`, and `next`: the id to read the following page after, or None at the end. Only the
    page's messages are read from the store (`after` is found by the store's index).

    None when there is no such thread, or when `principal` may not read it: the two look the same, and take
    the same time (the head alone is read before the policy is asked).

    Raises:
        AdapterError: INVALID_PAGE when `page.after` names no message of the thread.
    """
    check_id(thread_id, "/threadId")
    handle = RecordHandle(config.threads, thread_id)
    head = await handle.load(messages=False)
    if head is None or not await config.access.allows(principal, head.owner, "read"):
        return None
    if page is None:
        record = await handle.load()
    else:
        start = await _page_start(handle, page)
        record = await handle.load_page(start, start + page.limit)
    if record is None or record.owner != head.owner:
        return None  # deleted (and perhaps created again) in between
    turn = record.open_turn
    interrupts = [wire_json(p.interrupt()) for p in turn.pending] if turn else []
    grants = [grant.wire() for grant in record.grants]
    if page is None:
        messages = [json.loads(message.json) for message in handle.stored]
        return {"threadId": thread_id, "messages": messages, "interrupts": interrupts, "grants": grants}
    shown, following = await _page_end(handle, start)
    messages = [json.loads(message.json) for message in shown]
    return {"threadId": thread_id, "messages": messages, "interrupts": interrupts, "grants": grants, "next": following}


async def revoke_grant(config: EngineConfig, thread_id: str, tool: str, principal: str | None) -> bool | None:
    """Take back the thread's grant of `tool`: True; False when it has none; None for an unknown thread or an outsider.

    Who may revoke is who may approve on the thread: a grant is an approval given ahead. An outsider (who may
    neither read the thread nor approve on it) gets what an unknown thread gets.

    Raises:
        Forbidden: APPROVAL_FORBIDDEN for a caller who may read the thread but not "approve" on it; nothing changed.
        AdapterError: THREAD_CONFLICT when the thread kept changing meanwhile; nothing was revoked.
        LimitExceeded: 422 `INVALID_ID` for a thread id no store can keep, before the store is asked.
    """
    check_id(thread_id, "/threadId")
    handle = RecordHandle(config.threads, thread_id)
    record = await handle.load(messages=False)
    if record is None:
        return None
    if not await config.access.allows(principal, record.owner, "approve"):
        if not await config.access.allows(principal, record.owner, "read"):
            return None
        message = "this caller may not approve on this thread, so may not revoke its grants"
        raise Forbidden(message, code=codes.APPROVAL_FORBIDDEN)
    return await handle.revoke(tool)


async def _page_end(handle: RecordHandle, start: int) -> tuple[Sequence[StoredMessage], str | None]:
    """The page's messages and its `next` cursor: the id of its last message that names its own position.

    Ids are unique in a thread the engine wrote; a thread stored before that rule may repeat one, and a
    cursor naming an id whose first position is earlier would page back: the page ends at the last
    message whose id is its own, and the next page starts right after it.
    """
    stored = handle.stored
    if not stored or start + len(stored) >= handle.message_count:
        return stored, None
    for index in range(len(stored) - 1, -1, -1):
        if await handle.find(stored[index].id) == start + index:
            return stored[: index + 1], stored[index].id
    log.warning("thread %s: a page of repeated message ids; paging ends here", handle.thread_id)
    return stored, None


async def _page_start(handle: RecordHandle, page: Page) -> int:
    """The position the page starts at: just after the message `page.after`, found by the store."""
    if page.after is None:
        return 0
    found = None if id_problem(page.after) is not None else await handle.find(page.after)
    if found is None:
        raise InvalidPage("after names no message of this thread")
    return found + 1


@dataclasses.dataclass(frozen=True, slots=True)
class Page:
    """Which stored messages a read returns: at most `limit`, after the message `after` (None: from the first)."""

    after: str | None = None
    limit: int = DEFAULT_PAGE

    def __post_init__(self) -> None:
        if not 1 <= self.limit <= MAX_PAGE:
            raise ValueError(f"a page holds 1 to {MAX_PAGE} messages, not {self.limit}")


async def cancel_turn(config: EngineConfig, thread_id: str, principal: str | None) -> bool:
    """Abandon the open turn: every waiting call is answered as cancelled and nothing runs. False if none.

    The policy is asked what a resume cancelling every call would be asked (an approval's answer needs "approve"),
    after an outsider is refused on the head alone.
    """
    check_id(thread_id, "/threadId")
    handle = RecordHandle(config.threads, thread_id)
    record = await handle.load(messages=False)
    await config.access.admit(principal, record, ANSWERS)
    turn = record.open_turn if record else None
    if record is None or turn is None:
        return False
    await config.access.check_actions(principal, record, [answer_action(call) for call in turn.pending])
    earlier = claimable(turn, record.applied, now=config.now(), claim_lease=config.claim_lease)
    answers = [Answer(call, "cancelled") for call in turn.pending]
    if earlier is not None:
        refuse_contradiction(earlier, answers)  # a lapsed claim may have run a tool: cancelling would deny it
    await handle.load_same()  # the messages, of the version the checks read
    # A resume whose answers are all `cancelled`, applied as a resume applies them (nothing runs): the same
    # ToolMessages, form cards and approval records; a backend's own interrupt is not forwarded, and the call it
    # names, if any, is cancelled too.
    settled = await settle_answers(Resume(turn, answers), CallScope(config, Toolset(config.tools), None, principal))
    history = handle.conversation()
    stored = len(history)
    settled.apply_to(history, turn.turn_id, config.now(), principal)
    history += [
        tool_message(call.tool_call_id, cancelled(call.tool_name or "the agent's call"))
        for call in turn.pending
        if call.kind.forwarded and call.tool_call_id is not None
    ]
    await handle.close_turn(history[stored:], settled.moved)
    interrupt_ids = tuple(call.interrupt_id for call in turn.pending)
    await notify(
        config.listeners, TurnEvent(TurnEventType.TURN_CANCELLED, thread_id, turn.turn_id, None, interrupt_ids)
    )
    return True
