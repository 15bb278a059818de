"""The handle on one thread's stored record (`_record`): loaded once per run, claimed and saved by compare-and-set."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from ag_ui.core import Message

from adapter import _errors as codes
from adapter._errors import AdapterError, ResumeError
from adapter._gate import Resume
from adapter._record import AppliedResume, OpenTurn, ThreadRecord, dump_messages
from adapter.stores import StoreConflict, TurnStore

log = logging.getLogger("adapter.record")


class RecordHandle:
    """The record of one thread as this run last read or wrote it."""

    def __init__(self, store: TurnStore, thread_id: str) -> None:
        self.store = store
        self.thread_id = thread_id
        self.record = ThreadRecord(thread_id=thread_id)
        self.version = 0
        self._before_claim: ThreadRecord | None = None

    async def load(self) -> ThreadRecord | None:
        """Read the thread's record; None when the thread has never been stored."""
        stored = await self.store.load(self.thread_id)
        if stored is None:
            return None
        self.record, self.version = ThreadRecord.model_validate(stored.document), stored.version
        return self.record

    async def claim(self, gate: Resume, run_id: str, now: datetime) -> None:
        """Mark the open turn as being resumed by this run; exactly one of two racing resumes wins."""
        self._before_claim = self.record.model_copy(deep=True)
        claimed = gate.turn.model_copy(update={"claimed_by": run_id, "claimed_at": now})
        applied = AppliedResume(
            run_id=run_id,
            fingerprints={answer.call.interrupt_id: answer.fingerprint for answer in gate.answers},
            request_ids={a.call.interrupt_id: a.request_id for a in gate.answers if a.request_id is not None},
            action_ids={a.call.tool_call_id: a.call.interrupt_id for a in gate.answers if a.call.tool_call_id},
        )
        record = self.record.model_copy(update={"open_turn": claimed, "applied": applied, "queued": None})
        try:
            await self._save(record)
        except StoreConflict:
            raise ResumeError("another request resumed this turn first", code=codes.RESUME_CONFLICT) from None

    async def queue(self, entries: list[dict[str, Any]]) -> None:
        """Store submitted answers for a worker to apply; a racing submission gets RESUME_CONFLICT."""
        try:
            await self._save(self.record.model_copy(update={"queued": entries}))
        except StoreConflict:
            raise ResumeError("the turn changed while the answers were submitted", code=codes.RESUME_CONFLICT) from None

    async def release(self) -> None:
        """Give the turn back untouched, after a resume failed before it applied anything."""
        if self._before_claim is None:
            return
        try:
            await self._save(self._before_claim)
        except StoreConflict:
            log.warning("thread %s changed before a failed resume could release its claim", self.thread_id)

    async def close_turn(self, history: Sequence[Message]) -> None:
        """The open turn's answers are applied: store them; nothing waits on this thread any more."""
        await self._save(self.record.model_copy(update={"open_turn": None, "messages": dump_messages(history)}))

    async def open_turn(
        self, turn: OpenTurn, history: Sequence[Message], resumed_outcome: dict[str, Any] | None
    ) -> None:
        """Store a suspended turn. Nothing is reported to the client before this succeeds."""
        applied = self.record.applied
        if resumed_outcome is None:
            applied = None  # a newer interrupted run supersedes earlier answers: replaying them is unknown (RES-9)
        elif applied is not None:
            applied = applied.model_copy(update={"outcome": resumed_outcome})
        update = {"open_turn": turn, "applied": applied, "messages": dump_messages(history)}
        try:
            await self._save(self.record.model_copy(update=update))
        except StoreConflict:
            message = "the thread changed while this run was in progress"
            raise AdapterError(message, code=codes.THREAD_CONFLICT) from None

    async def finish(self, history: Sequence[Message], run_id: str, resumed_outcome: dict[str, Any] | None) -> None:
        """Store the conversation of a finished run, and how a resumed run ended (for replays)."""
        messages = dump_messages(history)

        def finished(record: ThreadRecord) -> ThreadRecord:
            applied = record.applied
            if resumed_outcome is not None and applied is not None and applied.run_id == run_id:
                applied = applied.model_copy(update={"outcome": resumed_outcome})
            return record.model_copy(update={"messages": messages, "applied": applied})

        await self._update(finished)

    async def record_outcome(self, run_id: str, outcome: dict[str, Any]) -> None:
        """Remember how a resumed run ended, so that a replay of its resume ends the same way."""

        def recorded(record: ThreadRecord) -> ThreadRecord:
            applied = record.applied
            if applied is None or applied.run_id != run_id:
                return record
            return record.model_copy(update={"applied": applied.model_copy(update={"outcome": outcome})})

        await self._update(recorded)

    async def _update(self, change: Callable[[ThreadRecord], ThreadRecord], attempts: int = 3) -> None:
        """Apply `change` to the latest record, re-reading it when another request wrote in between."""
        for _ in range(attempts):
            try:
                await self._save(change(self.record))
                return
            except StoreConflict:
                await self.load()
        log.warning("thread %s kept changing; an update was dropped", self.thread_id)

    async def _save(self, record: ThreadRecord) -> None:
        self.version = await self.store.save(
            self.thread_id, record.model_dump(mode="json"), expected_version=self.version
        )
        self.record = record
