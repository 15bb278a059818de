"""The handle on one thread in the store: its records (`_record`) read once, its messages written a turn at a time.

It reads the thread once per run (or a page of it, or the tail a history view declares) and builds the
history a run starts from; its writes (claims, turns opened and closed, finished runs) build on what it read.
The run owns its conversation: each save is given the messages to store as values, never a list the handle keeps.
The handle reads and writes through a `ParsedStore` (`adapter._thread._cache`), which keeps the parsed-thread cache.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter, is_
from typing import Any, NoReturn

from ag_ui.core import AssistantMessage, Message, ToolMessage

from adapter import _errors as codes
from adapter._errors import AdapterError, ResumeError, ThreadConflict
from adapter._ids import new_id
from adapter._thread._cache import ParsedStore
from adapter._thread._conversation import (
    HeldIds,
    ids_held,
    keep_server_activity,
    refuse_second_answers,
    server_said,
)
from adapter._thread._record import (
    LAPSED_AT,
    AppliedResume,
    Grant,
    OpenTurn,
    PendingCall,
    ThreadRecord,
    stored_cards,
    stored_conversation,
    stored_message,
    with_grants,
)
from adapter.stores import (
    ANY_INCARNATION,
    KEEP,
    JournalAppend,
    StaleClaim,
    StoreConflict,
    StoredMessage,
    StoredThread,
    StoreUnavailable,
    ThreadChange,
    ThreadGone,
    ThreadHead,
)

log = logging.getLogger("adapter.record")

_ID = attrgetter("id")
"""A message's id (a protocol or a stored message): mapped over whole threads, in C."""


