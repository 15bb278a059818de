"""The parsed-thread cache: threads as protocol messages, of the state a head names; the store read through it.

A run needs its stored conversation as protocol messages. When this adapter wrote (or read) the thread last, it
already holds them: `ParsedThreads` keeps them beside the stored messages they are, named by the state of the thread
they are of (`ThreadHead.stamp`: drawn fresh by every save, so no later state repeats it, not a thread created again
nor a store restored from a backup and written again; and its version). That is the one rule: what is kept is the
thread's messages while the head names its stamp and version, and nothing of it otherwise. A change made by another
replica, a purge, a thread created again under the same id: each leaves a head of another stamp, and the whole
thread is read and validated again.

`ParsedStore` applies the rule, around the store: a run's handle (`adapter._thread._handle`) reads and writes its
thread through it and keeps nothing of the cache itself. A long thread whose head names what is kept is read by its
head alone; every save the handle makes is followed here (its messages join what is kept, of the new state).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Final, TypeVar

from ag_ui.core import Message

from adapter._thread._conversation import HeldIds, ids_held
from adapter._thread._record import stored_conversation
from adapter.stores import (
    ANY_INCARNATION,
    JournalAppend,
    StoredMessage,
    StoredThread,
    StoreUnavailable,
    ThreadChange,
    ThreadHead,
    TurnStore,
)
from adapter.stores._protocol import load_or_create, save_and_append

log = logging.getLogger("adapter.record")

_T = TypeVar("_T")

DEFAULT_CHARS: Final = 4_000_000
"""How much stored text (and the messages parsed from it) one adapter keeps, across threads.

The parsed messages cost about 11 bytes of memory per character of text (measured by tests/bench/soak.py),
so this default holds some 45 MiB at most.
"""

_TEXT = attrgetter("json")

HEAD_FIRST: Final = 32
"""Messages from which a kept thread is read by its head first.

