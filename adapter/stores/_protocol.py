"""The store seam: a thread's messages, appended once, and its small records beside them.

A thread is stored as two parts:

- its messages, in order, each stored once as wire JSON text when it is settled, at a position
  (0, 1, 2, ...); a save appends new ones and may replace a few by position (a form card that moved
  on), so a turn's cost depends on the turn, not on the thread;
- its head: the thread's version, its claim number, how many messages it holds, and the small
  records of the engine (the open turn with its pending calls, the last applied resume with its
  fingerprints, answers queued for a worker), each an opaque JSON value to the store.

Every save is a compare-and-set on the version. A save may also carry a fencing token: the claim
number the writer holds. Claiming a turn increments the thread's claim number; a save whose token
is not the current claim number is refused, so a writer whose claim was taken over (its lease ran
out while it was slow, not dead) can never write after the new claimant, even after re-reading.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final, Protocol, runtime_checkable

JSONValue = Any
"""A JSON value (dict, list, str, number, bool or None) that the store keeps without looking inside."""


class _Keep:
    def __repr__(self) -> str:
        return "KEEP"


KEEP: Final = _Keep()
"""Leaves a head record as it is in a `ThreadChange`."""


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
    queued: JSONValue = None
    """Resume entries submitted for a worker to apply, or None."""
    owner: str | None = None
    """Who owns the thread, as set by the save that created it; None for an unowned thread."""


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
    queued: JSONValue = KEEP
    claim: bool = False
    """Take a new claim: the claim number advances by one, and the writer holds the new number."""
    owner: str | None = None
    """The owner of a thread this save creates; ignored when the thread exists (an owner is set once)."""

    def records(self) -> dict[str, JSONValue]:
        """The head records this change sets, by name."""
        named = {"open_turn": self.open_turn, "applied": self.applied, "queued": self.queued}
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
    - With `fence`, `save` also refuses, with `StaleClaim` and nothing written, unless `fence` is the
      thread's current claim number. A claim (`ThreadChange.claim`) advances the number by one; it
      never goes back, not even when the turn is released or closed.
    - Messages are returned exactly as they were appended (the same JSON text), in position order.
      Nothing a caller does to what `load` returned changes what the store holds.
    - Every call ends: within the store's deadline (its `timeout`), or with `StoreUnavailable`. A store
      that cannot be written, for any reason, raises `StoreUnavailable` too, never a driver error.
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
        self, thread_id: str, change: ThreadChange, *, expected_version: int, fence: int | None = None
    ) -> int:
        """Write `change` if the thread is at `expected_version` (0: absent); return the new version.

        Raises:
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

        A finished thread has no open turn and no queued answers; `now` defaults to the current time.
        Returns how many threads were deleted (`python -m adapter.stores purge` calls it).

        Raises:
            ValueError: `older_than` or `grace` is negative.
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
