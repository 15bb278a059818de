"""The store seam: a thread's messages, appended once, and its small records beside them.

A thread is stored as two parts:

- its messages, in order, each stored once as wire JSON text when it is settled, at a position
  (0, 1, 2, ...); a save appends new ones and may replace a few by position (a form card that moved
  on), so a turn's cost depends on the turn, not on the thread;
- its head: the thread's version, its claim number, how many messages it holds, and the small
  records of the engine (the open turn with its pending calls, the last applied resume with its
  fingerprints, the tools a person allowed for the thread), each an
  opaque JSON value to the store.

Every save is a compare-and-set on the version, within one life of the thread: a thread deleted and created
again under the same id is another life (its `incarnation`), whose version and claim number start again, so a
writer names the life it read (`save(..., incarnation=...)`) and a save meant for another life is refused
(`ThreadGone`) whatever its version. A save may also carry a fencing token: the claim number the writer
holds. Claiming a turn increments the thread's claim number; a save whose token is not the current claim
number is refused, so a writer whose claim was taken over (its lease ran out while it was slow, not dead)
can never write after the new claimant, even after re-reading.

Beside its threads a store keeps the runs' journals: each run's events, in order, numbered 1, 2, 3, ...
(the SSE ids a client reattaches with), with the run's status (ended, asked to stop). A journal is keyed
by its thread and run ids; it may exist before its thread does (a run's first events come before its
first save), and it goes with its thread (`delete_thread`, `purge`).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from secrets import token_hex
from typing import Any, Final, Protocol, cast, overload, runtime_checkable

JSONValue = Any
"""A JSON value (dict, list, str, number, bool or None) that the store keeps without looking inside."""


class _Keep:
    def __repr__(self) -> str:
        return "KEEP"


KEEP: Final = _Keep()
"""Leaves a head record as it is in a `ThreadChange`."""


class _AnyIncarnation:
    def __repr__(self) -> str:
        return "ANY_INCARNATION"


ANY_INCARNATION: Final = _AnyIncarnation()
"""A save that names no life of the thread (`TurnStore.save`'s default): only the version is compared."""


def new_stamp() -> str:
    """A value drawn fresh for every save (`ThreadChange.stamp`): no later state of any thread repeats it."""
    return token_hex(16)


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """One message of a thread, as the store keeps it."""

    id: str
    role: str
    json: str
    """The message as wire JSON text (camelCase, no nulls), written once by the engine, returned as is."""


@dataclass(frozen=True, slots=True)
class ThreadHead:
    """A thread's small records, read together with (some of) its messages."""

    version: int
    """Advances by one on every save; a save names the version it read."""
    claim: int
    """How many times a turn of this thread was claimed: the fencing token of the latest claim."""
    message_count: int
    open_turn: JSONValue = None
    """The suspended turn and its pending calls, or None when nothing waits."""
    applied: JSONValue = None
    """The last applied resume: its answers' fingerprints and the outcome of the run that applied it."""
    owner: str | None = None
    """Who owns the thread, as set by the save that created it; None for an unowned thread."""
    title: str | None = None
    """The thread's title, as the latest save that named one set it; None for none."""
    updated_at: datetime | None = None
    """When the thread was last saved (tz-aware UTC, the store's clock); set by every save."""
    incarnation: str | None = None
    """Names this creation of the thread: set by the save that creates it (`ThreadChange.incarnation`), never changed.

    A thread deleted and created again under the same id has another: a write names the incarnation it is meant
    for (`TurnStore.save`), and one meant for an earlier life is refused. None when the creating save named none,
    or the store keeps none.
    """
    stamp: str | None = None
    """Names this state of the thread for good: drawn fresh by every save (`ThreadChange.stamp`).

    Unlike (incarnation, version), no later state repeats it: not a thread created again, not a store restored
    from a backup and written again up to the same version. What an adapter keeps of a thread is valid while the
    head names the stamp (and version) it was kept at. None when the store keeps none.
    """
    grants: JSONValue = None
    """The tools a person allowed for the rest of the thread (`"remember": "thread"`), or None for none."""


@dataclass(frozen=True, slots=True)
class StoredThread:
    """What `TurnStore.load` returns: the head, and the messages from position `start` on."""

    head: ThreadHead
    start: int
    messages: Sequence[StoredMessage]


@dataclass(frozen=True, slots=True)
class ThreadChange:
    """What one save writes. Everything it does not name stays as it is.

    Applied in this order: drop the messages from position `keep` on (None: drop none), replace
    messages by position, append `append` after the last one, then set the head records that are not
    `KEEP`, and with `claim` advance the claim number by one.
    """

    append: Sequence[StoredMessage] = ()
    replace: Mapping[int, StoredMessage] = field(default_factory=dict)
    """Position -> the message that takes its place; each position is below the kept count."""
    keep: int | None = None
    """Keep only the first `keep` messages: a client that rewrote its history starts again there."""
    open_turn: JSONValue = KEEP
    applied: JSONValue = KEEP
    grants: JSONValue = KEEP
    claim: bool = False
    """Take a new claim: the claim number advances by one, and the writer holds the new number."""
    owner: str | None = None
    """The owner of a thread this save creates; ignored when the thread exists (an owner is set once)."""
    incarnation: str | None = None
    """A unique name for the creation of the thread this save creates (`ThreadHead.incarnation`); else ignored."""
    title: JSONValue = KEEP
    """The thread's title: a str, None to clear it, or KEEP. Not an engine record: `records()` leaves it out."""
    stamp: str = field(default_factory=new_stamp)
    """The head's new `stamp`: drawn fresh for each change, so each saved state has its own."""

    def __post_init__(self) -> None:
        if not (self.title is KEEP or self.title is None or isinstance(self.title, str)):
            raise TypeError(f"a thread's title is a str, None or KEEP, not {type(self.title).__name__}")

    def records(self) -> dict[str, JSONValue]:
        """The head records this change sets, by name."""
        named = {"open_turn": self.open_turn, "applied": self.applied, "grants": self.grants}
        return {name: value for name, value in named.items() if value is not KEEP}

    def check(self, message_count: int) -> None:
        """Refuse, before anything is written, a change that names positions the thread does not have.

        Raises:
            ValueError: `keep` is past `message_count`, or a replaced position is past the kept messages.
        """
        kept = message_count if self.keep is None else self.keep
        if not 0 <= kept <= message_count:
            raise ValueError(f"keep={self.keep} is outside the thread's {message_count} messages")
        for position in self.replace:
            if not 0 <= position < kept:
                raise ValueError(f"no message at position {position} to replace")


@dataclass(frozen=True, slots=True)
class JournalEvent:
    """One event of a run's journal."""

    seq: int
    """Its position in the run's journal: 1, 2, 3, ... with no gap; the SSE `id:` it is sent with."""
    json: str
    """The event as wire JSON text, exactly as it was streamed: compact, one line (no raw newline)."""


def journal_events(texts: Iterable[str], first: int) -> list[JournalEvent]:
    """`texts` as journal events, the first numbered `first` and the others after it (0: every one 0).

    Each is built as the frozen `__init__` builds it, less its `object.__setattr__` call per field: the slots are
    set through their descriptors. The writer numbers every streamed event so, and a reader every event it reads:
    some 0.15 µs an event of the 0.3 the constructor takes (docs/benchmarks.md, "The stream, round three").
    """
    seqs = itertools.count(first) if first else itertools.repeat(0)
    events: list[JournalEvent] = []
    append = events.append
    for seq, text in zip(seqs, texts, strict=False):  # the seqs never end
        event = _new_object(JournalEvent)
        _set_seq(event, seq)
        _set_json(event, text)
        append(event)
    return events


class JournalBatch(Sequence[JournalEvent]):
    """Consecutive journal events held as their wire JSON: each `JournalEvent` is made when read, none is kept.

    What a live run's writer hands the store (`append_events`, `JournalAppend`): an append of 1,000 events held
    1,000 tracked objects for the length of the store call, which the garbage collector's young collections then
    walked and moved on to the old generation, towards a full collection; a list of strings is one tracked object
    (docs/benchmarks.md, "The stream's collections"). It is a `Sequence[JournalEvent]` to every store, and it
    never changes: a store may keep it past the call as it is.
    """

    __slots__ = ("first", "texts")

    def __init__(self, texts: list[str], first: int) -> None:
        self.texts: Final = texts
        """The events' wire JSON, in order; the batch's own list, which nothing changes."""
        self.first: Final = first
        """The seq of the first event."""

    def __len__(self) -> int:
        return len(self.texts)

    @overload
    def __getitem__(self, index: int) -> JournalEvent: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[JournalEvent]: ...

    def __getitem__(self, index: int | slice) -> JournalEvent | Sequence[JournalEvent]:
        if isinstance(index, slice):
            start, _, step = index.indices(len(self.texts))
            return JournalBatch(self.texts[index], self.first + start) if step == 1 else list(self)[index]
        text = self.texts[index]  # an IndexError as a list's
        return _journal_event(self.first + index if index >= 0 else self.first + len(self.texts) + index, text)

    def __repr__(self) -> str:
        return f"JournalBatch({self.texts!r}, {self.first})"

    def __iter__(self) -> Iterator[JournalEvent]:
        return map(_journal_event, itertools.count(self.first), self.texts)


_new_object: Final[Any] = object.__new__
_set_seq: Final[Any] = vars(JournalEvent)["seq"].__set__
_set_json: Final[Any] = vars(JournalEvent)["json"].__set__


def _journal_event(seq: int, text: str) -> JournalEvent:
    """One event, built as `journal_events` builds each (its loop keeps the three steps inline, a call less each)."""
    event = _new_object(JournalEvent)
    _set_seq(event, seq)
    _set_json(event, text)
    return cast(JournalEvent, event)


@dataclass(frozen=True, slots=True)
class JournalAppend:
    """Events a save appends to a run's journal in its own transaction (`save_and_append`)."""

    run_id: str
    """The journal's name (the run's journal, as `append_events` names it)."""
    events: Sequence[JournalEvent]
    ended: bool = False
    """The journal ends with these events (its last is terminal), as `append_events(..., ended=True)`."""


@dataclass(frozen=True, slots=True)
class RunJournal:
    """What `read_events` returns: some of a run's events, and where the run stands."""

    events: Sequence[JournalEvent]
    """The events asked for, in seq order."""
    ended: bool
    """The run's terminal event is in the journal: nothing will be appended to it."""
    stop_requested: bool
    """Someone asked the run to stop (`request_stop`)."""
    last_seq: int
    """The journal's last seq (0: none yet), whatever was asked for."""


@dataclass(frozen=True, slots=True)
class ThreadSummary:
    """One row of `list_threads`."""

    thread_id: str
    title: str | None
    updated_at: datetime
    """When the thread was last saved: tz-aware UTC, set by every save."""
    owner: str | None
    open_turn: JSONValue
    """The head's open turn record (the engine turns it into interrupts), or None."""


def check_append(
    thread_id: str, run_id: str, events: Sequence[JournalEvent], *, last_seq: int | None, ended: bool
) -> None:
    """Refuse, before anything is written, an append that would not continue the journal without a gap.

    Args:
        thread_id: The journal's thread, for the message.
        run_id: The journal's run, for the message.
        events: What is appended.
        last_seq: The journal's last seq (0 for no journal yet), or None when the caller cannot know it here
            (the database checks it in the same statement): then only the events' own order is checked.
        ended: Whether the journal is already ended.

    Raises:
        ValueError: The journal ended, the seqs are not consecutive from `last_seq + 1` (from 1 at least), or an
            event's JSON holds a raw newline (the SQL stores keep an append's events in one row, one line each).
    """
    journal = f"the journal of run {run_id!r} of thread {thread_id!r}"
    if ended:
        raise ValueError(f"{journal} has ended: nothing more can be appended")
    first = (events[0].seq if events else 1) if last_seq is None else last_seq + 1
    if first < 1:
        raise ValueError(f"{journal} numbers its events from 1, not {first}")
    if type(events) is JournalBatch and events.first == first:  # numbered with no gap: only the lines to check
        for offset, text in enumerate(events.texts):
            if "\n" in text:
                raise ValueError(
                    f"{journal} keeps compact JSON, one line an event: event {first + offset} holds a newline"
                )
        return
    for offset, event in enumerate(events):
        if event.seq != first + offset:
            raise ValueError(f"{journal} takes seq {first + offset} next, not {event.seq}: no gap, no repeat")
        if "\n" in event.json:
            raise ValueError(f"{journal} keeps compact JSON, one line an event: event {event.seq} holds a newline")


# The SQL stores keep a journal one row per append, not per event: (first seq, last seq, body), the body its events'
# JSON joined by newlines, which compact JSON never holds raw (`check_append` refuses an event that does). A store
# then writes one row and one value an append, whatever its size, and a read splits the few rows it needs.


def pack_events(events: Sequence[JournalEvent]) -> str:
    """The body of the row that keeps `events` (consecutive, checked by `check_append`): their JSON, one line each."""
    if type(events) is JournalBatch:
        return "\n".join(events.texts)
    return "\n".join([event.json for event in events])


def unpack_rows(rows: Iterable[tuple[int, str]], *, after: int, limit: int) -> list[JournalEvent]:
    """The events with seq > `after`, at most `limit`, of a journal's rows `(first_seq, body)` in seq order.

    The rows are those whose last seq is past `after` (the first may start at or before it): each is split
    only as far as the events asked for.
    """
    events: list[JournalEvent] = []
    for first, body in rows:
        wanted = limit - len(events)
        if wanted <= 0:
            break
        skip = max(after + 1 - first, 0)
        lines = body.split("\n", skip + wanted)[skip : skip + wanted]  # past its maxsplit, the rest in one piece
        events.extend(journal_events(lines, first + skip))
    return events


class JournalWatch(Protocol):
    """A store's notice of appends to one journal (`watch_journal`): it calls the `wake` it was given on each."""

    @property
    def live(self) -> bool:
        """Whether appends are notified now; while not, the watcher reads the journal on a timer instead."""
        ...

    def close(self) -> None:
        """Stop watching: `wake` is not called again."""
        ...


class StoreConflict(Exception):
    """The thread changed since it was read: another request got there first. Nothing was written."""

    def __init__(self, thread_id: str, expected_version: int) -> None:
        self.thread_id = thread_id
        self.expected_version = expected_version
        super().__init__(f"thread {thread_id!r} is no longer at version {expected_version}")


class StaleClaim(StoreConflict):
    """The save carried a claim number that is no longer the thread's: a newer claim took the turn over."""

    def __init__(self, thread_id: str, expected_version: int, fence: int) -> None:
        super().__init__(thread_id, expected_version)
        self.fence = fence
        self.args = (f"thread {thread_id!r} was claimed again after claim {fence}",)


class ThreadGone(StoreConflict):
    """The save was meant for a life of the thread that is over: it was deleted (and perhaps created again).

    Nothing was written. The writer's run must store nothing more: what it holds belongs to a thread that is gone.
    """

    def __init__(self, thread_id: str, expected_version: int, incarnation: str | None) -> None:
        super().__init__(thread_id, expected_version)
        self.incarnation = incarnation
        self.args = (f"thread {thread_id!r} of incarnation {incarnation!r} is gone: it was deleted",)


def check_life(thread_id: str, expected_version: int, incarnation: object, stored: tuple[bool, str | None]) -> None:
    """Refuse a save meant for another life of the thread than the one stored (`stored`: found, its incarnation).

    A save that creates the thread (`expected_version` 0) and one that names no life (`ANY_INCARNATION`) pass.

    Raises:
        ThreadGone: The thread is absent, or holds another incarnation than the one named.
    """
    if expected_version == 0 or incarnation is ANY_INCARNATION:
        return
    found, current = stored
    if not found or current != incarnation:
        raise ThreadGone(thread_id, expected_version, incarnation if isinstance(incarnation, str) else None)


class StoreUnavailable(Exception):
    """The store could not be used: not reached, not in time, or not writable. The message names which.

    A database restarting or cut off, a call past the store's deadline, a file locked too long, read-only
    or full. A `load` that raises it may be tried again. A `save` that raises it may or may not have been
    applied: read the thread again before deciding anything. A store recovers by itself once it can be used
    again (no connection that failed is used again).
    """


@runtime_checkable
class TurnStore(Protocol):
    """Durable storage for threads and their suspended turns, shared by every replica that serves them.

    Guarantees every implementation keeps (the contract tests in `tests/stores/` check them):

    - `save` is atomic: all of a `ThreadChange` is written, or none of it.
    - `save` is a compare-and-set on the version: against a stale `expected_version` it raises
      `StoreConflict` and writes nothing, so of two requests racing on one thread exactly one applies.
    - With `incarnation` (the life the writer read: a str, or None for a thread stored without one), `save`
      refuses, with `ThreadGone` and nothing written, unless the thread exists with that incarnation: a
      write meant for a deleted thread never lands in a thread created again under its id, whatever its
      version and claim number. This is checked before the fence and the version.
    - Every save sets the head's `stamp` to the change's (`ThreadChange.stamp`).
    - With `fence`, `save` also refuses, with `StaleClaim` and nothing written, unless `fence` is the
      thread's current claim number. A claim (`ThreadChange.claim`) advances the number by one; it
      never goes back, not even when the turn is released or closed.
    - Messages are returned exactly as they were appended (the same JSON text), in position order.
      Nothing a caller does to what `load` returned changes what the store holds.
    - Every call ends: within the store's deadline (its `timeout`), or with `StoreUnavailable`. A store
      that cannot be written, for any reason, raises `StoreUnavailable` too, never a driver error.
    - Every save sets the thread's `updated_at` to the store's current time, and its `title` when the
      change names one (`KEEP` leaves it).
    - A run's journal holds its events in seq order, 1, 2, 3, ... with no gap and no seq twice: an
      append that does not continue it (`events[0].seq` is not the last seq + 1, or the seqs are not
      consecutive), an append to an ended journal, or one with an event whose JSON holds a raw newline
      (compact JSON never does), raises `ValueError` and writes nothing. An append is atomic: all its
      events and its `ended` are written, or none. Events come back as the exact text appended.
    - A stop request is kept until the journal goes: every later append and read reports it. It is
      refused (False) for a journal that does not exist or has ended.
    - `list_threads` pages are disjoint and, concatenated, give every thread of the owner that was not
      saved meanwhile, in the order newest `updated_at` first, then greatest thread id first.
    - `delete_thread` is atomic: the thread, its messages, its head records (the open turn too) and its
      runs' journals go together. After it, the thread loads as None, a save fenced by an old claim is
      refused (`StaleClaim`), and its journals read as None.
    """

    async def load(self, thread_id: str, *, since: int | None = 0, until: int | None = None) -> StoredThread | None:
        """Return the thread's head and its messages from position `since` on, or None for no thread.

        `since=None` reads the head alone; `since` past the last message reads no message. With `until`,
        only the messages before that position: a slice `[since, until)` read in one query, with the head
        of the same version (a page of a long thread, or its tail, without the rest).

        Raises:
            StoreUnavailable: The store could not be reached; nothing was read, and it may be tried again.
        """
        ...

    async def find_message(self, thread_id: str, message_id: str) -> int | None:
        """The position of the thread's first message with this id, or None (no such message or thread).

        One indexed lookup: a page that starts after a message id needs no other message read.

        Raises:
            StoreUnavailable: The store could not be reached; nothing was read, and it may be tried again.
        """
        ...

    async def save(
        self,
        thread_id: str,
        change: ThreadChange,
        *,
        expected_version: int,
        fence: int | None = None,
        incarnation: object = ANY_INCARNATION,
    ) -> int:
        """Write `change` if the thread is at `expected_version` (0: absent); return the new version.

        Raises:
            ThreadGone: `incarnation` is named and the thread is absent or of another incarnation (`check_life`).
            StaleClaim: `fence` is given and is not the thread's claim number.
            StoreConflict: The thread is not at `expected_version`.
            ValueError: `keep` or a replaced position is past the thread's messages.
            StoreUnavailable: The store could not be reached; the save may or may not have been applied.
        """
        ...

    async def purge(
        self, older_than: timedelta, *, grace: timedelta = timedelta(0), now: datetime | None = None
    ) -> int:
        """Delete finished threads idle longer than `older_than`, and threads whose open turn expired `grace` ago.

        A finished thread has no open turn; `now` defaults to the current time.
        The journals of the threads it deletes go too, and so does every journal last appended to longer
        than `older_than` ago, whatever its thread (a run that ended, or one whose replica died).
        Returns how many threads were deleted (`python -m adapter.stores purge` calls it).

        Raises:
            ValueError: `older_than` or `grace` is negative.
        """
        ...

    async def append_events(
        self, thread_id: str, run_id: str, events: Sequence[JournalEvent], *, ended: bool = False
    ) -> bool:
        """Append to the run's journal (created by the first append); return whether a stop was requested.

        `events[0].seq` must be the journal's last seq + 1, the seqs consecutive and each event's JSON one line,
        else ValueError and nothing is written. `ended=True` marks the journal ended (its last event is terminal);
        appending to an ended journal is a ValueError. A journal of a thread that does not exist is allowed (a
        run's first events come before its first save). No events is allowed: it creates the journal, or ends
        it, or only asks whether a stop was requested.

        Raises:
            ValueError: The seqs do not continue the journal, it has ended, or an event's JSON holds a newline;
                nothing was written.
            StoreUnavailable: The store could not be reached; the append may or may not have been applied.
        """
        ...

    async def read_events(self, thread_id: str, run_id: str, *, after: int = 0, limit: int = 1000) -> RunJournal | None:
        """The run's events with seq > `after`, at most `limit` (0: none, just the status), or None for no journal.

        Raises:
            ValueError: `limit` is negative.
            StoreUnavailable: The store could not be reached; nothing was read, and it may be tried again.
        """
        ...

    async def request_stop(self, thread_id: str, run_id: str) -> bool:
        """Ask the run to stop; False when there is no such journal or it already ended. Idempotent.

        Raises:
            StoreUnavailable: The store could not be reached; the request may or may not have been kept.
        """
        ...

    async def list_threads(
        self, owner: str | None, *, before: str | None = None, limit: int = 100
    ) -> tuple[list[ThreadSummary], str | None]:
        """The threads of `owner` (None: the unowned threads), newest `updated_at` first, at most `limit`.

        Threads saved at the same moment come greatest thread id first. Also returns the cursor for the next
        page (None at the end). `before` is a cursor this method returned (opaque to callers).

        Raises:
            ValueError: `before` is not a cursor this method returns, or `limit` is below 1.
            StoreUnavailable: The store could not be reached; nothing was read, and it may be tried again.
        """
        ...

    async def delete_thread(self, thread_id: str, *, incarnation: object = ANY_INCARNATION) -> bool:
        """Delete the thread, its messages, its head records (the open turn too) and every journal of its runs.

        False when there was no such thread (its journals, if any, are deleted all the same). Atomic. With
        `incarnation`, only that life of the thread: one of another incarnation is left whole, journals included
        (False), so a delete decided on one life never takes the next.

        Raises:
            StoreUnavailable: The store could not be reached; the delete may or may not have been applied.
        """
        ...

    async def ping(self, *, write: bool = False) -> None:
        """Return once the store answers one trivial query; raise when it cannot (`GET /health` calls it).

        With `write`, return only if the store can be written too, without changing any thread: a store
        that can be read but not written (a read-only file, a read-only database) raises `StoreUnavailable`.
        A store whose `ping` takes no `write` is asked without it (`adapter.stores._health`).
        """
        ...

    async def close(self) -> None:
        """Release connections and files."""
        ...


async def save_and_append(
    store: TurnStore,
    thread_id: str,
    change: ThreadChange,
    journal: JournalAppend,
    *,
    expected_version: int,
    fence: int | None = None,
    incarnation: object = ANY_INCARNATION,
) -> tuple[int, bool]:
    """`store.save` and `store.append_events` in one store call: the new version, and whether a stop was requested.

    A store that has `save_and_append` writes both in one transaction, or neither (the stores that ship do): one
    round trip instead of two. A store of one's own without it gets the two calls, the save first, as before the
    method was added: the merge saves time, never durability (docs/stores.md, "Fewer round trips").

    Raises:
        ThreadGone, StaleClaim, StoreConflict, ValueError: As `save`, and ValueError as `append_events`; with a
            store that has the method, nothing was written then.
        StoreUnavailable: The store could not be reached; both, or (without the method) the save alone, may have
            been applied.
    """
    merged = getattr(store, "save_and_append", None)
    if callable(merged):
        saved: tuple[int, bool] = await merged(
            thread_id, change, journal, expected_version=expected_version, fence=fence, incarnation=incarnation
        )
        return saved
    version = await store.save(
        thread_id, change, expected_version=expected_version, fence=fence, incarnation=incarnation
    )
    stop = await store.append_events(thread_id, journal.run_id, journal.events, ended=journal.ended)
    return version, stop


CREATE_ATTEMPTS: Final = 3
"""Looks `load_or_create` takes at a thread another request creates and deletes again meanwhile, before it gives up."""


async def load_or_create(
    store: TurnStore,
    thread_id: str,
    change: ThreadChange,
    journal: JournalAppend | None = None,
    *,
    since: int | None = 0,
) -> StoredThread | None:
    """The thread as `store.load` reads it, untouched; or, when it is absent, the save that creates it, in one call.

    The creation is `save(thread_id, change, expected_version=0)` with `journal`'s events appended in the same
    transaction (`save_and_append`): None says the thread was absent and is now created, at version 1. A thread that
    exists is returned as it is, whoever created it, even an instant before: nothing of `change` or `journal` is
    written then. A store that has `load_or_create` does it in one round trip to its own thread or connection (the
    stores that ship do); a store of one's own without it gets `load`, then the creating save, as two calls.

    Raises:
        StoreConflict: The thread was created and deleted again by others while the call looked, `CREATE_ATTEMPTS`
            times: nothing was written.
        ValueError: `journal` does not open its journal (as `append_events`); nothing was written.
        StoreUnavailable: The store could not be reached; the thread and its journal may have been created.
    """
    if _merges_loads(type(store)):
        merged: Any = store  # its class defines the method (`_merges_loads`), which the protocol leaves optional
        found: StoredThread | None = await merged.load_or_create(thread_id, change, journal, since=since)
        return found
    for _ in range(CREATE_ATTEMPTS):
        stored = await store.load(thread_id, since=since)
        if stored is not None:
            return stored
        try:
            if journal is None:
                await store.save(thread_id, change, expected_version=0)
            else:
                await save_and_append(store, thread_id, change, journal, expected_version=0)
        except StoreConflict:
            continue  # another request created it since the load: read it
        return None
    raise StoreConflict(thread_id, 0)


@functools.cache
def _merges_loads(kind: type) -> bool:
    """Whether stores of `kind` make a new thread's load and creation in one call (their class's `load_or_create`).

    Not when a subclass hooks `load` or `save_and_append` below the class that defines it: the merged call would
    pass the hook by, so such a store gets the two calls, through the hooks, as before the method was added. Nor when
    no class defines it (an attribute forwarded by `__getattr__`, or None).
    """
    owner = next((klass for klass in kind.__mro__ if "load_or_create" in vars(klass)), None)
    if owner is None or not callable(vars(owner)["load_or_create"]):
        return False
    for name in ("load", "save_and_append"):
        definer = next((klass for klass in kind.__mro__ if name in vars(klass)), None)
        if definer is not None and definer is not owner and issubclass(definer, owner):
            return False
    return True


def merges_appends(store: object) -> bool:
    """Whether `store` writes a save and an append in one call (`save_and_append`): else two calls, as before it."""
    return callable(getattr(store, "save_and_append", None))


def keeps_journals(store: object) -> bool:
    """Whether `store` keeps runs' journals (`append_events`): a store written before journals journals nothing."""
    return callable(getattr(store, "append_events", None))
