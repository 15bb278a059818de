"""The threads an adapter last stored or read, kept as protocol messages beside their exact stored text.

A resume needs the stored conversation as protocol messages. When this adapter wrote (or read) the
thread last, it already holds them: `ParsedThreads` keeps them beside the text the store holds for
each, and hands back the longest prefix whose text is still exactly the stored text. A change made
by another replica (or a purge and a new thread under the same id) changes the text, so it can never
serve a stale message; its memory is bounded by the stored text it keeps.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from ag_ui.core import Message

from adapter.stores import ThreadChange

DEFAULT_CHARS: Final = 4_000_000
"""How much stored text (and the messages parsed from it) one adapter keeps, across threads.

The parsed messages cost about 11 bytes of memory per character of text (measured by tests/bench/soak.py),
so this default holds some 45 MiB at most.
"""


@dataclass(frozen=True, slots=True)
class _Entry:
    texts: tuple[str, ...]
    messages: tuple[Message, ...]
    chars: int


class ParsedThreads:
    """Protocol messages by thread, valid while the store holds exactly their text; least recently used go first."""

    def __init__(self, max_chars: int = DEFAULT_CHARS) -> None:
        self.max_chars = max_chars
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._chars = 0

    def prefix(self, thread_id: str, texts: tuple[str, ...]) -> list[Message]:
        """The messages of the longest prefix of the stored `texts` that are the texts they were kept with."""
        entry = self._entries.get(thread_id)
        if entry is None:
            return []
        self._entries.move_to_end(thread_id)
        if entry.texts == texts[: len(entry.texts)]:  # the usual case, compared in one pass of C
            return list(entry.messages)
        pairs = enumerate(zip(entry.texts, texts, strict=False))
        same = next((i for i, (kept, now) in pairs if kept != now), min(len(entry.texts), len(texts)))
        return list(entry.messages[:same])

    def keep(self, thread_id: str, known: KnownThread) -> None:
        """Remember that the store holds `known.texts` for `thread_id`, and that they are `known.messages`."""
        self.forget(thread_id)
        if known.chars > self.max_chars:
            return
        self._entries[thread_id] = _Entry(known.texts, known.messages, known.chars)
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

    texts: tuple[str, ...] = ()
    messages: tuple[Message, ...] = ()
    chars: int = -1
    """The length of all the texts (computed when not given)."""

    def __post_init__(self) -> None:
        if self.chars < 0:
            object.__setattr__(self, "chars", sum(map(len, self.texts)))

    def changed(self, change: ThreadChange, history: Sequence[Message] | None, first_new: int) -> KnownThread | None:
        """The thread once `change` is saved, whose appended messages are `history[first_new:]`; None if unknown.

        Only messages serialised into the change (appended or replaced) join it: a client's copy that
        the store kept by id alone never does.
        """
        if not (change.append or change.replace or change.keep is not None):
            return self
        kept = len(self.texts) if change.keep is None else change.keep
        if history is None or kept != first_new or len(history) - first_new != len(change.append):
            return None
        texts, messages = list(self.texts[:kept]), list(self.messages[:kept])
        for position, stored in change.replace.items():
            texts[position], messages[position] = stored.json, history[position]
        added = [stored.json for stored in change.append]
        chars = self.chars + sum(map(len, added)) if kept == len(self.texts) and not change.replace else -1
        return KnownThread((*texts, *added), (*messages, *history[first_new:]), chars)
