"""`CostCache`: a least-recently-used map bounded in entries and in total cost (bytes, as its user counts them).

A cache of what outsiders send (their schemas, their regexes) must be bounded in what it holds, not only
in how many things: a thousand small entries and a thousand 8 MiB ones are not the same cache.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

__all__ = ["CostCache"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class CostCache(Generic[K, V]):
    """Entries by key, each with a cost; the least recently used go first when either bound is passed.

    Safe to share between threads. An entry that costs more than the whole budget is not kept.
    """

    def __init__(self, max_entries: int, max_cost: int) -> None:
        self.max_entries = max_entries
        self.max_cost = max_cost
        self._entries: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._cost = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def cost(self) -> int:
        """The total cost of the entries held."""
        return self._cost

    def get(self, key: K) -> V | None:
        """The entry for `key`, now the most recently used, or ``None``."""
        with self._lock:
            found = self._entries.get(key)
            if found is None:
                return None
            self._entries.move_to_end(key)
            return found[0]

    def put(self, key: K, value: V, cost: int) -> None:
        """Keep `value` under `key`, dropping the least recently used entries until both bounds hold."""
        if cost > self.max_cost:
            return
        with self._lock:
            previous = self._entries.pop(key, None)
            if previous is not None:
                self._cost -= previous[1]
            self._entries[key] = (value, cost)
            self._cost += cost
            while self._cost > self.max_cost or len(self._entries) > self.max_entries:
                self._cost -= self._entries.popitem(last=False)[1][1]

    def entries(self) -> list[tuple[K, V, int]]:
        """Every entry, least recently used first, with its cost."""
        with self._lock:
            return [(key, value, cost) for key, (value, cost) in self._entries.items()]
