"""Reattaching to a run, and stopping one: who may, and where the run's events come from.

    the run is live on this replica   its events from memory (`adapter._sessions._journal.Tail`), then as they come
    it is live elsewhere, or ended    the store's journal, read once per look for all its readers here
                                      (`adapter._sessions._feed`: woken by PostgreSQL's notifications, polled elsewhere)

Only a principal who may "read" the thread may reattach, and only one who may "run" on it may stop a run;
to any other, and for an unknown thread or run, the answer is the same (None: a 404). A run is found in the
life the thread has now (`adapter._sessions._journal.journal_name`): the runs of a deleted thread, live or stored, are
found by no one, not even by whoever owns a thread created again under its id. A run id used more than once in
one life names its latest attempt.

A reattach lands on the replica that runs the run most of the time (sticky sessions), and is then served from
memory with no store call at all. Elsewhere the replica follows the run's journal in the store once, however many
of its readers follow it (`adapter._sessions._feed.Feeds`).

A run whose replica died never ends its journal: the feed takes it as over by the crash-takeover rules, and its
readers get one `RUN_ERROR` `RUN_INTERRUPTED`, sent without an `id:` (`adapter._sessions._feed`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from adapter import _errors as codes
from adapter._errors import Forbidden
from adapter._limits import id_problem
from adapter._run._config import EngineConfig
from adapter._sessions._feed import Feeds, StoreTail
from adapter._sessions._journal import Journals, Listener
from adapter.stores import JournalEvent, ThreadHead


async def open_events(
    config: EngineConfig,
    journals: Journals,
    feeds: Feeds,
    thread_id: str,
    run_id: str,
    principal: str | None,
    after: int,
) -> Listener | None:
    """A listener for the run's events after seq `after`; None for an unknown thread or run, or a refused caller.

    Raises:
        StoreUnavailable: The store could not be read.
    """
    found = await _latest_attempt(config, journals, thread_id, run_id, principal)
    if found is None:
        return None
    head, name = found
    live = journals.live(thread_id, name)
    if live is not None:
        return live.listen(after)
    store = journals.store
    journal = await store.read_events(thread_id, name, after=after, limit=0) if store is not None else None
    if store is None or journal is None:
        return None
    over = journal.ended and after >= journal.last_seq
    return StoreTail(feeds, (thread_id, run_id, name), head.incarnation, after, over=over)


async def journal_events(listener: Listener) -> AsyncIterator[JournalEvent]:
    """The events a listener gets, one by one, until the run's end (`Adapter.run_events`).

    Closed before the end, the listener has left: with `on_disconnect="stop"`, a run no one reads any more stops.
    """
    left = True
    try:
        while True:
            batch = await listener.next(3600.0)
            if batch is None:
                continue
            for event in batch.events:
                yield event
            if batch.last:
                left = False
                break
    finally:
        await listener.close(left=left)


async def stop_run(
    config: EngineConfig, journals: Journals, thread_id: str, run_id: str, principal: str | None
) -> bool | None:
    """Ask the run to stop, wherever it runs: True once asked, False when it had ended, None as `open_events`.

    A run that reaches its end before it comes to a safe point ends as it would have (its answer was complete).

    Raises:
        Forbidden: `THREAD_FORBIDDEN` for a caller who may read the thread but not "run" on it.
        StoreUnavailable: The store could not be used.
    """
    found = await _latest_attempt(config, journals, thread_id, run_id, principal, action="run")
    if found is None:
        return None
    _, name = found
    live = journals.live(thread_id, name)
    if live is not None:  # this replica runs it: at once, not at the writer's next look
        if live.complete:
            return False
        live.halt()
        return True
    store = journals.store
    if store is not None and await store.request_stop(thread_id, name):
        return True
    journal = await store.read_events(thread_id, name, limit=0) if store is not None else None
    return None if journal is None else False


async def _latest_attempt(
    config: EngineConfig, journals: Journals, thread_id: str, run_id: str, principal: str | None, action: str = "read"
) -> tuple[ThreadHead, str] | None:
    """The thread's head and the journal of the run id's latest attempt in its life, if `principal` may read it.

    None for an unknown thread or run, and for a caller who may not read the thread. With `action="run"`,
    `Forbidden` for a caller who may read the thread but not run on it.
    """
    if id_problem(thread_id) is not None or id_problem(run_id) is not None:
        return None  # ids no store can keep name no run; the store is not asked
    stored = await config.store.load(thread_id, since=None)
    if stored is None or not await config.access.allows(principal, stored.head.owner, "read"):
        return None
    if action == "run" and not await config.access.allows(principal, stored.head.owner, "run"):
        raise Forbidden("this caller may not stop runs of this thread", code=codes.THREAD_FORBIDDEN)
    name = await journals.latest(thread_id, run_id, stored.head.incarnation)
    return None if name is None else (stored.head, name)
