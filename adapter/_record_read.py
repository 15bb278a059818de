"""Reading one thread from the store: its records and messages (all, a page or a tail); the history a run starts from.

`RecordHandle` (`adapter._record_handle`) adds the writes: claims, turns opened and closed, finished runs.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from ag_ui.core import AssistantMessage, Message, ToolMessage

from adapter import _errors as codes
from adapter._access import Access
from adapter._conversation import keep_server_activity, refuse_second_answers, server_said
from adapter._errors import AdapterError
from adapter._parsed import KnownThread, ParsedThreads
from adapter._record import ThreadRecord, stored_cards, stored_conversation
from adapter.stores import StoredMessage, StoredThread, StoreUnavailable, ThreadHead, TurnStore

log = logging.getLogger("adapter.record")

_READ_RETRIES = (0.1, 0.5)
"""Seconds to wait before each new attempt at a read the store could not answer: a read is safe to repeat."""
_FAST_FAILURE = 2.0
"""Seconds within which a failed read counts as a dropped connection, worth trying again."""


class RecordReader:
    """The reads of a `RecordHandle`: the thread's records and messages, and the history a run starts from."""

    def __init__(
        self,
        store: TurnStore,
        thread_id: str,
        *,
        principal: str | None = None,
        access: Access | None = None,
        parsed: ParsedThreads | None = None,
    ) -> None:
        self.store = store
        self.parsed = parsed
        """Where this adapter keeps threads as protocol messages (`adapter._parsed`); None keeps nothing."""
        self.thread_id = thread_id
        self.record = ThreadRecord(thread_id=thread_id, owner=principal)
        """A thread this run creates is owned by the run's principal."""
        self._principal = principal
        self._access = access
        """Asked again when another request created the thread this run found missing."""
        self._known: list[str] = []
        """The ids of the stored messages as this run last read or wrote them: all it may build on."""
        self.version = 0
        self.base = 0
        """The position of `stored[0]` in the thread: above 0 when only its tail was read (`load_tail`)."""
        self.stored: Sequence[StoredMessage] = ()
        self.synced = 0
        self._head: ThreadHead | None = None
        self._fence: int | None = None
        self._conversation: list[Message] | None = None
        self._parsed_thread: KnownThread | None = None
        self._held_before: set[str] = set()
        """Ids of the client's messages the store holds before `base` (found by `load_tail`)."""

    async def load(self, *, messages: bool = True) -> ThreadRecord | None:
        """Read the thread's records (and its messages, unless told not to); None for a new thread."""
        stored = await self._read(since=self.base if messages else None)
        if stored is None:
            self._parsed_thread = KnownThread()
            return None
        self._head, self.version = stored.head, stored.head.version
        self.record = ThreadRecord.from_head(self.thread_id, stored.head)
        self.stored, self.synced, self._conversation = stored.messages, len(stored.messages), None
        if messages:
            self._known = [message.id for message in stored.messages]
        self._parsed_thread = None
        if messages and self.parsed is not None and self.base == 0:
            texts = tuple(m.json for m in stored.messages)
            known = self.parsed.prefix(self.thread_id, texts)
            if len(known) == len(texts):  # this adapter holds the whole thread as messages already
                self._conversation = known
                self._parsed_thread = KnownThread(texts, tuple(known))
        return self.record

    async def load_page(self, start: int, stop: int) -> ThreadRecord | None:
        """Read the thread's records and its messages at positions `[start, stop)` alone into `stored`.

        For reading only: a handle holding a slice has nothing to save a turn against.
        """
        stored = await self._read(since=start, until=stop)
        if stored is None:
            return None
        self._head, self.version = stored.head, stored.head.version
        self.record = ThreadRecord.from_head(self.thread_id, stored.head)
        self.stored, self.synced, self._conversation, self._parsed_thread = stored.messages, 0, None, None
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
                position = await self.store.find_message(self.thread_id, message.id)
                if position is not None and position < self.base:
                    found.add(message.id)
        return found

    async def older_conversation(self) -> list[Message]:
        """The stored messages before `base` (none when the whole thread was read), as protocol messages."""
        if self.base == 0:
            return []
        stored = await self._read(since=0, until=self.base)
        return stored_conversation(stored.messages, {}) if stored is not None else []

    @property
    def message_count(self) -> int:
        """How many messages the thread held when this handle last read it (0 before a read)."""
        return self._head.message_count if self._head is not None else 0

    async def find(self, message_id: str) -> int | None:
        """The position of the stored message with this id (the first), or None; read by the store's index."""
        return await self.store.find_message(self.thread_id, message_id)

    async def _read(self, since: int | None, until: int | None = None) -> StoredThread | None:
        """Load the thread, again after a pause when the store failed fast (a restart, a cut connection).

        A store that took long to fail (a pool that waited its timeout for a connection) is not asked again.
        """
        clock = asyncio.get_running_loop().time
        for pause in _READ_RETRIES:
            started = clock()
            try:
                return await self.store.load(self.thread_id, since=since, until=until)
            except StoreUnavailable:
                if clock() - started > _FAST_FAILURE:
                    raise
                log.warning("thread %s: the store could not be reached; reading again in %ss", self.thread_id, pause)
                await asyncio.sleep(pause)
        return await self.store.load(self.thread_id, since=since, until=until)

    def conversation(self, client: Sequence[Message] = ()) -> list[Message]:
        """The stored messages as protocol messages, built once per request.

        The client's copy of a stored message is used where it is the same text; the rest is
        validated from the store (`stored_conversation`): one pass over the thread, and a copy that
        differs never replaces the stored message.
        """
        if self._conversation is None:
            texts = tuple(m.json for m in self.stored)
            parsed = self.parsed if self.base == 0 else None  # it keeps whole threads only
            known = parsed.prefix(self.thread_id, texts) if parsed else []
            offered: dict[str, Message] = {}
            if len(known) < len(self.stored):
                for message in client:
                    offered.setdefault(message.id, message)
            self._conversation = [*known, *stored_conversation(self.stored[len(known) :], offered)]
            if parsed is not None:
                self._parsed_thread = KnownThread(texts, tuple(self._conversation))
                parsed.keep(self.thread_id, self._parsed_thread)
        return list(self._conversation)

    async def history(self, client: Sequence[Message], *, server_kept: bool) -> list[Message]:
        """The history a new run starts from; no request deletes what the record holds.

        Continued: with a server-kept history, or when the client sent only messages the record does not
        hold, the stored conversation, then the client's new messages: the model sees the whole thread.
        A branch: a client-kept history that holds stored messages is what the model sees, even where it
        leaves some out or edits what the client said (it regenerates or edits an earlier message). What
        the server said stays as stored (the stored copy of each assistant, tool, reasoning and activity
        message it names; a call it keeps keeps its stored answer), and the record keeps what the branch
        left out: only the messages it does not hold are appended.

        Raises:
            ResumeError: RESUME_DUPLICATE when the input gives an answered call a second answer
                (`adapter._conversation.refuse_second_answers`, against the whole thread).
        """
        stored = {message.id for message in self.stored} | self._held_before
        if server_kept or (self.stored and not any(message.id in stored for message in client)):
            history, known = self.conversation(client), set(stored)
            for message in client:
                if message.id not in known:
                    known.add(message.id)
                    history.append(message)
        else:
            ours = self.conversation(client)
            branch = keep_server_activity(client, [m.id for m in self.stored], stored_cards(self.stored))
            history = server_said(branch, ours)
            self.synced = next(
                (i for i, (mine, theirs) in enumerate(zip(history, self.stored, strict=False)) if mine.id != theirs.id),
                min(len(history), len(self.stored)),
            )
        recorded = {m.tool_call_id: m.id for m in self.conversation(client) if isinstance(m, ToolMessage)}
        refuse_second_answers(history, stored, recorded | await self._answers_before(history))
        return history

    def held_ids(self) -> tuple[set[str], set[str], set[str]]:
        """The ids of the messages, the tool calls (made or answered) and the answered calls the loaded record holds.

        A branch may leave stored messages out of a run's history; a backend's new message or call may
        still not take their ids (a thread read from its tail checks the older part by other means).
        """
        messages = self.conversation()
        answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
        calls = {c.id for m in messages if isinstance(m, AssistantMessage) for c in m.tool_calls or []}
        return {m.id for m in messages}, calls | answered, answered

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
        merged = keep_server_activity(client, [m.id for m in self.stored], stored_cards(self.stored))
        count = len(self.stored)
        held = len(merged) >= count and all(
            ours.id == theirs.id for ours, theirs in zip(merged[:count], self.stored, strict=True)
        )
        return self.conversation(client), held
