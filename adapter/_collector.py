"""The cyclic garbage collector's automatic collections, held off while a long input or thread is parsed.

A long history's parse makes some four tracked objects a message (the model, its set of fields set, its calls),
every one of them alive until the parse returns. With the default thresholds (700 allocations) a body of 1,000
prior turns triggered 32 young collections and 3 of the middle generation, which found nothing to free; and each
middle one moves the collector towards a full one, which walks the whole heap, the parsed-thread cache included
(40 ms and more, in one such resume in five). Paused, the parse's objects are counted at once by the first young
collection after it, and move on as one (docs/benchmarks.md, "The resume's slope, round four").

The pause is the process's, bounded by what one parse reads (a body under its size limit, a thread the load holds
in memory anyway): cycles that other threads leave meanwhile wait that long to be freed. It is taken by setting the
young generation's threshold to 0 (which the collector reads as "no automatic collections"), never by
`gc.disable`, so an app's `gc.disable()` or `gc.enable()` holds whatever a parse does. Parses on several threads
share one pause: the first takes the thresholds as they stand, the last gives them back, unless the app set others
meanwhile, which then stay.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final


class CollectorPause:
    """One pause of the collector's automatic collections, shared by the parses that overlap (the module's rule)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holders = 0
        self._kept = gc.get_threshold()

    @contextmanager
    def paused(self) -> Iterator[None]:
        """No automatic collection until the last of the overlapping pauses ends; then the thresholds the app set."""
        with self._lock:
            if not self._holders:
                self._kept = gc.get_threshold()
                gc.set_threshold(0, *self._kept[1:])
            self._holders += 1
        try:
            yield
        finally:
            with self._lock:
                self._holders -= 1
                if not self._holders and gc.get_threshold() == (0, *self._kept[1:]):
                    gc.set_threshold(*self._kept)


COLLECTOR: Final = CollectorPause()
"""The process's one pause: the thresholds are the process's."""