class RecordHandle:
    """The thread as this run last read or wrote it: a snapshot of what was read, and saves that take values.

    A save is given the run's new messages (`new`: it appends those the store does not hold; a client's branch may
    hold stored messages in another order, and the record keeps them where they are, never dropping one) and the
    stored messages that changed in place (`moved`: replaced where they are stored), and sets the records that
    changed. After a claim every save carries the claim number as its fence.
    """

    def __init__(
        self,
        threads: ParsedStore,
        thread_id: str,
        *,
        principal: str | None = None,
        may_join: Callable[[str | None], Awaitable[bool]] | None = None,
    ) -> None:
        self.threads = threads
        """The store, read and written through the parsed-thread cache (which it keeps, not this handle)."""
        self.thread_id = thread_id
        self.record = ThreadRecord(thread_id=thread_id, owner=principal)
        """A thread this run creates is owned by the run's principal."""
        self._may_join = may_join
        """Whether this run may store into a thread another request created meanwhile (its owner given); None: yes."""
        self._known: list[str] = []
        """The ids of the stored messages (from `base`) as this run last read or wrote them: all it may build on."""
        self._known_set: set[str] | None = None
        """`_known` as a set (`_known_ids`), built at the first save that appends after a load, kept up by each save."""
        self._held: tuple[list[Message] | None, HeldIds] | None = None
        """`held_ids` of the conversation it was built from (`_conversation`): rebuilt once a load replaces it."""
        self.version = 0
        self.incarnation: str | None = new_id("thread")
        """The life of the thread this handle writes to: the one it read, or the one it creates (drawn here).

        Every save names it (`TurnStore.save`): a save meant for a thread deleted since (and perhaps created again
        under its id) is refused, and the run ends with THREAD_DELETED instead of writing into another life.
        """
        self.base = 0
        """The position of `stored[0]` in the thread: above 0 when only its tail was read (`load_tail`)."""
        self.stored: Sequence[StoredMessage] = ()
        """The stored messages as read (from `base`): what `conversation` is built from."""
        self._head: ThreadHead | None = None
        self._expected: ThreadHead | None = None
        """The head as this handle last read or wrote it: what a save's compare-and-set builds on."""
        self._fence: int | None = None
        self._conversation: list[Message] | None = None
        self._held_before: set[str] = set()
        """Ids of the client's messages the store holds before `base` (found by `load_tail`)."""

    async def load(self, *, messages: bool = True) -> ThreadRecord | None:
        """Read the thread's records (and its messages from `base`, unless told not to); None for a new thread."""
        stored = await self.threads.load(self.thread_id, since=self.base if messages else None)
        return None if stored is None else self._read(stored, messages)

    async def load_or_create(
        self, title: str | None, journal: JournalAppend | None = None, *, messages: bool = True
    ) -> tuple[ThreadRecord | None, bool]:
        """`load`; for a thread not there, the save that creates it, in the same store call; and whether it did.

        A thread found is read as `load` reads it, and nothing of this call is stored. A thread created is stored
        before the run's first event, with no message yet: its owner (the run's principal), `title`, the life this
        handle drew, and `journal`'s events (the run's RUN_STARTED) in the same transaction, so a reattach on any
        replica knows whose the thread is, and a listing shows it while its first answer streams. A thread the store
        saw made and deleted again by others, each time it looked, is neither found nor created: the run goes on as
        on a thread another request creates meanwhile, which its first save finds (`_rebase`).
        """
        change = self._creating(ThreadChange(title=title))
        since = self.base if messages else None
        try:
            stored = await self.threads.load_or_create(self.thread_id, change, journal, since=since)
        except StoreConflict:
            return None, False
        if stored is not None:
            return self._read(stored, messages), False
        self._saved(_Change(change), 1)
        return None, True

    def _creating(self, change: ThreadChange) -> ThreadChange:
        """`change` as the save that creates the thread: it names the thread's owner, and this creation of it."""
        return dataclasses.replace(change, owner=self.record.owner, incarnation=self.incarnation)

    def _read(self, stored: StoredThread, messages: bool) -> ThreadRecord:
        """Take `stored` as what this run read (its messages too, unless it read the head alone)."""
        self._head, self._expected, self.version = stored.head, stored.head, stored.head.version
        self.incarnation = stored.head.incarnation
        self.record = ThreadRecord.from_head(self.thread_id, stored.head)
        self.stored, self._conversation = stored.messages, None
        if messages:
            self._known, self._known_set = list(map(_ID, stored.messages)), None
        return self.record

    async def load_page(self, start: int, stop: int) -> ThreadRecord | None:
        """Read the thread's records and its messages at positions `[start, stop)` alone into `stored`.

        For reading only: a handle holding a slice has nothing to save a turn against.
        """
        stored = await self.threads.load(self.thread_id, since=start, until=stop)
        if stored is None:
            return None
        self._head, self._expected, self.version = stored.head, stored.head, stored.head.version
        self.incarnation = stored.head.incarnation
        self.record = ThreadRecord.from_head(self.thread_id, stored.head)
        self.stored, self._conversation = stored.messages, None
        return self.record

    async def load_tail(self, count: int, client: Sequence[Message]) -> None:
        """After a head-only `load`, read only the thread's last `count` messages, of the same version.

        A client message the tail lacks is looked up by id (`find_message`): one the store holds
        earlier is not new, as with the whole thread read.

        Raises:
            AdapterError: THREAD_CONFLICT when the thread changed since the head was read.
        """
        if self._head is None:
            return  # a new thread: nothing stored to read
        read = self.version
        self.base = max(self._head.message_count - count, 0)
        await self.load()
        if self.version != read:
            raise AdapterError("the thread changed while this run was in progress", code=codes.THREAD_CONFLICT)
        if self.base > 0:
            self._held_before = await self._found_before(client)

    async def load_same(self) -> None:
        """After a head-only `load`, read the whole thread, of the same version.

        Raises:
            AdapterError: THREAD_CONFLICT when the thread changed since the head was read.
        """
        if self._head is None:
            return  # a new thread: nothing stored to read
        read = self.version
        await self.load()
        if self.version != read:
            raise AdapterError("the thread changed while this run was in progress", code=codes.THREAD_CONFLICT)

    async def _found_before(self, client: Sequence[Message]) -> set[str]:
        """The ids of the client's messages outside the tail that the store holds before it (one lookup each)."""
        tail = {message.id for message in self.stored}
        found: set[str] = set()
        for message in client:
            if message.id not in tail and message.id not in found:
                position = await self.threads.store.find_message(self.thread_id, message.id)
                if position is not None and position < self.base:
                    found.add(message.id)
        return found

    async def older_conversation(self) -> list[Message]:
        """The stored messages before `base` (none when the whole thread was read), as protocol messages."""
        if self.base == 0:
            return []
        stored = await self.threads.load(self.thread_id, since=0, until=self.base)
        return stored_conversation(stored.messages, {}) if stored is not None else []

    @property
    def message_count(self) -> int:
        """How many messages the thread held when this handle last read it (0 before a read)."""
        return self._head.message_count if self._head is not None else 0

    async def find(self, message_id: str) -> int | None:
        """The position of the stored message with this id (the first), or None; read by the store's index."""
        return await self.threads.store.find_message(self.thread_id, message_id)

    def conversation(self, client: Sequence[Message] = ()) -> list[Message]:
        """The stored messages as protocol messages, built once per load (`ParsedStore.conversation`).

        The client's copy of a stored message is used where it is the same text; the rest is
        validated from the store: one pass over the thread, and a copy that differs never replaces
        the stored message.
        """
        if self._conversation is None:
            read = StoredThread(self._head, self.base, self.stored) if self._head is not None else None
            self._conversation = self.threads.conversation(self.thread_id, read, client) if read is not None else []
        return list(self._conversation)

    async def history(self, client: Sequence[Message], *, server_kept: bool) -> tuple[list[Message], int]:
        """The history a new run starts from, and how many of its first messages are the stored ones, in place.

        No request deletes what the record holds. The run owns the history: a save is given what follows those.

        Continued: with a server-kept history, or when the client sent only messages the record does not
        hold, the stored conversation, then the client's new messages: the model sees the whole thread.
        A branch: a client-kept history that holds stored messages is what the model sees, even where it
        leaves some out or edits what the client said (it regenerates or edits an earlier message). What
        the server said stays as stored (the stored copy of each assistant, tool, reasoning and activity
        message it names; a call it keeps keeps its stored answer), and the record keeps what the branch
        left out: only the messages it does not hold are appended.

        Raises:
            ResumeError: RESUME_DUPLICATE when the input gives an answered call a second answer
                (`adapter._thread._conversation.refuse_second_answers`, against the whole thread).
        """
        stored = {message.id for message in self.stored} | self._held_before
        if server_kept or (self.stored and not any(message.id in stored for message in client)):
            history, known = self.conversation(client), set(stored)
            in_place = len(history)
            for message in client:
                if message.id not in known:
                    known.add(message.id)
                    history.append(message)
        else:
            ours = self.conversation(client)
            branch = keep_server_activity(client, [m.id for m in self.stored], stored_cards(self.stored))
            history = server_said(branch, ours)
            in_place = next(
                (i for i, (mine, theirs) in enumerate(zip(history, self.stored, strict=False)) if mine.id != theirs.id),
                min(len(history), len(self.stored)),
            )
        recorded = {m.tool_call_id: m.id for m in self.conversation(client) if isinstance(m, ToolMessage)}
        refuse_second_answers(history, stored, recorded | await self._answers_before(history))
        return history, in_place

    def held_ids(self) -> HeldIds:
        """The ids of the messages, the tool calls (made or answered) and the answered calls the loaded record holds.

        A branch may leave stored messages out of a run's history; a backend's new message or call may
        still not take their ids (a thread read from its tail checks the older part by other means). A thread
        the parsed-thread cache keeps whole has them kept there (`KnownThread.held_ids`), then with the ids of the
        messages this run stored since, which its history holds anyway.
        """
        self.conversation()  # builds `_conversation` once per load
        if self._held is not None and self._held[0] is self._conversation:
            return self._held[1]  # asked at every model step: the loaded record is the same until the next load
        whole = self._head is not None and self.base == 0 and len(self.stored) == self._head.message_count
        kept = self.threads.held_ids(self.thread_id, self._expected) if whole and self._expected is not None else None
        held = kept if kept is not None else ids_held(self._conversation or [])
        self._held = (self._conversation, held)
        return held

    def past_loaded(self, history: list[Message]) -> list[Message]:
        """`history` past the loaded conversation when it starts with all of it, else the whole of `history`.

        The ids of what it leaves out are those `held_ids` gives: a run's history that continues the stored thread
        (a resume, a continued run) is walked only where it goes past it. Its messages are those of `conversation`
        itself, so the comparison is one of identities, in C: a branch (the client's own copies) is walked whole,
        as before, never compared field by field.
        """
        loaded = self._conversation
        if not loaded or len(history) < len(loaded) or not all(map(is_, history, loaded)):
            return history
        return history[len(loaded) :]

    async def _answers_before(self, history: Sequence[Message]) -> dict[str, str]:
        """The answers the thread stores before `base`, by call id; read only when a new answer's call is older.

        A call in the tail has its stored answer (if any) after it, in the tail too.
        """
        if self.base == 0:
            return {}
        stored = {message.id for message in self.stored} | self._held_before
        called = {c.id for m in history if isinstance(m, AssistantMessage) for c in m.tool_calls or []}
        if all(m.tool_call_id in called for m in history if isinstance(m, ToolMessage) and m.id not in stored):
            return {}
        older = await self.older_conversation()
        return {m.tool_call_id: m.id for m in older if isinstance(m, ToolMessage)}

    def resumed_history(self, client: Sequence[Message]) -> tuple[list[Message], bool]:
        """The history a resume continues, and whether the client's messages already hold all of it.

        The history is the stored conversation: the truth about the open turn, whatever the client sent.
        The client holds it when its messages have the stored ids in order, form cards aside.
        """
        ids = list(map(_ID, self.stored))
        merged = keep_server_activity(client, ids, stored_cards(self.stored))
        held = len(merged) >= len(ids) and list(map(_ID, merged[: len(ids)])) == ids
        return self.conversation(client), held

    # Writes: each builds on what this handle last read or wrote.

    async def claim(
        self,
        claimed: OpenTurn,
        applied: AppliedResume,
        made: Sequence[Grant] = (),
        journal: JournalAppend | None = None,
    ) -> None:
        """Store the open turn as `claimed` by a run applying `applied`; exactly one of two racing resumes wins.

        The grants its approvals make (`made`) are stored in the same save: of two racing approvals that both
        remember, the one whose claim wins stores its grant. With `journal` (the run's RUN_STARTED), in the same call.
        """
        grants = with_grants(self.record.grants, made) if made else None
        change = ThreadChange(open_turn=_json(claimed), applied=_json(applied), claim=True)
        change = change if grants is None else dataclasses.replace(change, grants=_wire(grants))
        await self._claim(_Change(change), journal)
        update: dict[str, Any] = {"open_turn": claimed, "applied": applied}
        self.record = self.record.model_copy(update=update if grants is None else {**update, "grants": grants})

    async def revoke(self, tool: str) -> bool:
        """Take the thread's grant of `tool` back; False when it has none. Read again and retried on a conflict.

        Raises:
            AdapterError: THREAD_CONFLICT when the thread kept changing meanwhile; nothing was revoked.
        """
        for _ in range(_REVOKE_ATTEMPTS):
            kept = [grant for grant in self.record.grants if grant.tool != tool]
            if len(kept) == len(self.record.grants):
                return False
            try:
                await self._save(_Change(ThreadChange(grants=_wire(kept) if kept else None)))
            except StoreConflict:
                if await self.load(messages=False) is None:
                    return False
                continue
            self.record = self.record.model_copy(update={"grants": kept})
            return True
        raise ThreadConflict("the thread kept changing while a grant was revoked")

    async def claim_closed(
        self,
        applied: AppliedResume,
        new: Sequence[Message],
        moved: Sequence[Message] = (),
        journal: JournalAppend | None = None,
    ) -> None:
        """`claim` and `close_turn` in one save, for answers whose applying runs nothing (`Resume.runs_nothing`).

        The claim orders the work a resume starts on the server; where it starts none, claiming and
        storing the answers together leaves nothing between them for another replica to see or take
        over, and exactly one of two racing resumes still wins. With `journal`, in the same call.
        """
        change = self._change(new, moved, open_turn=None, applied=_json(applied), claim=True)
        await self._claim(change, journal)
        self.record = self.record.model_copy(update={"open_turn": None, "applied": applied})

    async def _claim(self, change: _Change, journal: JournalAppend | None = None) -> None:
        try:
            await self._save(change, journal)
        except StoreConflict:
            raise ResumeError("another request resumed this turn first", code=codes.RESUME_CONFLICT) from None
        assert self._head is not None  # a turn to claim was loaded
        self._fence = self._head.claim + 1

    async def release(self) -> None:
        """Give the turn back as it was read, after a resume failed before it applied anything."""
        head = self._head
        if self._fence is None or head is None:
            return
        try:
            await self._save(_Change(ThreadChange(open_turn=head.open_turn, applied=head.applied, grants=head.grants)))
        except StoreConflict:
            log.warning("thread %s changed before a failed resume could release its claim", self.thread_id)

    async def lapse_claim(self) -> None:
        """End this run's claim now, as a lease that ran out ends it: another replica takes the turn over at once.

        The turn stays claimed and its answers spent, so only the same answers take it over, and a call they
        may have started runs again with the same idempotency key (at least once, as after a crash); a claim
        merely given back (`release`) would let other answers in after work began.
        """
        turn, applied = self.record.open_turn, self.record.applied
        if self._fence is None or turn is None or turn.claimed_at is None:
            return
        turn = turn.model_copy(update={"claimed_at": LAPSED_AT})
        if applied is not None and applied.outcome is None:
            applied = applied.model_copy(update={"applied_at": LAPSED_AT})
        try:
            lapsed = ThreadChange(open_turn=_json(turn), applied=KEEP if applied is None else _json(applied))
            await self._save(_Change(lapsed))
        except (StoreConflict, StaleClaim):
            log.warning("thread %s changed before a cut resume could lapse its claim", self.thread_id)
            return
        except StoreUnavailable:
            log.warning("thread %s: a cut resume could not lapse its claim; it lapses after the lease", self.thread_id)
            return
        self.record = self.record.model_copy(update={"open_turn": turn, "applied": applied})

    async def close_turn(self, new: Sequence[Message], moved: Sequence[Message] = ()) -> None:
        """The open turn's answers are applied: store them; nothing waits on this thread any more.

        Raises:
            AdapterError: THREAD_CONFLICT when another run took the turn over (this run's claim lapsed
                and was superseded): nothing of this run is stored.
        """
        try:
            await self._save(self._change(new, moved, open_turn=None))
        except StoreConflict:
            log.warning("thread %s: a run lost its claim before storing its answers", self.thread_id)
            raise AdapterError("another request took this turn over", code=codes.THREAD_CONFLICT) from None
        self.record = self.record.model_copy(update={"open_turn": None})

    async def hold_turn(
        self, pending: list[PendingCall], new: Sequence[Message], moved: Sequence[Message] = ()
    ) -> OpenTurn:
        """Store the answers applied so far, the claimed turn waiting on `pending` while they are forwarded.

        The stored turn keeps this run's claim: should the replica die mid-forward, the claim lapses after the
        lease and the same answers take the turn over (`adapter._run._gate`); an unclaimed turn would wait forever.

        Raises:
            AdapterError: THREAD_CONFLICT when this run's claim lapsed while its answers were applied (a slow
                tool) and another request took the turn over with the same answers: that request's record
                stands and nothing of this run is stored, as in `close_turn`.
        """
        assert self.record.open_turn is not None and self._fence is not None  # only a claimed turn is held
        turn = self.record.open_turn.model_copy(update={"pending": pending})
        try:
            await self._save(self._change(new, moved, open_turn=_json(turn)))
        except StoreConflict:
            log.warning("thread %s: a run lost its claim before holding its turn for a forward", self.thread_id)
            raise AdapterError("another request took this turn over", code=codes.THREAD_CONFLICT) from None
        self.record = self.record.model_copy(update={"open_turn": turn})
        return turn

    async def reopen_turn(self, turn: OpenTurn) -> None:
        """The backend refused its answers or could not be reached: the turn waits again, unclaimed, answers unspent.

        The applied record goes back to what it was before the claim, unless that was a lapsed claim's own
        unfinished one (this run took the turn over): restored, it would refuse every resume as "still applying".
        """
        applied = self._head.applied if self._head is not None else None
        if applied is not None and applied.get("outcome") is None:
            applied = None
        waiting = turn.model_copy(update={"claimed_by": None, "claimed_at": None})
        try:
            await self._save(_Change(ThreadChange(open_turn=_json(waiting), applied=applied)))
        except StoreConflict:
            log.warning("thread %s changed before a refused resume could reopen its turn", self.thread_id)
            return
        previous = AppliedResume.model_validate(applied) if applied else None
        self.record = self.record.model_copy(update={"open_turn": waiting, "applied": previous})

    async def open_turn(
        self,
        turn: OpenTurn,
        new: Sequence[Message],
        resumed_outcome: dict[str, Any] | None,
        journal: JournalAppend | None = None,
    ) -> None:
        """Store a suspended turn (with `journal`, the run's last events in the same call).

        Nothing is reported to the client before this succeeds.
        """
        applied = self.record.applied
        if resumed_outcome is None:
            applied = None  # a newer interrupted run supersedes earlier answers: replaying them is unknown (RES-9)
        elif applied is not None:
            applied = applied.model_copy(update={"outcome": resumed_outcome})
        change = self._change(new, open_turn=_json(turn), applied=_json(applied) if applied else None)
        try:
            await self._save(change, journal)
        except StoreConflict:
            message = "the thread changed while this run was in progress"
            raise AdapterError(message, code=codes.THREAD_CONFLICT) from None
        self.record = self.record.model_copy(update={"open_turn": turn, "applied": applied})

    async def finish(
        self,
        new: Sequence[Message],
        run_id: str,
        resumed_outcome: dict[str, Any] | None,
        journal: JournalAppend | None = None,
    ) -> bool:
        """Store the new messages of a finished run, and how a resumed run ended (for replays); whether it was stored.

        With `journal`, the run's last events go in the same call (and only with it). An outcome already recorded
        stands (`record_outcome`): the messages are stored after it all the same.
        """

        def finished() -> _Change:
            applied = self._unsettled(run_id)
            if resumed_outcome is not None and applied is not None:
                return self._change(new, applied=_json(applied.model_copy(update={"outcome": resumed_outcome})))
            return self._change(new)

        return await self._update(finished, messages=True, journal=journal)

    async def record_outcome(self, run_id: str, outcome: dict[str, Any]) -> None:
        """Remember how a resumed run ended, so that a replay of its resume ends the same way.

        The first outcome recorded for a run stands: a replay that recorded `lapsed_outcome` after the lease, and
        the run's own late ending, race by compare-and-set, and the loser keeps what the winner stored.
        """

        def recorded() -> _Change | None:
            applied = self._unsettled(run_id)
            if applied is None:
                return None
            return _Change(ThreadChange(applied=_json(applied.model_copy(update={"outcome": outcome}))))

        await self._update(recorded, messages=False)

    def _unsettled(self, run_id: str) -> AppliedResume | None:
        """The applied resume of `run_id`, as last read, while it has no outcome recorded."""
        applied = self.record.applied
        return applied if applied is not None and applied.run_id == run_id and applied.outcome is None else None

    async def _update(
        self,
        change: Callable[[], _Change | None],
        *,
        messages: bool,
        attempts: int = 3,
        journal: JournalAppend | None = None,
    ) -> bool:
        """Save `change()` against the latest records, re-reading them when another request wrote in between.

        After a conflict the run's new messages go after whatever the other request stored (`change` is asked again,
        on the thread read again, with its `messages` when the save stores some): no conflict rewrites history this
        run did not read (`_rebase`). Whether it was saved (with `journal`, in the same call).

        Raises:
            AdapterError: THREAD_CONFLICT when that cannot be done; nothing of this save is stored.
        """
        for _ in range(attempts):
            wanted = change()
            if wanted is None:
                return False
            try:
                await self._save(wanted, journal)
                return True
            except StaleClaim:
                log.warning("thread %s was claimed by another run; this run's update was refused", self.thread_id)
                return False
            except StoreConflict:
                await self._rebase(messages)
        log.warning("thread %s kept changing; an update was dropped", self.thread_id)
        return False

    async def _rebase(self, messages: bool) -> None:
        """Re-read the thread after a conflict (its messages too, for a save that stores some).

        A thread this run found missing was created by another request meanwhile: it is the creator's, and the
        run stores into it only if `may_join` lets it. Stored messages this run did not read may be followed,
        never replaced or dropped: the run's new messages go after them, but for those they hold already.

        Raises:
            AdapterError: THREAD_CONFLICT when the policy refuses, or when the messages this run built on changed.
        """
        created, known = self._head is None, self._known
        await self.load(messages=messages)
        if created and self._may_join is not None and not await self._may_join(self.record.owner):
            raise AdapterError("another request created this thread during this run", code=codes.THREAD_CONFLICT)
        if messages and self._known[: len(known)] != known:
            raise AdapterError("the thread changed while this run was in progress", code=codes.THREAD_CONFLICT)

    def _change(self, new: Sequence[Message], moved: Sequence[Message] = (), **records: Any) -> _Change:
        """A save of `new` (those the store does not hold yet, appended) and `moved` (replaced where stored)."""
        held = self._known_ids() if new else frozenset()
        appended = [message for message in new if message.id not in held]
        replaced = self._positions(moved)
        append = [stored_message(message) for message in appended]
        replace = {position: stored_message(message) for position, message in replaced.items()}
        return _Change(ThreadChange(append=append, replace=replace, **records), appended, replaced)

    def _known_ids(self) -> set[str]:
        """`_known` as a set: built once per load, not at each save (a long thread has many ids)."""
        if self._known_set is None:
            self._known_set = set(self._known)
        return self._known_set

    def _positions(self, moved: Sequence[Message]) -> dict[int, Message]:
        """The `moved` messages the store holds, by their position in the thread: a save replaces them there."""
        if not moved:
            return {}
        moved_ids = {message.id for message in moved}
        at = {message_id: self.base + i for i, message_id in enumerate(self._known) if message_id in moved_ids}
        return {at[message.id]: message for message in moved if message.id in at}

    async def _save(self, change: _Change, journal: JournalAppend | None = None) -> None:
        """Save `change` on the version and life this handle read (see `incarnation`); with `journal`, in one call.

        Raises:
            AdapterError: THREAD_DELETED when the thread's life this run read is over; nothing was stored.
            StoreConflict: As `TurnStore.save`, after renames in between were let pass (`_only_renamed`).
        """
        if self.version == 0:
            change = dataclasses.replace(change, change=self._creating(change.change))
        life = self.incarnation if self.version else ANY_INCARNATION
        for attempt in range(_RENAMES_TOLERATED + 1):
            try:
                version = await self._write(change, life, journal)
                break
            except ThreadGone:
                self._gone(change.change)
            except StaleClaim:
                raise
            except StoreConflict:
                if attempt == _RENAMES_TOLERATED or not await self._only_renamed(change.change.grants is not KEEP):
                    raise
        self._saved(change, version)

    def _saved(self, change: _Change, version: int) -> None:
        """`change` is stored, at `version`: what the next save builds on."""
        self._expected = _after(self._expected, change.change, version)
        self.version = version
        self._known = [*self._known, *(message.id for message in change.appended)]
        if self._known_set is not None:
            self._known_set.update(message.id for message in change.appended)

    async def _write(self, change: _Change, life: object, journal: JournalAppend | None) -> int:
        """One store call: the save, and the journal's events with it when given (`save_and_append`)."""
        return await self.threads.save(
            self.thread_id,
            change.change,
            built_on=self._expected,
            appended=change.appended,
            replaced=change.replaced,
            fence=self._fence,
            incarnation=life,
            journal=journal,
        )

    def _gone(self, change: ThreadChange) -> NoReturn:
        """The thread this run read was deleted: nothing more is stored, and what was not is named in the log."""
        unsaved = [message.id for message in change.append]
        log.warning(
            "thread %s was deleted while a run was in progress; the run stores nothing more (unsaved messages: %s)",
            self.thread_id,
            ", ".join(unsaved) or "none",
        )
        raise AdapterError("the thread was deleted while this run was in progress", code=codes.THREAD_DELETED)

    async def _only_renamed(self, sets_grants: bool = False) -> bool:
        """After a conflict: whether the thread changed only in what no run builds on (a rename: its title).

        Then the save may be made again on the new version: renaming a thread never fails a run in progress, and
        neither does revoking a grant, unless this save writes grants itself (`sets_grants`): it would bring a
        revoked one back.
        """
        expected = self._expected
        stored = await self.threads.store.load(self.thread_id, since=None) if expected is not None else None
        if expected is None or stored is None or stored.head.version <= self.version:
            return False  # no save came between: the conflict is not a rename's
        if _built_on(stored.head, sets_grants) != _built_on(expected, sets_grants):
            return False
        # The calls a grant let through have run; from now on this run knows the thread's grants as they are.
        grants = ThreadRecord.from_head(self.thread_id, stored.head).grants
        self.record = self.record.model_copy(update={"grants": grants})
        self.version = stored.head.version
        self._expected = stored.head
        return True


