"""`list_threads`' order and cursors, the same for every store.

Threads are listed by the key `(updated_at, thread_id)`, greatest first: newest first, and among
threads saved at the same moment, greatest id first. Both parts go the same way, so a page's end is one
row-value comparison that an index on `(owner, updated_at DESC, thread_id DESC)` answers in order.

A cursor is the key of a page's last thread, as text: `<updated_at, ISO 8601 to the microsecond>|<thread
id>`. Every store keeps `updated_at` to the microsecond, so the cursor names the key exactly: the next
page is every thread whose key is below it, and no thread is listed twice or skipped, unless it is
saved between two pages (it then moves to the front).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Final

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND: Final = timedelta(microseconds=1)


def next_cursor(updated_at: datetime, thread_id: str) -> str:
    """The cursor after a page whose last thread has this key."""
    return f"{updated_at.astimezone(UTC).isoformat(timespec='microseconds')}|{thread_id}"


def parse_cursor(text: str) -> tuple[datetime, str]:
    """The key a cursor names: `(updated_at, thread_id)`.

    Raises:
        ValueError: `text` is not a cursor `next_cursor` makes.
    """
    moment, bar, thread_id = text.partition("|")
    if "\x00" in thread_id or not _encodes(thread_id):  # no store keeps such an id: no page ends at one
        raise ValueError(f"{text!r} is not a cursor of list_threads: pass the `next` a page returned")
    try:
        updated_at = datetime.fromisoformat(moment) if bar else None
        if updated_at is not None and updated_at.tzinfo is not None:
            return updated_at.astimezone(UTC), thread_id
    except (ValueError, OverflowError):  # not a date, or one UTC cannot hold (0001-01-01 at UTC+14)
        pass
    raise ValueError(f"{text!r} is not a cursor of list_threads: pass the `next` a page returned")


def _encodes(text: str) -> bool:
    """Whether `text` has a UTF-8 form (no lone surrogate), as every store needs of what it compares."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def check_limit(limit: int) -> int:
    """`limit` if a page may hold that many threads.

    Raises:
        ValueError: `limit` is below 1.
    """
    if limit < 1:
        raise ValueError(f"a page of threads holds at least 1 thread, not {limit}")
    return limit


def to_micros(moment: datetime) -> int:
    """Microseconds since the Unix epoch: exact, for a store that keeps times as integers."""
    return (moment - _EPOCH) // _MICROSECOND


def from_micros(micros: int) -> datetime:
    """The tz-aware UTC time `to_micros` gave `micros` for."""
    return _EPOCH + micros * _MICROSECOND
