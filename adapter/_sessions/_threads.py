"""Threads as a resource: a principal's threads listed newest first, their titles, renaming and deleting them.

    list     GET /threads, Adapter.threads          the caller's own threads (owner = the principal), paged
    rename   PATCH /threads/{id}, rename_thread     "run" on the thread (the owner by default)
    delete   DELETE /threads/{id}, delete_thread    "run" on the thread; its messages, open turn and journals go

A caller the policy does not let "read" a thread gets the answer an unknown thread gets (False, a 404),
having read only the thread's owner. A thread is titled by the start of its first user message when its
first run stores it (`default_title`); a rename replaces that, and never fails a run in progress
(`adapter._thread._handle` lets a save pass over a conflict that only a rename made).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any, Final

from adapter import _errors as codes
from adapter._errors import Forbidden, InvalidPage, ThreadConflict
from adapter._limits import check_id
from adapter._run._config import EngineConfig
from adapter._sessions._journal import Journals
from adapter._thread._record import OpenTurn, check_title
from adapter._types import wire_json
from adapter.stores import StoreConflict, ThreadChange, ThreadSummary

log = logging.getLogger("adapter.threads")

DEFAULT_THREADS: Final = 20
"""Threads one page of a listing holds unless told otherwise."""
MAX_THREADS: Final = 100
"""Threads one page of a listing may hold."""
_RENAME_ATTEMPTS: Final = 3


async def list_threads(
    config: EngineConfig, principal: str | None, *, before: str | None = None, limit: int = DEFAULT_THREADS
) -> dict[str, Any]:
    """The principal's threads (an anonymous caller's: the unowned ones), newest first, and the next page's cursor.

    Each thread comes with its title, its last update and its open interrupts: what a page needs to list
    the threads and draw a waiting approval again, in one read.

    Raises:
        ValueError: `limit` is not from 1 to 100.
        AdapterError: INVALID_PAGE for a `before` that is not a cursor a listing returned.
    """
    if not 1 <= limit <= MAX_THREADS:
        raise ValueError(f"a page holds 1 to {MAX_THREADS} threads, not {limit}")
    try:
        found, following = await config.store.list_threads(principal, before=before, limit=limit)
    except ValueError:
        raise InvalidPage("before is not a cursor a listing returned") from None
    shown = [summary for summary in found if await config.access.allows(principal, summary.owner, "read")]
    return {"threads": [_listed(summary) for summary in shown], "next": following}


def _listed(summary: ThreadSummary) -> dict[str, Any]:
    turn = OpenTurn.model_validate(summary.open_turn) if summary.open_turn is not None else None
    return {
        "threadId": summary.thread_id,
        "title": summary.title,
        "updatedAt": iso_time(summary.updated_at),
        "interrupts": [wire_json(call.interrupt()) for call in turn.pending] if turn is not None else [],
    }


def iso_time(moment: datetime) -> str:
    """A time as the wire carries it: ISO 8601 in UTC, to the millisecond, with `Z`."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


async def rename_thread(config: EngineConfig, thread_id: str, title: object, principal: str | None) -> bool:
    """Set the thread's title (None clears it); False for an unknown thread, or one `principal` may not read.

    Raises:
        LimitExceeded: 422 `INVALID_ID` or `INVALID_TITLE`, before the store is asked.
        Forbidden: `THREAD_FORBIDDEN` for a caller who may read the thread but not "run" on it.
        AdapterError: `THREAD_CONFLICT` when the thread kept changing meanwhile.
    """
    check_id(thread_id, "/threadId")
    checked = check_title(title)
    for _ in range(_RENAME_ATTEMPTS):
        stored = await config.store.load(thread_id, since=None)
        if stored is None or not await _may(config, principal, stored.head.owner):
            return False
        try:
            await config.store.save(
                thread_id,
                ThreadChange(title=checked),
                expected_version=stored.head.version,
                incarnation=stored.head.incarnation,
            )
        except StoreConflict:
            continue  # a run saved meanwhile: read the new version and rename that
        return True
    raise ThreadConflict("the thread kept changing; try the rename again")


async def delete_thread(config: EngineConfig, journals: Journals, thread_id: str, principal: str | None) -> bool:
    """Delete the thread, its messages, its open turn and its runs' journals; False as `rename_thread`.

    An interrupt open on it can never be answered afterwards (a resume finds no turn), and a run of it in
    progress on this replica is asked to stop; one on another replica stops when its journal's next write
    finds the journal gone, and its late saves find no thread to write to.

    Raises:
        LimitExceeded: 422 `INVALID_ID`, before the store is asked.
        Forbidden: `THREAD_FORBIDDEN` for a caller who may read the thread but not "run" on it.
    """
    check_id(thread_id, "/threadId")
    stored = await config.store.load(thread_id, since=None)
    if stored is None or not await _may(config, principal, stored.head.owner):
        return False
    deleted = await config.store.delete_thread(thread_id, incarnation=stored.head.incarnation)
    for live in journals.of_thread(thread_id, stored.head.incarnation):
        live.halt()
    config.parsed.forget(thread_id)
    return deleted


async def _may(config: EngineConfig, principal: str | None, owner: str | None) -> bool:
    """False for a caller who may not read the thread; `Forbidden` for one who may read it but not "run" on it."""
    if not await config.access.allows(principal, owner, "read"):
        return False
    if not await config.access.allows(principal, owner, "run"):
        raise Forbidden("this caller may not change this thread", code=codes.THREAD_FORBIDDEN)
    return True
