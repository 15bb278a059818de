"""The handle on one thread in the store: its records (`_record`) read once, its messages written a turn at a time.

Reading the thread lives in `_record_read`; the writes here build on what it read.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from ag_ui.core import Message

from adapter import _errors as codes
from adapter._errors import AdapterError, ResumeError
from adapter._gate import Resume
from adapter._record import AppliedResume, OpenTurn, PendingCall, stored_message
from adapter._record_read import RecordReader
from adapter.stores import StaleClaim, StoreConflict, ThreadChange

log = logging.getLogger("adapter.record")


class RecordHandle(RecordReader):
    """The thread as this run last read or wrote it.

    The run's history and the store agree on `history[:synced]`, position for position; a save
    appends the rest that the store does not hold (a client's branch may hold stored messages in
    another order: the record keeps them where they are, and never drops one), replaces the form
    cards that moved, and sets the records that changed. After a claim every save carries the
    claim number as its fence.
    """

    async def claim(self, gate: Resume, run_id: str, now: datetime) -> None:
        """Mark the open turn as being resumed by this run; exactly one of two racing resumes wins."""
        claimed, applied = _claimed(gate, run_id, now)
        await self._claim(ThreadChange(open_turn=_json(claimed), applied=_json(applied), queued=None, claim=True))
        self.record = self.record.model_copy(update={"open_turn": claimed, "applied": applied, "queued": None})

    async def claim_closed(
        self, gate: Resume, run_id: str, now: datetime, history: Sequence[Message], moved: Sequence[Message] = ()
    ) -> None:
        """`claim` and `close_turn` in one save, for answers whose applying runs nothing (`Resume.runs_nothing`).

        The claim orders the work a resume starts on the server; where it starts none, claiming and
        storing the answers together leaves nothing between them for another replica to see or take
        over, and exactly one of two racing resumes still wins.
        """
        _, applied = _claimed(gate, run_id, now)
        change = self._change(history, moved, open_turn=None, applied=_json(applied), queued=None, claim=True)
        await self._claim(change, history)
        self.record = self.record.model_copy(update={"open_turn": None, "applied": applied, "queued": None})

    async def _claim(self, change: ThreadChange, history: Sequence[Message] | None = None) -> None:
        try:
            await self._save(change, history)
        except StoreConflict:
            raise ResumeError("another request resumed this turn first", code=codes.RESUME_CONFLICT) from None
        assert self._head is not None  # a turn to claim was loaded
        self._fence = self._head.claim + 1

    async def queue(self, entries: list[dict[str, Any]]) -> None:
        """Store submitted answers for a worker to apply; a racing submission gets RESUME_CONFLICT."""
        try:
            await self._save(ThreadChange(queued=entries))
        except StoreConflict:
            raise ResumeError("the turn changed while the answers were submitted", code=codes.RESUME_CONFLICT) from None

    async def release(self) -> None:
        """Give the turn back as it was read, after a resume failed before it applied anything."""
        head = self._head
        if self._fence is None or head is None:
            return
        try:
            await self._save(ThreadChange(open_turn=head.open_turn, applied=head.applied, queued=head.queued))
        except StoreConflict:
            log.warning("thread %s changed before a failed resume could release its claim", self.thread_id)

    async def close_turn(self, history: Sequence[Message], moved: Sequence[Message] = ()) -> None:
        """The open turn's answers are applied: store them; nothing waits on this thread any more.

        Raises:
            AdapterError: THREAD_CONFLICT when another run took the turn over (this run's claim lapsed
                and was superseded): nothing of this run is stored.
        """
        try:
            await self._save(self._change(history, moved, open_turn=None), history)
        except StoreConflict:
            log.warning("thread %s: a run lost its claim before storing its answers", self.thread_id)
            raise AdapterError("another request took this turn over", code=codes.THREAD_CONFLICT) from None
        self.record = self.record.model_copy(update={"open_turn": None})

    async def hold_turn(
        self, pending: list[PendingCall], history: Sequence[Message], moved: Sequence[Message] = ()
    ) -> OpenTurn:
        """Store the answers applied so far, the claimed turn waiting on `pending` while they are forwarded.

        The stored turn keeps this run's claim: should the replica die mid-forward, the claim lapses after the
        lease and the same answers take the turn over (`adapter._gate`); an unclaimed turn would wait forever.

        Raises:
            AdapterError: THREAD_CONFLICT when this run's claim lapsed while its answers were applied (a slow
                tool) and another request took the turn over with the same answers: that request's record
                stands and nothing of this run is stored, as in `close_turn`.
        """
        assert self.record.open_turn is not None and self._fence is not None  # only a claimed turn is held
        turn = self.record.open_turn.model_copy(update={"pending": pending})
        try:
            await self._save(self._change(history, moved, open_turn=_json(turn)), history)
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
            await self._save(ThreadChange(open_turn=_json(waiting), applied=applied))
        except StoreConflict:
            log.warning("thread %s changed before a refused resume could reopen its turn", self.thread_id)
            return
        previous = AppliedResume.model_validate(applied) if applied else None
        self.record = self.record.model_copy(update={"open_turn": waiting, "applied": previous})

    async def open_turn(
        self, turn: OpenTurn, history: Sequence[Message], resumed_outcome: dict[str, Any] | None
    ) -> None:
        """Store a suspended turn. Nothing is reported to the client before this succeeds."""
        applied = self.record.applied
        if resumed_outcome is None:
            applied = None  # a newer interrupted run supersedes earlier answers: replaying them is unknown (RES-9)
        elif applied is not None:
            applied = applied.model_copy(update={"outcome": resumed_outcome})
        change = self._change(history, open_turn=_json(turn), applied=_json(applied) if applied else None)
        try:
            await self._save(change, history)
        except StoreConflict:
            message = "the thread changed while this run was in progress"
            raise AdapterError(message, code=codes.THREAD_CONFLICT) from None
        self.record = self.record.model_copy(update={"open_turn": turn, "applied": applied})

    async def finish(self, history: Sequence[Message], run_id: str, resumed_outcome: dict[str, Any] | None) -> None:
        """Store the conversation of a finished run, and how a resumed run ended (for replays)."""

        def finished(history: Sequence[Message]) -> ThreadChange:
            applied = self.record.applied
            if resumed_outcome is not None and applied is not None and applied.run_id == run_id:
                return self._change(history, applied=_json(applied.model_copy(update={"outcome": resumed_outcome})))
            return self._change(history)

        await self._update(finished, history)

    async def record_outcome(self, run_id: str, outcome: dict[str, Any]) -> None:
        """Remember how a resumed run ended, so that a replay of its resume ends the same way."""

        def recorded(history: Sequence[Message]) -> ThreadChange | None:
            applied = self.record.applied
            if applied is None or applied.run_id != run_id:
                return None
            return ThreadChange(applied=_json(applied.model_copy(update={"outcome": outcome})))

        await self._update(recorded)

    async def _update(
        self,
        change: Callable[[Sequence[Message]], ThreadChange | None],
        history: Sequence[Message] | None = None,
        attempts: int = 3,
    ) -> None:
        """Save `change(history)` against the latest records, re-reading them when another request wrote in between.

        After a conflict the run's new messages go after whatever the other request stored: no conflict
        rewrites history this run did not read (`_rebase`).

        Raises:
            AdapterError: THREAD_CONFLICT when that cannot be done; nothing of this save is stored.
        """
        for _ in range(attempts):
            wanted = change(history or ())
            if wanted is None:
                return
            try:
                await self._save(wanted, history)
                return
            except StaleClaim:
                log.warning("thread %s was claimed by another run; this run's update was refused", self.thread_id)
                return
            except StoreConflict:
                history = await self._rebase(history)
        log.warning("thread %s kept changing; an update was dropped", self.thread_id)

    async def _rebase(self, history: Sequence[Message] | None) -> Sequence[Message] | None:
        """Re-read the thread after a conflict; the history to save now, this run's new messages last.

        A thread this run found missing was created by another request meanwhile: it is the creator's, and the
        run stores into it only if the policy lets its principal "run" there. Stored messages this run did not
        read may be followed, never replaced or dropped.

        Raises:
            AdapterError: THREAD_CONFLICT when the policy refuses, or when the messages this run built on changed.
        """
        created, known, synced = self._head is None, self._known, self.synced
        await self.load(messages=history is not None)
        if created and self._access is not None:
            if not await self._access.allows(self._principal, self.record.owner, "run"):
                raise AdapterError("another request created this thread during this run", code=codes.THREAD_CONFLICT)
        if history is None:
            return None
        if self._known == known:  # only the records changed
            self.synced = synced
            return history
        if self._known[: len(known)] != known:
            raise AdapterError("the thread changed while this run was in progress", code=codes.THREAD_CONFLICT)
        held = set(self._known)
        return [*self.conversation(), *(message for message in history[synced:] if message.id not in held)]

    def _change(self, history: Sequence[Message], moved: Sequence[Message] = (), **records: Any) -> ThreadChange:
        moved_ids = {message.id for message in moved}
        kept = history[: self.synced] if moved_ids else ()
        replace = {self.base + i: stored_message(m) for i, m in enumerate(kept) if m.id in moved_ids}
        held = set(self._known) if len(history) > self.synced and self.synced < len(self._known) else ()
        append = [stored_message(message) for message in history[self.synced :] if message.id not in held]
        return ThreadChange(append=append, replace=replace, **records)

    async def _save(self, change: ThreadChange, history: Sequence[Message] | None = None) -> None:
        if self.version == 0 and self.record.owner is not None:
            # The save that creates the thread names its owner.
            change = dataclasses.replace(change, owner=self.record.owner)
        self.version = await self.store.save(self.thread_id, change, expected_version=self.version, fence=self._fence)
        known = self._parsed_thread
        self._parsed_thread = known.changed(change, history, self.synced) if known is not None else None
        if self._parsed_thread is not None and self._parsed_thread is not known and self.parsed is not None:
            self.parsed.keep(self.thread_id, self._parsed_thread)
        if history is not None:
            self.synced = len(history)
            self._known = [*self._known, *(message.id for message in change.append)]


def _claimed(gate: Resume, run_id: str, now: datetime) -> tuple[OpenTurn, AppliedResume]:
    """The open turn as claimed by `run_id`, and the record of the answers it applies."""
    claimed = gate.turn.model_copy(update={"claimed_by": run_id, "claimed_at": now})
    applied = AppliedResume(
        run_id=run_id,
        fingerprints={answer.call.interrupt_id: answer.fingerprint for answer in gate.answers},
        request_ids={a.call.interrupt_id: a.request_id for a in gate.answers if a.request_id is not None},
        action_ids={a.call.tool_call_id: a.call.interrupt_id for a in gate.answers if a.call.tool_call_id},
        approvals=[a.call.interrupt_id for a in gate.answers if a.call.kind == "approval"],
        started=[a.call.interrupt_id for a in gate.answers if a.starts_work],
    )
    if gate.earlier is not None:
        applied = gate.earlier.taken_over_by(applied)
    return claimed, applied


def _json(model: OpenTurn | AppliedResume) -> dict[str, Any]:
    return model.model_dump(mode="json")
