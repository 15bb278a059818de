"""The threads an adapter last stored or read, kept as protocol messages beside their exact stored text.

A resume needs the stored conversation as protocol messages. When this adapter wrote (or read) the
thread last, it already holds them: `ParsedThreads` keeps them beside the text the store holds for
each, and hands back the longest prefix whose text is still exactly the stored text. A change made
by another replica (or a purge and a new thread under the same id) changes the text, so it can never
serve a stale message; its memory is bounded by the stored text it keeps.

What is kept also names the stamp and version of the state it was read or written at (`ThreadHead.stamp`: drawn
fresh by every save, so no later state repeats it, not a thread created again nor a store restored from a backup
and written again). A long thread whose head still names them is not read again (`RecordHandle.load`): its
messages are these.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Final

from ag_ui.core import Message

from adapter.stores import StoredMessage, ThreadChange, ThreadHead

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


class ParsedThreads:
    """Protocol messages by thread, valid while the store holds exactly their text; least recently used go first."""

    def __init__(self, max_chars: int = DEFAULT_CHARS, *, head_first: int = HEAD_FIRST) -> None:
        self.max_chars = max_chars
        self.head_first = head_first
        """Messages from which a thread kept here is read by its head first (`checkable`)."""
        self._entries: OrderedDict[str, KnownThread] = OrderedDict()
        self._chars = 0

    def prefix(self, thread_id: str, texts: tuple[str, ...]) -> list[Message]:
        """The messages of the longest prefix of the stored `texts` that are the texts they were kept with."""
        entry = self._entries.get(thread_id)
        if entry is None:
            return []
        self._entries.move_to_end(thread_id)
        known = entry.texts
        if known == texts[: len(known)]:  # the usual case, compared in one pass of C
            return list(entry.messages)
        pairs = enumerate(zip(known, texts, strict=False))
        same = next((i for i, (kept, now) in pairs if kept != now), min(len(known), len(texts)))
        return list(entry.messages[:same])

    def checkable(self, thread_id: str) -> KnownThread | None:
        """What is kept for the thread, if a head can tell whether the store still holds it and it is long enough.

        It can when what is kept names a stamp and a version; long enough is `head_first` messages.
        """
        entry = self._entries.get(thread_id)
        if entry is None or entry.stamp is None or entry.version == 0 or len(entry.stored) < self.head_first:
            return None
        self._entries.move_to_end(thread_id)
        return entry

    def keep(self, thread_id: str, known: KnownThread) -> None:
        """Remember that the store holds `known.stored` for `thread_id`, and that they are `known.messages`."""
        self.forget(thread_id)
        if known.chars > self.max_chars:
            return
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
    """A whole stored thread as protocol messages, position for position with the text the store holds."""

    stored: tuple[StoredMessage, ...] = ()
    """The stored messages themselves: what a read of the head alone takes from here."""
    messages: tuple[Message, ...] = ()
    """The protocol message of each, position for position."""
    chars: int = -1
    """The length of all the texts (computed when not given)."""
    stamp: str | None = None
    version: int = 0
    """The stamp and version of the state these are the messages of (`ThreadHead`); version 0: none stored."""

    def __post_init__(self) -> None:
        if self.chars < 0:
            object.__setattr__(self, "chars", sum(map(len, self.texts)))

    @property
    def texts(self) -> tuple[str, ...]:
        """The text the store holds for each message."""
        return tuple(map(_TEXT, self.stored))

    def names(self, head: ThreadHead) -> bool:
        """Whether `head` is of the very state these messages are: the same stamp, at the same version.

        The stamp alone names one state; the version too, for a save by a replica that draws none (an older one).
        """
        known = (self.stamp, self.version, len(self.stored))
        return self.stamp is not None and (head.stamp, head.version, head.message_count) == known

    def changed(
        self, change: ThreadChange, history: Sequence[Message] | None, first_new: int, version: int
    ) -> KnownThread | None:
        """The thread once `change` is saved at `version`, whose appended messages are `history[first_new:]`.

        None if unknown. Only messages serialised into the change (appended or replaced) join it: a client's
        copy that the store kept by id alone never does. The change must be saved on the version this is of.
        """
        stamp = change.stamp
        if not (change.append or change.replace or change.keep is not None):
            return dataclasses.replace(self, stamp=stamp, version=version)
        kept = len(self.stored) if change.keep is None else change.keep
        if history is None or kept != first_new or len(history) - first_new != len(change.append):
            return None
        messages, stored = list(self.messages[:kept]), list(self.stored[:kept])
        for position, replaced in change.replace.items():
            messages[position], stored[position] = history[position], replaced
        added = sum(len(appended.json) for appended in change.append)
        chars = self.chars + added if kept == len(self.stored) and not change.replace else -1
        return KnownThread(
            (*stored, *change.append),
            (*messages, *history[first_new:]),
            chars,
            stamp,
            version,
        )
