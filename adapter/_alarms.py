"""Alarms of one delay, many at once, on one loop timer: what a replica's runs and a store's calls set by the hundred.

The journal's runs set them for their stop-request looks, `max_run_time` and their listeners' keep-alives
(`adapter._sessions._journal`); a store's worker thread for its calls' deadlines (`adapter.stores._worker`).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable


class Alarm:
    """One alarm of `Alarms`: it rings once, unless cancelled first."""

    __slots__ = ("due", "ring", "_alarms")

    def __init__(self, due: float, ring: Callable[[], object], alarms: Alarms) -> None:
        self.due = due
        self.ring: Callable[[], object] | None = ring
        self._alarms = alarms

    def cancel(self) -> None:
        if self.ring is not None:
            self.ring = None
            self._alarms.dropped()


class Alarms:
    """Alarms of one delay, for every caller on a loop: one loop timer, not one an alarm.

    Each rings `delay` seconds after it was set, so they ring in the order they were set: a queue holds them, and
    one timer, armed for the oldest still set, serves them all. A loop timer costs some 1.9 µs (its handle, the
    heap, its cancel), an alarm here 0.25. Meant for long delays that are set often and most often cancelled (a
    run's stop-request look, `max_run_time`, a listener's keep-alive interval, a store call's deadline): a cancelled
    alarm stays queued until its time, or until most of the queue is cancelled ones, and a timer armed for one rings
    once for nothing (a loop turn) where a loop timer would have gone with its cancel. An alarm set on another event
    loop than the last one's drops those of that loop (they ring for nobody: that loop has ended).
    """

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self._queue: deque[Alarm] = deque()
        self._cancelled = 0
        self._timer: asyncio.TimerHandle | None = None
        self._armed = 0.0
        """When the timer is due."""
        self._loop: asyncio.AbstractEventLoop | None = None

    def set(self, ring: Callable[[], object]) -> Alarm:
        """An alarm that calls `ring` in `delay` seconds, unless cancelled first."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._loop, self._timer, self._cancelled = loop, None, 0
            self._queue.clear()
        alarm = Alarm(loop.time() + self.delay, ring, self)
        self._queue.append(alarm)
        if self._timer is None:
            self._arm(loop, alarm.due)
        return alarm

    def dropped(self) -> None:
        """An alarm was cancelled: the queue is rebuilt without them once they are most of it."""
        self._cancelled += 1
        if self._cancelled > 64 and 2 * self._cancelled > len(self._queue):
            self._queue = deque(alarm for alarm in self._queue if alarm.ring is not None)
            self._cancelled = 0

    def _ring(self, loop: asyncio.AbstractEventLoop) -> None:
        if loop is not self._loop:
            return  # armed on a loop whose alarms were dropped: the queue is another loop's now
        now, queue = max(loop.time(), self._armed), self._queue  # the loop may run a timer a clock tick early
        try:
            while queue:  # `_timer` stays set meanwhile: an alarm a ring sets joins the queue, and arms nothing
                alarm = queue[0]
                if alarm.ring is not None and alarm.due > now:
                    break
                queue.popleft()
                ring, alarm.ring = alarm.ring, None
                if ring is None:
                    self._cancelled -= 1
                else:
                    ring()
        finally:  # a ring that raised (the loop reports it) leaves the others set
            self._timer = None
            if queue:
                self._arm(loop, queue[0].due)

    def _arm(self, loop: asyncio.AbstractEventLoop, due: float) -> None:
        self._timer, self._armed = loop.call_at(due, self._ring, loop), due
