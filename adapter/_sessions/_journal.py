"""The run's journal: a run driven by a task the adapter owns, its events numbered, kept and fanned out live.

    Run events ──> LiveRun._drive (the driver task) ──> entries in memory: each event's wire JSON (seq: its place)
                                                      ├──> Tail listeners (the POST response, reattachers)
                                                      └──> LiveRun._write (the writer task, once it has work)
                                                                               ──> store.append_events

A run no longer lives in the request that started it. Its events are pulled by a driver task the adapter
owns (its background set), encoded once as wire JSON, numbered 1, 2, 3, ... (the SSE `id:` of each), kept in
memory while the run is live, and fanned out to every listener: the response to `POST /` is one, a
reattached `GET .../events` another. The driver task is the one owner of the run past its client: when a listener
goes, the run goes on; with `on_disconnect="stop"`, once its last listener left, the driver asks it to stop as a
stop request does (`halt`): it ends at its next safe point with what it did stored, and `RUN_ERROR`
`RUN_INTERRUPTED`.

The writer appends what is ready to the store in batches, a group commit: the first event after a quiet spell
waits `GATHER` (a burst of deltas goes in one append), what comes during an append goes in the next, and appends
start at least `FLUSH_INTERVAL` apart while events flow (an append costs a store round trip, an event a few
microseconds). Readers on this replica read memory and never wait for it; a follower on another replica reads the
store, so these two bound its lag (docs/replicas.md). The writer learns from each append whether someone asked the
run to stop; while no event flows (a long tool) it asks the store every
`POLL_INTERVAL`. The last batch goes with the run's last save, in one store call (`LiveRun.seal`): the run makes
its ending's events first, and the journal holds them back from every reader until that save commits. The writer
is a task only once it has work (an event `GATHER` old and not sealed, an ending not written, a quiet run to look
at); until then one alarm stands for it, so a short run, whose events all go with its last save, starts none.

A journal belongs to one run in one life of its thread (`journal_name`): a run of a thread deleted and created
again under its id never shares a journal with a run of the new life, and a reader finds only the journals of
the life the thread has now. A run id used again in one life (a client retrying an input after a dropped
connection; CopilotKit resumes under the interrupted run's id) starts another attempt with a journal of its own,
numbered from 1 again: the events route serves a run id's latest attempt, so every run is journaled and can be
stopped. `MAX_ATTEMPTS` bounds the attempts of one run id.

A journal is bounded (`JournalLimits`): an event that would take it past either limit is not kept; the run
is closed then (as a client leaving closes it) and the journal ends with `RUN_ERROR` `JOURNAL_LIMIT`. The limits
bound what a backend makes, never a turn: the engine's restatement of the stored thread (`MESSAGES_SNAPSHOT`,
before an interrupt and when a resume starts) is kept whole and not counted, however long the thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

import anyio
from ag_ui.core import BaseEvent, EventType, RunErrorEvent

from adapter import _errors as codes
from adapter._alarms import Alarm, Alarms
from adapter._errors import InputRejected, LimitExceeded
from adapter._run._config import DEFAULT_MAX_CHARS, DEFAULT_MAX_DETACHED, DEFAULT_MAX_EVENTS, DEFAULT_MAX_RUN_TIME
from adapter._run._stop import StopSignal
from adapter._wire import event_json
from adapter.stores import JournalAppend, JournalEvent, StoreUnavailable, TurnStore
from adapter.stores._protocol import JournalBatch, journal_events, keeps_journals

log = logging.getLogger("adapter.journal")

GATHER: Final = 0.005
"""Seconds the writer lets events gather once it saw one, so that a burst goes in one append."""
FLUSH_INTERVAL: Final = 0.02
"""Seconds at least from the start of one append to the next, unless the run ended or a batch is full: a run
streaming faster than one event per interval makes one append per interval, not one per event."""
MAX_BATCH: Final = 1000
"""Events one append takes at most."""
POLL_INTERVAL: Final = 0.25
"""Seconds between two looks at the store for a stop request while no event flows (a long tool)."""
STOP_TIMEOUT: Final = 5.0
"""Seconds a response that read its run to the end waits for the run to unwind (a handler's own run: to be cut)."""
RETRY_PAUSE: Final = 0.5
"""Seconds the writer waits before it tries again an append the store could not take."""
GIVE_UP_AFTER: Final = 20
"""Appends in a row the store may refuse (`StoreUnavailable`) before the writer gives the journal up (1 once the
adapter is closing): some 10 s of pauses, besides the store's own deadline on each call."""

MAX_DELAYS: Final = 8
"""Delays a replica keeps `Alarms` for (the look's, `max_run_time`, the listeners' keep-alive intervals)."""

MAX_ATTEMPTS: Final = 64
"""Runs one run id may start in one life of a thread (each a journal of its own); the next is refused."""

TERMINAL: Final = frozenset({EventType.RUN_FINISHED, EventType.RUN_ERROR})
RESTATED: Final = frozenset({EventType.MESSAGES_SNAPSHOT})
"""Events the engine makes from what the store holds: bounded by the thread, not by the journal's limits."""


def journal_name(run_id: str, incarnation: str | None, attempt: int = 1) -> str:
    """The store's key for one attempt of a run, in one life of its thread (its incarnation).

    U+001F joins the parts: no id holds a control character (`adapter._limits.id_problem`), so no run id, life
    or attempt can name another's journal.
    """
    name = f"{run_id}\x1f{incarnation or ''}"
    return name if attempt == 1 else f"{name}\x1f{attempt}"


Opener = Callable[[str, JournalEvent], Awaitable[bool]]
"""Writes a journal's first event under the name given (`Journals.begin`); ValueError when that journal exists.

False when it wrote nothing: the run's claim carries the event (`LiveRun.opening`), or the run opens it alone."""


@dataclass(frozen=True, slots=True)
class JournalLimits:
    """How much of a run one journal keeps, and how much a run past its client may take.

    Events, and characters of their wire JSON (the terminal event aside); how long a run may go on
    (`max_run_time`, seconds: then it is stopped and ends `RUN_DEADLINE`); and how many runs one principal may
    leave going without a reader on this replica (`max_detached`: the next is refused, `TOO_MANY_DETACHED_RUNS`).
    """

    max_events: int = DEFAULT_MAX_EVENTS
    max_chars: int = DEFAULT_MAX_CHARS
    max_run_time: float | None = DEFAULT_MAX_RUN_TIME
    max_detached: int = DEFAULT_MAX_DETACHED


@dataclass(frozen=True, slots=True)
class Batch:
    """What a listener gets at once: every event ready for it, and whether the last of them ends the run.

    A run's readers at the same place get the same batch (`LiveRun.batch_after`, `_feed.Feed.batch_after`),
    so what the SSE response makes of it, it makes once for all of them (`_edge._sse.body`). The events are held
    as their wire JSON, numbered from `first` with no gap, as a journal numbers them: a live run's batches are
    slices of its entries, with no object per event.
    """

    texts: Sequence[str]
    """The events' wire JSON, in order."""
    last: bool
    first: int = 0
    """The seq of the first event, the others following it; 0 for events outside the journal (sent without ids)."""
    framed: dict[bool, bytes] = field(default_factory=dict, compare=False, repr=False)
    """The batch's SSE bytes, with ids and without, once made."""

    @classmethod
    def of(cls, events: Sequence[JournalEvent], last: bool) -> Batch:
        """A batch of events read from a journal (numbered with no gap), or of one event outside it (seq 0)."""
        return cls([event.json for event in events], last, events[0].seq if events else 0)

    @property
    def events(self) -> list[JournalEvent]:
        """The events, each with its seq (a Python reader's: `Adapter.run_events`)."""
        return journal_events(self.texts, self.first)


class Listener(Protocol):
    """One reader of a run's events, as `adapter._edge._sse.EventStreamResponse` streams them."""

    ids: bool
    """Whether each event is sent with its `id:` (a journaled run)."""

    @property
    def over(self) -> bool:
        """Nothing is left to send: the run ended, and the reader has its last event."""
        ...

    async def next(self, timeout: float) -> Batch | None:
        """The events ready now, or the next ones within `timeout` seconds; None when none came (a keep-alive)."""
        ...

    async def close(self, *, left: bool) -> None:
        """The reader is done: it read the last event, or (`left`) it went away before."""
        ...


def _error(code: str, message: str) -> RunErrorEvent:
    return RunErrorEvent(message=message, code=code)


INTERNAL: Final = _error(codes.INTERNAL_ERROR, "The run failed with an internal error.")
LEFT: Final = _error(codes.RUN_INTERRUPTED, "The run stopped before it ended: its client left, or its server stopped.")


def over_limit(limits: JournalLimits) -> RunErrorEvent:
    """The terminal event of a run whose journal was full."""
    message = (
        f"The run was stopped: its events passed the journal's limit ({limits.max_events} events,"
        f" {limits.max_chars} characters). Read the thread for what it stored."
    )
    return _error(codes.JOURNAL_LIMIT, message)


class LiveRun:
    """One run as this replica drives it: its events in memory, its listeners, its journal in the store.

    Args:
        key: The run's thread id and run id.
        journal: The run's journal in the store (`journal_name`); the run id when not given.
        incarnation: The life of the thread the run belongs to.
        principal: Who started the run (their detached runs are bounded: `JournalLimits.max_detached`).
        events: The started run's events in runs (lists: `Run.start`), from RUN_STARTED on; closed whatever ends the
            run.
        stop: The run's stop signal, raised by a stop request found in the store; None for a handler's own run,
            which knows no stop signal: stopping it cancels it where it waits.
        store: Where the journal is written; None for a run that is not journaled.
        limits: How much the journal keeps.
        stop_on_leave: The run is stopped once its last listener left before its end (`on_disconnect="stop"`).
        keep: Holds the driver and writer tasks until they are done (the adapter's background set).
        forget: Called once the run is over and its journal written.
        first: The run's first event, already pulled from `events` (and, with a `store`, already in its journal).
        opened: Whether `first` is in the journal; False when the run's claim is to carry it (`opening`).
        reopen: Opens the journal with an append of its own, under the run id's next free attempt: its name
            (`Journals.begin` gives it with `opened=False`).
        alarms: The replica's `Alarms` for a delay (the stop-request look's, `max_run_time`, a keep-alive interval).
    """

    def __init__(
        self,
        key: tuple[str, str],
        events: AsyncIterator[list[BaseEvent]],
        *,
        journal: str | None = None,
        incarnation: str | None = None,
        principal: str | None = None,
        stop: StopSignal | None,
        store: TurnStore | None = None,
        limits: JournalLimits = JournalLimits(),
        stop_on_leave: bool = False,
        keep: Callable[[asyncio.Future[Any]], None] | None = None,
        forget: Callable[[LiveRun], None] | None = None,
        first: BaseEvent | None = None,
        opened: bool = True,
        reopen: Callable[[LiveRun, JournalEvent], Awaitable[str]] | None = None,
        alarms: Callable[[float], Alarms],
    ) -> None:
        self.thread_id, self.run_id = key
        self.journal = journal if journal is not None else self.run_id
        self.incarnation = incarnation
        self.principal = principal
        self.readers = 0
        """The listeners reading the run from memory now (`Tail`), each from its first read: the one that started it,
        reattached ones."""
        self.stop = stop
        self.store = store
        self.limits = limits
        self.stop_on_leave = stop_on_leave
        self.entries: list[str] = []
        """The events' wire JSON, each held once: an entry's seq is its place (the first is 1)."""
        self.chars = 0
        self.complete = False
        """The terminal event is in `entries`: nothing follows it."""
        self.origin: Tail | None = None
        """The listener that started the run."""
        self.typed: deque[BaseEvent] | None = None
        """The event objects, for a Python consumer that started the run (`RunEvents`)."""
        self.driver: asyncio.Task[None] | None = None
        self.failure: BaseException | None = None
        """What the run raised instead of ending (a bug, a tool's `BaseException`): a Python reader gets it raised."""
        self.flushed = 0
        """How many entries the store holds."""
        self._events = events
        self._keep = keep
        self._forget = forget
        self._waiters: dict[asyncio.Future[bool], None] = {}
        """The listeners waiting for an event (`grew`), in the order they came."""
        self.closing = False
        """The adapter is closing: the writer tries once more, then gives the journal up."""
        self._quiet = False
        """A look for a stop request failed, and was logged: the next failures in a row are not."""
        self._unsure: int | None = None
        """The end of the last append whose outcome is unknown (`StoreUnavailable`: it may have landed)."""
        self._wake = asyncio.Event()
        self._ended = asyncio.Event()
        self._batch: tuple[int, Batch] | None = None
        """The last batch handed out, and the seq it follows (`batch_after`)."""
        self._appending = asyncio.Lock()
        """Held by each append, and by a sealed ending until its save is done (`seal`): one at a time, in order."""
        self._sealed: tuple[Sequence[BaseEvent], list[str]] | None = None
        """The ending `seal` handed to the run's last save, encoded, until `unseal`."""
        self._writing = True
        """The writer goes on (False once it wrote the end, or gave the journal up)."""
        self._unopened: list[tuple[BaseEvent, str]] | None = None
        """The events made before the journal exists (`opening`): in no reader's memory, and not written, until then."""
        self._opening = 0
        """How many events the batch `opening` handed out holds."""
        self._reopen = reopen
        self._idle = False
        """Journaled and driven, with no writer task yet: the alarm starts one when there is work (`_look`)."""
        self._alarm: asyncio.TimerHandle | Alarm | None = None
        """While idle: when to start the writer, to append what gathered or to look for a stop request."""
        self._alarms = alarms
        self._gathering = False
        """The alarm is the gather's (`GATHER` after an event not written), not the stop-request look's."""
        self._deadline: Alarm | None = None
        """While driven: when the run passes `max_run_time`."""
        if first is not None and not opened and store is not None:
            self._unopened, first = [(first, event_json(first))], None
        self.first = first
        """The run's first event, pulled (and journaled) before the run was handed over."""
        if first is not None:
            self._append(first)
            self.flushed = 1 if store is not None else 0

    @property
    def journaled(self) -> bool:
        """Whether the run's events go to the store's journal (and are sent with ids)."""
        return self.store is not None

    def start(self) -> None:
        """Start driving the run (and writing its journal), once; never a run dropped unread (`abandon`)."""
        if self.driver is not None or self.complete:
            return
        self.driver = asyncio.ensure_future(self._drive())
        if self.limits.max_run_time is not None:
            self._deadline = self._alarms(self.limits.max_run_time).set(self._past_deadline)
        if self.store is not None:  # the writer starts when there is work (`_look`): a short run ends before it
            self._idle = True  # `_drive` arms the alarm when it first runs, as the writer task started then did
        self.driver.add_done_callback(self._driven)  # one callback, not one per concern: each is a loop handle
        if self._keep is not None:
            self._keep(self.driver)

    def _driven(self, driver: asyncio.Future[None]) -> None:
        """The driver ended: its deadline goes; the writer's work is looked at (journaled), or the run is forgotten."""
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        if self.store is not None:
            self._look()
        elif self._forget is not None:
            self._forget(self)

    def _past_deadline(self) -> None:
        if not self.complete and self.stop is not None:  # a handler's own run lives only as long as its client
            log.warning("run %s passed its deadline (%s s); stopping it", self.run_id, self.limits.max_run_time)
            self.stop.request(reason=codes.RUN_DEADLINE)

    def halt(self, reason: str | None = None) -> None:
        """Ask the run to stop at its next safe point (`reason`: the code it then ends with; None for a person's stop).

        A handler's own run (no stop signal) is cancelled where it waits instead, and its journal ends `LEFT`.
        """
        if self.stop is not None:
            self.stop.request(reason=reason)
            if self.driver is None:  # never read ("stop"): it starts only to end at its first safe point
                self.start()
        elif self.driver is not None and not self.driver.done():
            self.driver.cancel()

    def reader_left(self) -> None:
        """A listener went away before the end: with `stop_on_leave`, a run no one reads any more is stopped."""
        if self.stop_on_leave and self.readers == 0 and not self.complete:
            self.halt(codes.RUN_INTERRUPTED)

    @property
    def detached(self) -> bool:
        """Not ended, and no one reads it (a reattach reads it again).

        Its origin left, or never read: a `RunEvents` dropped unread. With `on_disconnect="continue"` such a run
        goes on; with "stop" it waits, never started, for a reader, a stop (`halt`: it then starts, to end at its
        first safe point) or the adapter's drain (`Journals.wait_over`).
        """
        return not self.complete and self.readers == 0

    def batch_after(self, after: int) -> Batch:
        """The events after seq `after` as one batch: the same object for every reader there, until more come."""
        shared = self._batch
        if shared is not None and shared[0] == after and len(shared[1].texts) == len(self.entries) - after:
            return shared[1]
        batch = Batch(self.entries[after:], self.complete, after + 1)
        self._batch = (after, batch)
        return batch

    def listen(self, after: int = 0) -> Tail:
        """A listener for the events after seq `after`, from memory; it starts the run, if need be, when it reads."""
        return Tail(self, after)

    # The driver: pulls the run's events, numbers them, wakes the listeners.

    async def _drive(self) -> None:
        events = self._events
        self._look()
        try:
            if not await self._pull(events):
                log.error("run %s ended without RUN_FINISHED or RUN_ERROR", self.run_id)
                self._append(INTERNAL)
        except asyncio.CancelledError as cancelled:
            if _stopping():
                self._append(LEFT)  # cut: its server is stopping, or it is a handler's own run whose client left
                raise
            log.error("run %s raised a CancelledError of its own", self.run_id)
            self._fail(cancelled)
        except BaseException as exc:
            log.exception("run %s failed", self.run_id)
            self._fail(exc)
            if isinstance(exc, KeyboardInterrupt | SystemExit):
                raise
        finally:
            await _close(events)

    def _fail(self, exc: BaseException) -> None:
        """The run raised instead of ending: readers get `INTERNAL_ERROR` (a Python reader, `exc` itself)."""
        self.failure = exc
        self._append(INTERNAL)

    async def _pull(self, events: AsyncIterator[list[BaseEvent]]) -> bool:
        """Number and keep each event up to the terminal one; False if the events ran out first.

        The run's events come in runs, each walked in a plain loop: one generator step a run, not one an event.
        """
        limits = self.limits
        async for run in events:
            for event in run:
                if self.complete:  # the ending went to the store with the run's last save, and to its readers (`seal`)
                    if event.type in TERMINAL:
                        return True
                    continue
                # Encoded here, once: a bad event becomes the run's INTERNAL_ERROR, and every reader gets this text.
                text = event_json(event)
                last = event.type in TERMINAL
                counted = not last and event.type not in RESTATED
                if counted and (len(self.entries) >= limits.max_events or self.chars + len(text) > limits.max_chars):
                    log.warning("run %s passed its journal's limit; stopping it", self.run_id)
                    self._append(over_limit(limits))
                    return True
                self._append(event, text)
                if last:
                    return True
        return False

    def _append(self, event: BaseEvent, text: str | None = None) -> None:
        if self.complete:
            return
        text = event_json(event) if text is None else text
        unopened = self._unopened
        if unopened is not None:
            if event.type not in TERMINAL:
                unopened.append((event, text))
                return
            # Ended before it opened its journal (cut, or failed past the run's own handling): its readers get it
            # all now, and the writer appends it from seq 1.
            self._unopened = None
            for held, held_text in unopened:
                self._append(held, held_text)
        self.entries.append(text)
        if event.type not in RESTATED:
            self.chars += len(text)
        if event.type in TERMINAL:
            self.complete = True
            self._ended.set()
        if self.typed is not None:
            self.typed.append(event)
        waiters = self._waiters
        if waiters:
            self._waiters = {}
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(True)
        self._wake.set()
        if self._idle and (self.complete or not self._gathering) and not self._appending.locked():
            self._look()  # a save that holds the lock looks when it is done (`unseal`, `opened`, `open_alone`)

    async def seal(self, ending: Sequence[BaseEvent]) -> JournalAppend | None:
        """The journal's last batch, for the run's last save to store in the same call (`save_and_append`).

        `ending` is what the run sends once that save is done, up to its terminal event: the batch holds the events
        not appended yet, then `ending`, numbered next. The writer appends nothing until `unseal`, and the
        ending reaches no reader before it (as when the save came first, then the events): no one hears of a turn,
        finished or waiting, that the store does not hold. None when the ending cannot go with the save: the run is
        not journaled, its store cannot write both in one call (no `save_and_append`), an append's outcome is
        unknown, the writer gave the journal up, or the ending would pass the journal's limits (the run then saves
        first and sends its ending after, as any event).
        """
        if self.store is None or self.complete or not self._writing or self._unsure is not None:
            return None
        if self._unopened is not None:  # its claim never carried the opening: the journal opens first
            return None
        if not callable(getattr(self.store, "save_and_append", None)):
            return None  # two calls either way: the save first, and the writer appends (and retries) the rest
        texts = [event_json(event) for event in ending]
        if self._past_limits(ending, texts):
            return None
        await self._appending.acquire()  # an append under way ends first: the batch goes on from it
        start = self.flushed
        if self._unsure is not None or not self._writing or len(self.entries) - start + len(texts) > MAX_BATCH:
            self._appending.release()
            return None
        self._sealed = (ending, texts)
        return JournalAppend(self.journal, JournalBatch([*self.entries[start:], *texts], start + 1), ended=True)

    def unseal(self, stored: bool | None) -> None:
        """The run's last save is done: its batch `stored` (True: the ending goes to the readers now), or not.

        False: the store took nothing, and the writer appends the events as they come. None: its outcome is unknown
        (the store could not be reached); the writer's next append finds out (`_recover`).
        """
        sealed, self._sealed = self._sealed, None
        if sealed is None:
            return
        ending, texts = sealed
        if stored:
            for event, text in zip(ending, texts, strict=True):
                self._append(event, text)
            self.flushed = len(self.entries)
        elif stored is None:
            self._unsure = len(self.entries) + len(texts)
        self._appending.release()
        self._look()

    async def opening(self) -> JournalAppend | None:
        """The journal's first batch, for the resume's claim to store in the same call (`save_and_append`).

        The events the run made before its claim (RUN_STARTED, a restatement of the thread), numbered from 1: they
        reach no reader, and the writer appends nothing, until `opened`. None when the journal is open already.
        """
        if self._unopened is None:
            return None
        await self._appending.acquire()
        if self._unopened is None:
            self._appending.release()
            return None
        self._opening = len(self._unopened)
        return JournalAppend(self.journal, JournalBatch([text for _, text in self._unopened], 1))

    def opened(self, stored: bool | None) -> None:
        """The claim that carried `opening`'s batch is done: stored (True: its events go to the readers now), or not.

        False or None: the journal is still to open, with an append of its own (`open_alone`).
        """
        handed, self._opening = self._opening, 0
        if not handed:
            return
        if stored:
            if self._unopened is not None:
                self._release(self._unopened)
            self.flushed = max(self.flushed, handed)  # the run may have been cut meanwhile: its end follows
        elif stored is None:
            self._unsure = handed  # the writer's append from seq 1, if refused, finds out whether it landed
        self._appending.release()
        self._look()

    async def open_alone(self) -> None:
        """Open the journal with an append of its own (the run claims nothing, or its claim was refused).

        Its first event goes under the run id's next free attempt (a run id used again: `Journals.begin`); the
        events held since then follow it to the readers, and the writer appends them.
        """
        unopened = self._unopened
        if unopened is None or self._reopen is None:
            return
        async with self._appending:
            try:
                self.journal = await self._reopen(self, JournalEvent(1, unopened[0][1]))
                self.flushed, self._unsure = 1, None
            except Exception as exc:  # the store is down: the writer appends it all from seq 1, and tries again
                log.warning("run %s: its journal could not be opened (%s); the writer tries again", self.run_id, exc)
            self._release(unopened)
        self._look()

    def _release(self, unopened: list[tuple[BaseEvent, str]]) -> None:
        self._unopened = None
        for event, text in unopened:
            self._append(event, text)

    def _past_limits(self, ending: Sequence[BaseEvent], texts: Sequence[str]) -> bool:
        """Whether `_pull` would stop the run at one of these events (the journal's limits, as it counts them)."""
        count, chars = len(self.entries), self.chars
        for event, text in zip(ending, texts, strict=True):
            restated = event.type in RESTATED
            if not restated and event.type not in TERMINAL:
                if count >= self.limits.max_events or chars + len(text) > self.limits.max_chars:
                    return True
            count += 1
            chars += 0 if restated else len(text)
        return False

    async def grew(self, timeout: float) -> None:
        """Wait until an event is added, or `timeout` seconds."""
        waiter: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._waiters[waiter] = None
        keepalive = self._alarms(timeout).set(functools.partial(_no_event, waiter))  # the replica's: not a timer
        try:
            await waiter
        finally:
            self._waiters.pop(waiter, None)
            keepalive.cancel()

    async def finished(self) -> None:
        """Wait for the driver to end (the run's events closed), at most `STOP_TIMEOUT` seconds, then cancel it.

        Shielded: a response cancelled from outside still lets its run unwind.
        """
        driver = self.driver
        if driver is None:
            return
        if not driver.done():  # most often it is: the run unwound as its last events went out
            with anyio.move_on_after(STOP_TIMEOUT, shield=True):
                await asyncio.wait({driver})
        if not driver.done():
            log.warning("run %s did not unwind within %s s; cancelling it", self.run_id, STOP_TIMEOUT)
            driver.cancel()
        elif not self.complete:  # cancelled before it ever ran: nothing of the run did
            self._append(LEFT)
            await _close(self._events)

    async def abandon(self) -> None:
        """Drop a run never read (`on_disconnect="stop"`): nothing of it ran past RUN_STARTED, and nothing will.

        Its journal ends `LEFT` (`RUN_INTERRUPTED`), here and in the store (one try: a journal the store did not
        take ends for its readers elsewhere as a dead run's does), so no reader waits for a run that will not come.
        Once: its events read afterwards end there, and closing them drops nothing more.
        """
        if self.complete:
            return
        self._append(LEFT)
        if self.store is not None:
            try:
                if not await self._flush(self.store):
                    log.warning("run %s: the store did not take the end of its unread run's journal", self.run_id)
            except Exception:
                log.exception("run %s: the end of its unread run's journal could not be written", self.run_id)
        if self._forget is not None:
            self._forget(self)
        await _close(self._events)

    # The writer: appends what is ready to the store, and learns of stop requests. It is a task started when there
    # is work: an event not written `GATHER` after it came, the run ended with events not written, or the run quiet
    # for `POLL_INTERVAL` (a stop request to look for). Until then one alarm stands for it; a run that ends within
    # its first batch (the ending sealed with its last save) never starts it.

    def _look(self) -> None:
        """Idle, with no save holding the journal: start the writer, arm the alarm for it, or let the run go."""
        if not self._idle or self._appending.locked():
            return
        if self.flushed < len(self.entries):
            if self.complete:  # the ending is not written: at once, as the writer it would have been
                self._start_writer(gathered=True)
            elif not self._gathering:
                self._gathering = True
                self._arm(GATHER)
        elif self.complete:
            if self.driver is not None and self.driver.done():  # all written, and nothing more will come
                self._idle = False
                self._disarm()
                self._writing = False
                if self._forget is not None:
                    self._forget(self)
        elif self._alarm is None:
            self._arm(POLL_INTERVAL)

    def _arm(self, delay: float) -> None:
        self._disarm()
        if delay == GATHER:  # short: queued cancelled, it would ring for nothing a loop turn later; a timer goes
            self._alarm = asyncio.get_running_loop().call_later(delay, self._due)
        else:
            self._alarm = self._alarms(delay).set(self._due)

    def _disarm(self) -> None:
        alarm, self._alarm = self._alarm, None
        if alarm is not None:
            alarm.cancel()

    def _due(self) -> None:
        """The alarm: events gathered (append them), or the run was quiet for `POLL_INTERVAL` (look for a stop)."""
        self._alarm = None
        gathered, self._gathering = self._gathering, False
        if not self._idle or self._appending.locked():
            return  # the save that holds the journal carries its events; it looks again when done
        if self.flushed < len(self.entries):
            self._start_writer(gathered=True)
        elif self.complete:
            self._look()
        elif gathered:  # a claim carried them: quiet from now on
            self._arm(POLL_INTERVAL)
        else:
            self._start_writer(poll=True)

    def _start_writer(self, *, gathered: bool = False, poll: bool = False) -> None:
        self._idle = False
        self._gathering = False
        self._disarm()
        writer = asyncio.ensure_future(self._write(gathered=gathered, poll=poll))
        if self._keep is not None:
            self._keep(writer)

    async def _write(self, *, gathered: bool = False, poll: bool = False) -> None:
        """Append the entries as they come, in batches, until the terminal one is written (or the journal is lost).

        `gathered`: its first batch gathered already (the alarm waited `GATHER`); `poll`: it looks for a stop request
        first (the run was quiet for `POLL_INTERVAL`).
        """
        assert self.store is not None
        failures = 0
        clock = asyncio.get_running_loop().time
        began = float("-inf")
        try:
            if poll:
                await self._poll()
            while not (self.complete and self.flushed == len(self.entries)):
                await self._ready()
                if not gathered and not self.complete and len(self.entries) - self.flushed < MAX_BATCH:
                    with contextlib.suppress(TimeoutError):  # a burst gathers; appends start FLUSH_INTERVAL apart
                        wait = max(GATHER, began + FLUSH_INTERVAL - clock())
                        async with asyncio.timeout(wait):  # not `wait_for`: it starts a task per wait
                            await self._ended.wait()
                gathered = False
                began = clock()
                flushed = await self._flush(self.store)
                if flushed is None:
                    return
                failures = 0 if flushed else failures + 1
                if failures >= (1 if self.closing else GIVE_UP_AFTER):
                    log.error("run %s: the store took none of its journal's last appends; giving it up", self.run_id)
                    return
                if not flushed:
                    await asyncio.sleep(RETRY_PAUSE)
        except Exception:
            log.exception("run %s: its journal could not be written", self.run_id)
        finally:
            self._writing = False
            if self.driver is not None:
                await asyncio.wait({self.driver})  # reattachers here read memory until the run is over
            if self._forget is not None:
                self._forget(self)

    async def _ready(self) -> None:
        """Return once entries wait to be written; meanwhile look for a stop request every `POLL_INTERVAL`."""
        while self.flushed == len(self.entries) and not self.complete:
            self._wake.clear()
            try:
                async with asyncio.timeout(POLL_INTERVAL):
                    await self._wake.wait()
            except TimeoutError:
                await self._poll()

    async def _poll(self) -> None:
        assert self.store is not None
        try:
            journal = await self.store.read_events(self.thread_id, self.journal, limit=0)
        except Exception as exc:  # a failed look is tried again at the next interval
            if not self._quiet:
                log.warning("run %s: could not look for a stop request: %s", self.run_id, exc)
            self._quiet = True
            return
        self._quiet = False
        if journal is None and self.flushed > 0:
            log.info("run %s: its journal is gone (its thread was deleted); stopping it", self.run_id)
            self.halt()
        elif journal is not None and journal.stop_requested:
            self.halt()

    async def _flush(self, store: TurnStore) -> bool | None:
        """Append what is ready: True once written, False to try again, None when the journal is lost."""
        async with self._appending:
            return await self._append_ready(store)

    async def _append_ready(self, store: TurnStore) -> bool | None:
        start = self.flushed
        if start == len(self.entries):
            return True  # a sealed ending took them, with the run's last save
        batch = JournalBatch(self.entries[start : start + MAX_BATCH], start + 1)
        ended = self.complete and start + len(batch) == len(self.entries)
        try:
            stop = await store.append_events(self.thread_id, self.journal, batch, ended=ended)
        except StoreUnavailable as down:
            log.warning("run %s: the store may not have taken journal events (%s); trying again", self.run_id, down)
            self._unsure = start + len(batch)
            return False
        except ValueError:
            return await self._recover(store, start + len(batch))
        self.flushed, self._unsure = start + len(batch), None
        if stop:
            self.halt()
        return True

    async def _recover(self, store: TurnStore, wanted: int) -> bool | None:
        """An append was refused: an earlier one that seemed to fail had landed, or the journal is not this run's."""
        try:
            journal = await store.read_events(self.thread_id, self.journal, limit=0)
        except Exception:
            return False
        if journal is not None and self._unsure is not None and journal.last_seq == self._unsure:
            # The append that seemed to fail had landed, whole (appends are atomic): go on after it.
            self.flushed, self._unsure = journal.last_seq, None
            return None if journal.ended and journal.last_seq != wanted else True
        if journal is None:
            log.info("run %s: its journal is gone (its thread was deleted); stopping it", self.run_id)
            self.halt()
        else:
            log.warning("run %s: its run id's journal is another run's; it is no longer written", self.run_id)
        return None


class Tail:
    """A listener on a live run: its events after seq `after`, from memory, then as they come.

    It counts as one of the run's readers (`LiveRun.readers`) from its first read until it closes, the run's
    origin too (`RunEvents`): a reader that never reads (a `run_events` iterator nobody iterates, a `RunEvents`
    dropped unread) holds nothing, so with `on_disconnect="stop"` it cannot keep a run going that no one reads, nor
    start it, and it does not keep a run no one reads from counting as detached.
    """

    def __init__(self, live: LiveRun, after: int) -> None:
        self.live = live
        self.cursor = max(after, 0)
        self.ids = live.journaled
        self._reading = False
        self._closed = False

    def read(self) -> None:
        """Count as a reader, once, until closed; a run not started yet (`on_disconnect="stop"`) starts now."""
        if not self._reading and not self._closed:
            self._reading = True
            self.live.readers += 1
            self.live.start()

    @property
    def over(self) -> bool:
        """Nothing is left to send: the run ended, and this reader has its last event."""
        return self.live.complete and self.cursor >= len(self.live.entries)

    async def next(self, timeout: float) -> Batch | None:
        """The events ready now, or the next ones within `timeout`; None when none came."""
        self.read()
        live = self.live
        if self.cursor >= len(live.entries):
            if live.complete:
                return Batch((), True)
            await live.grew(timeout)
            if self.cursor >= len(live.entries):
                return None
        batch = live.batch_after(self.cursor)
        self.cursor = len(live.entries)
        return batch

    async def close(self, *, left: bool) -> None:
        """Detach (`left`: before the end, which may stop the run); the run's origin waits for it to unwind."""
        live = self.live
        read, self._reading, self._closed = self._reading, False, True
        if read:
            live.readers -= 1
            if left:
                live.reader_left()
        if self is not live.origin:
            return
        live.origin = None
        if not left or live.stop is None:  # a handler's own run is cut now: it unwinds before its response ends
            await live.finished()


class RunEvents:
    """The events of a run this replica drives, as objects: what `Adapter.start` returns to a Python caller.

    Iterate it for the run's events, from RUN_STARTED to the terminal event; close it (`aclose`) to leave
    early, which stops the run with `on_disconnect="stop"` and leaves it running otherwise. It counts as the run's
    reader from its first read (`Tail`): dropped unread, with "continue" the run goes on to its end and counts as
    detached (`max_detached`); with "stop" nothing of it runs, it counts as detached until a reader comes, and the
    adapter's drain drops it at once, its journal ended `RUN_INTERRUPTED` (`LiveRun.abandon`).

    It is the run's origin, beside `Tail` rather than one reader type with it: every other reader (`Tail`, and
    `adapter._sessions._feed.StoreTail` elsewhere) reads the journal, numbered wire JSON, through `Listener`; the origin
    alone may read the event objects themselves (`LiveRun.typed`, kept only while it does: no JSON parsed again),
    gets the run's own exception raised rather than `INTERNAL_ERROR`, and chooses once between the objects and
    the frames (`frames`, its own `Tail`, for the HTTP edge). It keeps that `Tail`'s cursor in step with the
    objects it hands out, so the run counts it as one reader either way.
    """

    def __init__(self, live: LiveRun) -> None:
        self.live = live
        live.typed = deque([live.first] if live.first is not None else [])
        self._tail = Tail(live, 0)
        live.origin = self._tail
        self._done = False

    @property
    def journaled(self) -> bool:
        """Whether the run is journaled: its events carry ids and can be read again (`Adapter.run_events`)."""
        return self.live.journaled

    def frames(self) -> Tail:
        """The same run, as the wire JSON of its events, for the HTTP edge: the objects are no longer kept.

        The edge reads the frames from now on: this is the origin's first read.
        """
        self.live.typed = None
        self._tail.read()
        return self._tail

    def __aiter__(self) -> RunEvents:
        return self

    async def __anext__(self) -> BaseEvent:
        live = self.live
        typed = live.typed
        if self._done or typed is None:
            raise StopAsyncIteration
        self._tail.read()
        while not typed:
            if live.complete:
                await self.aclose()
                raise StopAsyncIteration
            await live.grew(3600.0)
        event = typed.popleft()
        self._tail.cursor += 1
        if event is INTERNAL and live.failure is not None:  # raised to the caller, as if it ran the run itself
            await self.aclose()
            raise live.failure
        if event.type in TERMINAL and not typed:
            self._tail.cursor = len(live.entries)
        return event

    async def aclose(self) -> None:
        """Leave: with `on_disconnect="stop"` the run is stopped (unless another reads it); otherwise it goes on."""
        if self._done:
            return
        self._done = True
        live = self.live
        typed, live.typed = live.typed, None  # the objects are kept no longer: nobody reads them
        if live.driver is None:  # never read with `on_disconnect="stop"`: nothing ran, and nothing will
            await live.abandon()
            return
        await self._tail.close(left=not live.complete or bool(typed))


class Journals:
    """The runs this replica drives, by thread and run id, and how it journals them.

    Args:
        store: The adapter's store; a store without journals (one written before them) journals nothing.
        limits: How much one run's journal keeps.
        stop_on_leave: `on_disconnect="stop"`: a run is stopped once its last reader left before its end.
        keep: Holds the runs' tasks until they are done (the adapter's background set).
    """

    def __init__(
        self,
        store: TurnStore,
        *,
        limits: JournalLimits = JournalLimits(),
        stop_on_leave: bool = False,
        keep: Callable[[asyncio.Future[Any]], None] | None = None,
    ) -> None:
        self.store: TurnStore | None = store if keeps_journals(store) else None
        self.limits = limits
        self.stop_on_leave = stop_on_leave
        self._keep = keep
        self._live: dict[tuple[str, str], LiveRun] = {}
        self._runs: set[LiveRun] = set()
        self._over = asyncio.Event()
        """Set when a run is forgotten: `wait_over` looks again."""
        self._alarms: dict[float, Alarms] = {}
        """The runs' alarms, one queue (and one loop timer) for each delay (`Alarms`)."""

    async def begin(
        self,
        thread_id: str,
        run_id: str,
        events: AsyncIterator[list[BaseEvent]],
        stop: StopSignal,
        *,
        incarnation: str | None = None,
        principal: str | None = None,
        opens: Opener | None = None,
        binds: Callable[[LiveRun], None] | None = None,
    ) -> RunEvents:
        """Drive a started run of the thread's life `incarnation`: journaled and fanned out.

        Its events come in runs (`Run.start`), the first RUN_STARTED alone. That event, which comes before any of its
        work, is written to the store before the run is read (by `opens` when given; for a run that created its
        thread, the store call that did wrote it, and `opens` says so), so the journal exists on every replica before
        any client could ask for it. `binds` is given the `LiveRun` before it is driven:
        the run's last save then carries the journal's last batch (`LiveRun.seal`). A run id used
        before in this life starts the next attempt, in a journal of its own (`journal_name`), found in the
        same calls. With `on_disconnect="continue"` the run goes on now, whoever listens; with "stop", from its
        first reading, and it is stopped once its last reader left.

        Raises:
            StoreUnavailable: The store could not take the first event; the run's events are closed.
            InputRejected: 409 `RUN_ID_REUSED` when the run id started `MAX_ATTEMPTS` runs in this life already;
                the run's events are closed, and nothing of it ran.
        """
        head = await anext(aiter(events), None)
        first = head[0] if head else None  # RUN_STARTED, a run of its own (`Run.start`)
        if head is not None and len(head) > 1:  # what came with it goes on next, not lost
            events = _after(head[1:], events)
        journal: str | None = None
        opened = True
        if first is not None and self.store is not None:
            try:
                opener = opens or _appender(self.store, thread_id)
                journal, opened = await self._open(opener, thread_id, run_id, incarnation, event_json(first))
            except BaseException:
                await _close(events)
                raise
        live = LiveRun(
            (thread_id, run_id),
            events,
            journal=journal,
            incarnation=incarnation,
            principal=principal,
            stop=stop,
            store=self.store if journal is not None else None,
            limits=self.limits,
            stop_on_leave=self.stop_on_leave,
            keep=self._keep,
            forget=self._forget,
            first=first,
            opened=opened,
            reopen=self._reopen,
            alarms=self.alarms,
        )
        if journal is not None:
            self._live[(thread_id, journal)] = live
            if binds is not None:
                binds(live)
        self._runs.add(live)
        run = RunEvents(live)
        if not self.stop_on_leave:
            live.start()
        return run

    def first_name(self, run_id: str, incarnation: str | None) -> str | None:
        """The journal the run id opens first in that life of its thread; None when this adapter journals nothing.

        A run that creates its thread stores its RUN_STARTED there in the same call (`Run.start`): the life is new,
        so no attempt of the run id is taken in it, and `_open` finds the first one written (its `opens` says so).
        """
        return journal_name(run_id, incarnation) if self.store is not None else None

    def alarms(self, delay: float) -> Alarms:
        """The replica's alarms of this delay, for every run it drives."""
        alarms = self._alarms.get(delay)
        if alarms is None:
            alarms = Alarms(delay)
            if len(self._alarms) < MAX_DELAYS:  # a caller that varies its timeouts gets alarms of their own
                self._alarms[delay] = alarms
        return alarms

    async def _open(
        self, opens: Opener, thread_id: str, run_id: str, incarnation: str | None, first: str
    ) -> tuple[str, bool]:
        """Create the journal of the run id's next attempt in this life, with its first event; its name.

        And whether the opener wrote it: when not, the name is the next attempt this replica does not drive, and
        the run's claim or `_reopen` writes the event (and finds out whether the attempt is free).
        """
        for attempt in range(1, MAX_ATTEMPTS + 1):
            name = journal_name(run_id, incarnation, attempt)
            if (thread_id, name) in self._live:
                continue
            try:
                opened = await opens(name, JournalEvent(1, first))
            except ValueError:  # that attempt's journal exists: a run id used again
                continue
            if attempt > 1:
                log.info("run %s of thread %s: its id was used before; attempt %d", run_id, thread_id, attempt)
            return name, opened
        raise InputRejected(
            409, codes.RUN_ID_REUSED, f"This run id started {MAX_ATTEMPTS} runs of this thread already; use a new one."
        )

    async def _reopen(self, live: LiveRun, first: JournalEvent) -> str:
        """Open a live run's journal with an append of its own (`LiveRun.open_alone`): its name, now the attempt's."""
        assert self.store is not None  # a run whose opening was put off is journaled
        key = (live.thread_id, live.journal)
        if self._live.get(key) is live:
            del self._live[key]  # the attempt it was to take may be free: the loop tries it again
        name = live.journal
        try:
            name, _ = await self._open(
                _appender(self.store, live.thread_id), live.thread_id, live.run_id, live.incarnation, first.json
            )
        finally:
            self._live[(live.thread_id, name)] = live
        return name

    async def latest(self, thread_id: str, run_id: str, incarnation: str | None) -> str | None:
        """The journal of the run id's latest attempt in this life of the thread, or None for none."""
        found = None
        for attempt in range(1, MAX_ATTEMPTS + 1):
            name = journal_name(run_id, incarnation, attempt)
            if (thread_id, name) not in self._live:
                journal = await self.store.read_events(thread_id, name, limit=0) if self.store is not None else None
                if journal is None:
                    break
            found = name
        return found

    def check_detached(self, principal: str | None) -> None:
        """Refuse a new run to a principal who left `max_detached` runs going on this replica without a reader.

        Raises:
            LimitExceeded: 429 `TOO_MANY_DETACHED_RUNS`; nothing was run or stored.
        """
        held = sum(1 for live in self._runs if live.principal == principal and live.detached)
        if held >= self.limits.max_detached:
            message = (
                f"{held} runs of this caller go on without a reader (at most {self.limits.max_detached}): reattach"
                " to one, stop one, or wait for one to end before starting another."
            )
            raise LimitExceeded(message, code=codes.TOO_MANY_DETACHED_RUNS, status_code=429)

    def live(self, thread_id: str, journal: str) -> LiveRun | None:
        """The journaled run with this journal (`journal_name`), while this replica drives it or writes its journal."""
        return self._live.get((thread_id, journal))

    def of_thread(self, thread_id: str, incarnation: str | None) -> list[LiveRun]:
        """The runs of one life of a thread that this replica drives."""
        return [live for live in self._runs if live.thread_id == thread_id and live.incarnation == incarnation]

    async def stop_all(self) -> None:
        """Ask every run this replica drives to stop (the adapter is closing); drop those never read."""
        for live in list(self._runs):
            live.closing = True
            if live.driver is None:
                await live.abandon()
            else:
                live.halt()

    @property
    def running(self) -> int:
        """How many runs this replica drives now."""
        return len(self._runs)

    async def wait_over(self, timeout: float) -> bool:
        """Wait until no run is left that this replica drives, at most `timeout` seconds; whether none is.

        A run never read with `on_disconnect="stop"` is not waited for: nothing of it runs until a reader comes. Once
        no other is left, it is dropped (`LiveRun.abandon`): a drain does not wait out its grace for it.
        """
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                while any(live.driver is not None for live in self._runs):
                    await self._over.wait()
                    self._over.clear()
        if all(live.driver is None for live in self._runs):
            for live in list(self._runs):
                await live.abandon()
        return not self._runs

    def cut_all(self) -> int:
        """Cancel the driver of every run this replica drives (the adapter is closing and they did not stop).

        Each cut run's journal ends with `RUN_ERROR` `RUN_INTERRUPTED` (`LEFT`). How many were cut.
        """
        cut = 0
        for live in list(self._runs):
            driver = live.driver
            if driver is not None and not driver.done():
                driver.cancel()
                cut += 1
        return cut

    def _forget(self, live: LiveRun) -> None:
        self._runs.discard(live)
        if self._live.get((live.thread_id, live.journal)) is live:
            del self._live[(live.thread_id, live.journal)]
        self._over.set()


def _no_event(waiter: asyncio.Future[bool]) -> None:
    """A listener's wait is over with no event (`LiveRun.grew`): it sends a keep-alive."""
    if not waiter.done():
        waiter.set_result(False)


def _appender(store: TurnStore, thread_id: str) -> Opener:
    """The plain opening of a journal: its first event appended, in a store call of its own."""

    async def append(journal: str, first: JournalEvent) -> bool:
        await store.append_events(thread_id, journal, [first])
        return True

    return append


def _stopping() -> bool:
    # Only `halt` on a handler's own run, `finished` or the adapter closing cancel the driver; any other
    # CancelledError is the run's own.
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


async def _after(run: list[BaseEvent], events: AsyncIterator[list[BaseEvent]]) -> AsyncGenerator[list[BaseEvent], None]:
    """`run`, then the rest of `events`; closing it closes them."""
    try:
        yield run
        async for rest in events:
            yield rest
    finally:
        await _close(events)


async def _close(events: AsyncIterator[list[BaseEvent]]) -> None:
    # Closing runs the run's `finally` blocks now, in the task that iterated it, not at GC time.
    aclose: Callable[[], Any] | None = getattr(events, "aclose", None)
    if aclose is None:
        return
    try:
        await aclose()
    except Exception:
        log.exception("closing the events of a run failed")
