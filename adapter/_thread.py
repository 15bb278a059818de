"""A thread's stored record, read once per run and written by compare-and-set."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from adapter import _errors as codes
from adapter._errors import AdapterError, ResumeError
from adapter._resume import Resume
from adapter._turns import AppliedResume, OpenTurn, ThreadRecord
from adapter.stores import StoreConflict, TurnStore

log = logging.getLogger("adapter.thread")


class ThreadHandle:
    """The record of one thread as this run last read or wrote it."""

    def __init__(self, store: TurnStore, thread_id: str) -> None:
        self.store = store
        self.thread_id = thread_id
        self.record = ThreadRecord(thread_id=thread_id)
        self.version = 0
        self._before_claim: ThreadRecord | None = None

    async def load(self) -> ThreadRecord | None:
        """Read the thread's record; None when the thread has never suspended."""
        stored = await self.store.load(self.thread_id)
        if stored is None:
            return None
        self.record, self.version = ThreadRecord.model_validate(stored.document), stored.version
        return self.record

    async def claim(self, gate: Resume, run_id: str, now: datetime) -> None:
        """Mark the open turn as being resumed by this run; exactly one of two racing resumes wins."""
        self._before_claim = self.record.model_copy(deep=True)
        claimed = gate.turn.model_copy(update={"claimed_by": run_id, "claimed_at": now})
        fingerprints = {answer.call.interrupt_id: answer.fingerprint for answer in gate.answers}
        record = self.record.model_copy(
            update={"open_turn": claimed, "applied": AppliedResume(run_id=run_id, fingerprints=fingerprints)}
        )
        try:
            await self._save(record)
        except StoreConflict:
            raise ResumeError("another request resumed this turn first", code=codes.RESUME_CONFLICT) from None

    async def release(self, gate: Resume) -> None:
        """Give the turn back untouched, after a resume failed before it applied anything."""
        if self._before_claim is None:
            return
        try:
            await self._save(self._before_claim)
        except StoreConflict:
            log.warning("thread %s changed before a failed resume could release its claim", self.thread_id)

    async def close_turn(self) -> None:
        """The open turn's answers are applied: nothing waits on this thread any more."""
        await self._save(self.record.model_copy(update={"open_turn": None}))

    async def open_turn(self, turn: OpenTurn, resumed_outcome: dict[str, Any] | None) -> None:
        """Store a suspended turn. Nothing is reported to the client before this succeeds.

        `resumed_outcome` is None when the turn comes from an ordinary run: that run supersedes the
        last applied resume, so a late replay of it is unrecognised instead of reporting an outcome
        that is no longer true (AGUI-RULES RES-9).
        """
        applied = self.record.applied
        if resumed_outcome is None:
            applied = None
        elif applied is not None:
            applied = applied.model_copy(update={"outcome": resumed_outcome})
        try:
            await self._save(self.record.model_copy(update={"open_turn": turn, "applied": applied}))
        except StoreConflict:
            raise AdapterError("the thread changed while this run was in progress", code="THREAD_CONFLICT") from None

    async def record_outcome(self, run_id: str, outcome: dict[str, Any]) -> None:
        """Remember how a resumed run ended, so that a replay of its resume ends the same way."""
        for _ in range(3):
            applied = self.record.applied
            if applied is None or applied.run_id != run_id:
                return
            try:
                await self._save(
                    self.record.model_copy(update={"applied": applied.model_copy(update={"outcome": outcome})})
                )
                return
            except StoreConflict:
                await self.load()
        log.warning("could not record the outcome of run %s on thread %s", run_id, self.thread_id)

    async def _save(self, record: ThreadRecord) -> None:
        self.version = await self.store.save(
            self.thread_id, record.model_dump(mode="json"), expected_version=self.version
        )
        self.record = record