Below, reading them all costs less than the second read a changed thread takes (about 3 µs a message against
some 100 µs a read, on SQLite)."""

_READ_RETRIES = (0.1, 0.5)
"""Seconds to wait before each new attempt at a read the store could not answer: a read is safe to repeat."""
_FAST_FAILURE = 2.0
"""Seconds within which a failed read counts as a dropped connection, worth trying again."""


class ParsedThreads:
    """Protocol messages by thread, valid while the head names the state they are of; least recently used go first."""

    def __init__(self, max_chars: int = DEFAULT_CHARS, *, head_first: int = HEAD_FIRST) -> None:
        self.max_chars = max_chars
        self.head_first = head_first
        """Messages from which a thread kept here is read by its head first (`checkable`)."""
        self._entries: OrderedDict[str, KnownThread] = OrderedDict()
        self._chars = 0

    def named(self, thread_id: str, head: ThreadHead) -> KnownThread | None:
        """What is kept for the thread, if `head` names the state it is of (`KnownThread.names`): the one rule."""
        entry = self._entries.get(thread_id)
        if entry is None or not entry.names(head):
            return None
        self._entries.move_to_end(thread_id)
        return entry

    def checkable(self, thread_id: str) -> KnownThread | None:
        """What is kept for the thread, if it is long enough (`head_first` messages) to be read by its head first."""
        entry = self._entries.get(thread_id)
        return entry if entry is not None and len(entry.stored) >= self.head_first else None

    def keep(self, thread_id: str, known: KnownThread) -> None:
        """Remember that the state `known` names holds `known.stored`, and that they are `known.messages`."""
        self.forget(thread_id)
        if known.stamp is None or known.chars > self.max_chars:
            return  # a state no head names again (a store that keeps no stamp), or too large to keep
        self._entries[thread_id] = known
        self._chars += known.chars
        while self._chars > self.max_chars:
            _, oldest = self._entries.popitem(last=False)
            self._chars -= oldest.chars

    def forget(self, thread_id: str) -> None:
        """Drop what is kept for the thread (its stored text is no longer known)."""
        entry = self._entries.pop(thread_id, None)
        if entry is not None:
            self._chars -= entry.chars


@dataclass(frozen=True, slots=True)
class KnownThread:
    """A whole stored thread as protocol messages, position for position with the stored messages, and its state."""

    stored: tuple[StoredMessage, ...] = ()
    """The stored messages themselves: what a read of the head alone takes from here."""
    messages: tuple[Message, ...] = ()
    """The protocol message of each, position for position."""
    chars: int = -1
    """The length of all the texts (computed when not given)."""
    stamp: str | None = None
    version: int = 0
    """The stamp and version of the state these are the messages of (`ThreadHead`); version 0: none stored."""
    held: HeldIds | None = None
    """The ids the messages hold (`ids_held`), once asked: each run's first model step needs them (`held_ids`).

    Listed once, by the first run that asks, then carried: each save adds the ids of the messages it appends, so
    the next runs on the thread do not list them again. A thread's creating run never asks (it loaded nothing),
    and its saves list nothing: a new run pays nothing for them."""

    def __post_init__(self) -> None:
        if self.chars < 0:
            object.__setattr__(self, "chars", sum(map(len, map(_TEXT, self.stored))))

    def held_ids(self) -> HeldIds:
        """The ids the messages hold: built once for a thread kept here, then carried to its next states (`changed`)."""
        held = self.held
        if held is None:
            held = ids_held(self.messages)
            object.__setattr__(self, "held", held)  # derived from the messages, as `chars` is
        return held

    def names(self, head: ThreadHead) -> bool:
        """Whether `head` is of the very state these messages are: the same stamp, at the same version.

        The stamp alone names one state; the version too, for a save by a replica that draws none (an older one).
        """
        known = (self.stamp, self.version, len(self.stored))
        return self.stamp is not None and (head.stamp, head.version, head.message_count) == known

    def changed(
        self, change: ThreadChange, appended: Sequence[Message], replaced: Mapping[int, Message], version: int
    ) -> KnownThread | None:
        """The thread once `change` is saved at `version`: its messages `appended` and `replaced` (by position).

        None if unknown: a change that cuts the thread, or whose messages are not all given. The change must be saved
        on the state this is of.
        """
        if change.keep is not None or len(appended) != len(change.append) or replaced.keys() != change.replace.keys():
            return None
        if not (change.append or change.replace):
            return dataclasses.replace(self, stamp=change.stamp, version=version)
        messages, stored = list(self.messages), list(self.stored)
        for position, message in replaced.items():
            messages[position], stored[position] = message, change.replace[position]
        added = sum(len(appended.json) for appended in change.append)
        chars = self.chars + added if not change.replace else -1
        held = self.held
        if held is not None and not change.replace:  # a message replaced may name other calls: built again if asked
            more = ids_held(appended)
            held = (held[0] | more[0], held[1] | more[1], held[2] | more[2])
        else:
            held = None
        return KnownThread((*stored, *change.append), (*messages, *appended), chars, change.stamp, version, held)


class ParsedStore:
    """The store as a run's handle reads and writes a thread: through this adapter's `ParsedThreads`, if any."""

    def __init__(self, store: TurnStore, parsed: ParsedThreads | None = None) -> None:
        self.store = store
        self.parsed = parsed
        """Where this adapter keeps threads as protocol messages; None keeps nothing (every thread is validated)."""

    async def load(self, thread_id: str, *, since: int | None = 0, until: int | None = None) -> StoredThread | None:
        """`TurnStore.load`, again after a pause when the store failed fast (a restart, a cut connection).

        A whole thread kept here and long enough is read by its head first: when the head names what is kept, the
        stored messages are the kept ones, and only a changed thread is read again whole.
        """
        kept = self.parsed.checkable(thread_id) if self.parsed is not None and since == 0 and until is None else None
        if kept is not None:
            head = await self._read(thread_id, since=None, until=None)
            if head is None:
                return None
            if kept.names(head.head):
                return StoredThread(head.head, 0, kept.stored)
        return await self._read(thread_id, since=since, until=until)

    async def load_or_create(
        self, thread_id: str, change: ThreadChange, journal: JournalAppend | None, *, since: int | None
    ) -> StoredThread | None:
        """`load`, or, for an absent thread, the save that creates it with `journal` in the same store call (None).

        A long thread kept here exists (most likely): it is read as `load` reads it, by its head first, and created
        only if that finds it gone. A call that failed fast is made again, as a read is: should the first have
        created the thread, the next finds it, and the run goes on as on a thread that exists.
        """
        kept = self.parsed.checkable(thread_id) if self.parsed is not None and since == 0 else None
        if kept is not None:
            found = await self.load(thread_id, since=since)
            if found is not None:
                return found
        found = await _retried(thread_id, lambda: load_or_create(self.store, thread_id, change, journal, since=since))
        if found is None:
            self._follow(thread_id, None, change, (), {}, 1)
        return found

    async def _read(self, thread_id: str, since: int | None, until: int | None) -> StoredThread | None:
        """Load the thread, again after a pause when the store failed fast.

        A store that took long to fail (a pool that waited its timeout for a connection) is not asked again.
        """
        return await _retried(thread_id, lambda: self.store.load(thread_id, since=since, until=until))

    def conversation(self, thread_id: str, read: StoredThread, client: Sequence[Message] = ()) -> list[Message]:
        """The messages `read` holds, as protocol messages: those kept here when its head names them.

        Else each is validated from the store, except where the `client` sent a copy of the same text (used as it
        is: `stored_conversation`), and a whole thread is kept, of the state its head names.
        """
        whole = read.start == 0 and len(read.messages) == read.head.message_count
        known = self.parsed.named(thread_id, read.head) if self.parsed is not None and whole else None
        if known is not None:
            return list(known.messages)
        offered: dict[str, Message] = {}
        for message in client:
            offered.setdefault(message.id, message)
        messages = stored_conversation(read.messages, offered)
        if self.parsed is not None and whole:
            head = read.head
            self.parsed.keep(
                thread_id, KnownThread(tuple(read.messages), tuple(messages), -1, head.stamp, head.version)
            )
        return messages

    def held_ids(self, thread_id: str, head: ThreadHead) -> HeldIds | None:
        """The ids the whole thread holds in the state `head` names (`ids_held`), when that state is kept here."""
        known = self.parsed.named(thread_id, head) if self.parsed is not None else None
        return known.held_ids() if known is not None else None

    async def save(
        self,
        thread_id: str,
        change: ThreadChange,
        *,
        built_on: ThreadHead | None,
        appended: Sequence[Message] = (),
        replaced: Mapping[int, Message] | None = None,
        fence: int | None = None,
        incarnation: object = ANY_INCARNATION,
        journal: JournalAppend | None = None,
    ) -> int:
        """`TurnStore.save` on the state `built_on` (None: a thread this save creates); with `journal`, in one call.

        `appended` and `replaced` are the protocol messages of `change.append` and `change.replace`: what is kept of
        `built_on` is kept of the new state with them, and forgotten when it is not of `built_on`.
        """
        expected = built_on.version if built_on is not None else 0
        if journal is None:
            version = await self.store.save(
                thread_id, change, expected_version=expected, fence=fence, incarnation=incarnation
            )
        else:
            version, _ = await save_and_append(
                self.store, thread_id, change, journal, expected_version=expected, fence=fence, incarnation=incarnation
            )
        self._follow(thread_id, built_on, change, appended, replaced or {}, version)
        return version

    def _follow(
        self,
        thread_id: str,
        built_on: ThreadHead | None,
        change: ThreadChange,
        appended: Sequence[Message],
        replaced: Mapping[int, Message],
        version: int,
    ) -> None:
        """What is kept of `built_on` (None: a thread the change created) is kept of the saved state; else nothing."""
        if self.parsed is None:
            return
        known = KnownThread() if built_on is None else self.parsed.named(thread_id, built_on)
        after = known.changed(change, appended, replaced, version) if known is not None else None
        if after is None:
            self.parsed.forget(thread_id)
        else:
            self.parsed.keep(thread_id, after)


async def _retried(thread_id: str, read: Callable[[], Awaitable[_T]]) -> _T:
    """`read()`, again after a pause when the store failed fast (`_READ_RETRIES`); not when it failed slowly."""
    clock = asyncio.get_running_loop().time
    for pause in _READ_RETRIES:
        started = clock()
        try:
            return await read()
        except StoreUnavailable:
            if clock() - started > _FAST_FAILURE:
                raise
            log.warning("thread %s: the store could not be reached; reading again in %ss", thread_id, pause)
            await asyncio.sleep(pause)
    return await read()
