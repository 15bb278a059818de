"""What retention needs from a thread's head: when it was last written and when its open turn expires.

A store keeps two numbers per thread beside its records, written with every save: the time of the
save, and the expiry of the open turn (the latest `expires_at` of its pending interrupts; none when
one of them never expires or nothing waits). `purge` deletes by these two numbers only.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Final

from adapter.stores._protocol import KEEP, JSONValue

_DURATION: Final = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNITS: Final = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def turn_expiry(open_turn: JSONValue) -> datetime | None:
    """When an open turn's last interrupt expires; None when nothing waits or an interrupt never expires.

    Reads the engine's open-turn record (`pending[].expires_at`, ISO 8601); anything else counts as
    never expiring, so a record the store does not understand is never purged for expiry.
    """
    if open_turn is KEEP or not isinstance(open_turn, dict):
        return None
    pending = open_turn.get("pending")
    if not isinstance(pending, list) or not pending:
        return None
    latest: datetime | None = None
    for call in pending:
        expires = call.get("expires_at") if isinstance(call, dict) else None
        if not isinstance(expires, str):
            return None
        try:
            moment = datetime.fromisoformat(expires)
        except ValueError:
            return None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        latest = moment if latest is None else max(latest, moment)
    return latest


def parse_duration(text: str) -> timedelta:
    """`30d`, `12h`, `90m`, `45s`, `2w` as a timedelta.

    Raises:
        ValueError: The text is not a number followed by one of s, m, h, d, w.
    """
    match = _DURATION.match(text)
    if match is None:
        raise ValueError(f"{text!r} is not a duration like 30d, 12h, 90m, 45s or 2w")
    return timedelta(**{_UNITS[match.group(2)]: float(match.group(1))})


def cutoffs(older_than: timedelta, grace: timedelta, now: datetime | None) -> tuple[datetime, datetime]:
    """The idle cutoff (finished threads saved before it go) and the expiry cutoff (turns expired before it)."""
    if older_than < timedelta(0) or grace < timedelta(0):
        raise ValueError("older_than and grace must not be negative")
    moment = now or datetime.now(UTC)
    return moment - older_than, moment - grace