@dataclass(frozen=True, slots=True)
class _Change:
    """What one save writes (`change`), with the protocol messages it appends and replaces (by position)."""

    change: ThreadChange
    appended: Sequence[Message] = ()
    replaced: Mapping[int, Message] = field(default_factory=dict)


_REVOKE_ATTEMPTS = 3
"""Saves a revocation tries, each on the thread read again, before it gives up with THREAD_CONFLICT."""

_RENAMES_TOLERATED = 3
"""Renames in a row one save lets pass (each a conflict, read again) before it gives up as on any conflict."""


def _built_on(head: ThreadHead, grants: bool = True) -> tuple[object, ...]:
    """What a save of a run builds on: everything of the head but its version, title and update time.

    And but its grants, for a save that does not write them (`grants=False`).
    """
    built = (head.message_count, head.claim, head.open_turn, head.applied, head.owner, head.incarnation)
    return (*built, head.grants) if grants else built


def _after(head: ThreadHead | None, change: ThreadChange, version: int) -> ThreadHead:
    """The head once `change` is saved at `version` on `head` (None: a thread this save creates)."""
    count = head.message_count if head is not None else 0
    count = (count if change.keep is None else change.keep) + len(change.append)
    records = change.records()
    return ThreadHead(
        version=version,
        claim=(head.claim if head is not None else 0) + int(change.claim),
        message_count=count,
        open_turn=records.get("open_turn", head.open_turn if head is not None else None),
        applied=records.get("applied", head.applied if head is not None else None),
        grants=records.get("grants", head.grants if head is not None else None),
        owner=head.owner if head is not None else change.owner,
        title=None if head is None else head.title,
        incarnation=head.incarnation if head is not None else change.incarnation,
        stamp=change.stamp,
    )


def _json(model: OpenTurn | AppliedResume) -> dict[str, Any]:
    return model.model_dump(mode="json")


def _wire(grants: Sequence[Grant]) -> list[dict[str, Any]]:
    return [grant.wire() for grant in grants]
