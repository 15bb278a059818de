"""PostgreSQL's notice of journal appends: one `LISTEN` connection per store, waking whoever watches a journal.

    agui_append (schema 8) ── NOTIFY agui_<md5(thread, run)>, at its commit ──> the LISTEN connection of each
    store that watches the journal ──> the watchers' `wake` (`adapter._sessions._feed.Feed`: it reads what is new, once)

The notification is sent in the append's transaction, so it arrives once the events can be read, never before.
A watch is `live` only while its channel is listened to on a connection that answers; the connection then
wakes it, so the watcher reads once what may have come before. While notifications are down (the connection
lost, not yet made, or refused) every watch is not live and the watchers poll; the connection is made again
after a pause.

A connection is trusted only once a notification sent through the store's pool (the path appends take) came
back on it: behind a transaction-mode pooler such as PgBouncer the `LISTEN` is held by a server connection the
pooler hands to others, and the probe's notification does not come back (nor does it when the database's
encoding hashes the channel's name differently from Python). The store then logs a warning and polls.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Final

log = logging.getLogger("adapter.stores.postgres")

SYNC_INTERVAL: Final = 0.2
"""Seconds the connection waits for notifications before it listens to channels watched meanwhile."""
HEARTBEAT: Final = 10.0
"""Seconds between two trivial queries on an idle connection: a connection the network lost is found out."""
RETRY_PAUSES: Final = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0)
"""Pauses before the connection is made again after a failure, one more each failure in a row, the last kept."""
_ON: Final = "journal notifications are on: followers read once per append"
PROBE_IDS: Final = ("agui-probe-é", "\u00fcber")
"""The thread and run ids of the probe's channel: not ASCII, so an encoding that hashes them otherwise shows."""


def channel(thread_id: str, run_id: str) -> str:
    """The channel `agui_append` notifies for this journal: the MD5 of its ids (a clash only wakes a watcher more)."""
    digest = hashlib.md5(f"{thread_id}\x1f{run_id}".encode(), usedforsecurity=False).hexdigest()
    return f"agui_{digest}"


class Unavailable(Exception):
    """Notifications cannot be trusted on this connection (the probe's did not come back)."""


class Watch:
    """One watcher of one journal: `wake` is called on each append (`adapter.stores.JournalWatch`)."""

    def __init__(self, notifier: Notifier, name: str, wake: Callable[[], None]) -> None:
        self.notifier = notifier
        self.channel = name
        self.wake = wake

    @property
    def live(self) -> bool:
        """Whether this journal's appends are notified now."""
        return self.channel in self.notifier.listening

    def close(self) -> None:
        """Stop watching."""
        self.notifier.unwatch(self)


class Notifier:
    """The store's `LISTEN` connection: open while something is watched, made again when lost.

    Args:
        connect: Opens a new connection (autocommit), within the store's deadline.
        probe: Sends a notification on a channel through the store's pool.
        timeout: Seconds the probe's notification may take to come back, and a heartbeat to answer.
    """

    def __init__(
        self, connect: Callable[[], Awaitable[Any]], probe: Callable[[str], Awaitable[None]], timeout: float
    ) -> None:
        self._connect = connect
        self._probe = probe
        self._timeout = timeout
        self._watches: dict[str, set[Watch]] = {}
        self.listening: set[str] = set()
        """The channels listened to on a connection that answers: their watches are live."""
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self.backend_pid: int | None = None
        """The PostgreSQL backend of the connection while it is open (`pg_stat_activity.pid`)."""
        self._failures = 0
        """Connections in a row that failed: the pause before the next grows with them."""
        self._said_on = False

    def watch(self, thread_id: str, run_id: str, wake: Callable[[], None]) -> Watch:
        """Call `wake` on each append to the journal, once live; the connection is opened if none is."""
        watch = Watch(self, channel(thread_id, run_id), wake)
        self._watches.setdefault(watch.channel, set()).add(watch)
        if not self._closed and (self._task is None or self._task.done()):
            self._task = asyncio.ensure_future(self._run())
        return watch

    def unwatch(self, watch: Watch) -> None:
        """Forget one watch; its channel is no longer listened to once nobody watches it."""
        watches = self._watches.get(watch.channel)
        if watches is not None:
            watches.discard(watch)
            if not watches:
                del self._watches[watch.channel]

    async def aclose(self) -> None:
        """Close the connection; nothing is watched any more."""
        self._closed = True
        self._watches.clear()
        self.listening.clear()
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        """Keep a connection listening while something is watched; after a failure, poll meanwhile and retry."""
        while self._watches and not self._closed:
            try:
                await self._listen()
            except Exception as error:
                self._down()
                pause = RETRY_PAUSES[min(self._failures, len(RETRY_PAUSES) - 1)]
                if self._failures == 0:  # once an outage
                    log.warning("journal notifications are unavailable (%s); followers poll, trying again", error)
                self._failures += 1
                await asyncio.sleep(pause)
        self._down()

    async def _listen(self) -> None:
        """One connection's life: probed, then listening to the watched channels until nothing is watched."""
        connection = await self._connect()
        self.backend_pid = connection.info.backend_pid
        try:
            async with asyncio.timeout(3 * self._timeout):  # LISTEN, the probe's round trip, its wait
                await self._check(connection)
            # Said once, and again after an outage: a connection opened again for the next follower is not news.
            log.log(logging.INFO if self._failures or not self._said_on else logging.DEBUG, _ON)
            self._failures, self._said_on = 0, True
            loop = asyncio.get_running_loop()
            answered = loop.time()
            while self._watches and not self._closed:
                await self._sync(connection)
                async with contextlib.aclosing(connection.notifies(timeout=SYNC_INTERVAL)) as notes:
                    async for note in notes:
                        for watch in list(self._watches.get(note.channel, ())):
                            watch.wake()
                if loop.time() - answered >= HEARTBEAT:
                    async with asyncio.timeout(self._timeout):
                        await connection.execute("SELECT 1")
                    answered = loop.time()
        finally:
            self._down()
            self.backend_pid = None
            with contextlib.suppress(Exception):
                await connection.close()

    async def _check(self, connection: Any) -> None:
        """Trust the connection only once a notification sent through the pool came back on it."""
        probe = channel(*PROBE_IDS)
        await connection.execute(f"LISTEN {probe}")
        await self._probe(probe)
        async with contextlib.aclosing(connection.notifies(timeout=self._timeout, stop_after=1)) as notes:
            came = [note async for note in notes if note.channel == probe]
        await connection.execute(f"UNLISTEN {probe}")
        if not came:
            raise Unavailable(f"a notification sent through the pool did not come back within {self._timeout:g} s")

    async def _sync(self, connection: Any) -> None:
        """Listen to the channels watched now and no longer to the others; wake the watches that became live."""
        wanted = set(self._watches)
        new, old = wanted - self.listening, self.listening - wanted
        statements = [f"LISTEN {name}" for name in sorted(new)] + [f"UNLISTEN {name}" for name in sorted(old)]
        if not statements:
            return
        async with asyncio.timeout(self._timeout):
            await connection.execute("; ".join(statements))
        self.listening = (self.listening | new) - old
        for name in new:  # read once what came before the LISTEN
            for watch in list(self._watches.get(name, ())):
                watch.wake()

    def _down(self) -> None:
        """No notification comes now: every watch polls (woken once, to read what it may have missed)."""
        if not self.listening:
            return
        self.listening = set()
        for watches in list(self._watches.values()):
            for watch in list(watches):
                watch.wake()
