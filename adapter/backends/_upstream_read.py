"""An upstream AG-UI agent's SSE body read as validated events, each fed to an `EventReader` as it arrives.

An event that is not JSON or not a valid AG-UI event, and a body that ends before RUN_FINISHED or
RUN_ERROR, are `UPSTREAM_ERROR` failures whose messages are safe to show.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from typing import Any

from ag_ui.core import BaseEvent, Event
from pydantic import TypeAdapter, ValidationError

from adapter.backends._seam import BackendItem
from adapter.backends._upstream_events import EventReader, upstream_error

_EVENT: TypeAdapter[Any] = TypeAdapter(Event)
_SHOWN_TYPE_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ_")


async def read_items(events: AsyncGenerator[str, None], reader: EventReader) -> AsyncIterator[BackendItem]:
    """Stream the items of one upstream run from its events' data (`read_data`), up to its terminal event."""
    async with aclosing(events) as frames:
        async for data in frames:
            for item in reader.feed(parse_event(data)):
                yield item
            if reader.finished:
                return
    raise upstream_error("The upstream agent's stream ended without RUN_FINISHED or RUN_ERROR.")


def parse_event(data: str) -> BaseEvent:
    """One AG-UI event, validated against the protocol's models."""
    try:
        document = json.loads(data)
    except ValueError:
        raise upstream_error("The upstream agent sent an event that is not JSON.") from None
    try:
        event: BaseEvent = _EVENT.validate_python(document)
    except ValidationError:
        raise upstream_error(f"The upstream agent sent an invalid {_shown_type(document)}.") from None
    return event


def _shown_type(document: Any) -> str:
    kind = document.get("type") if isinstance(document, dict) else None
    if isinstance(kind, str) and 0 < len(kind) <= 40 and set(kind) <= _SHOWN_TYPE_CHARS:
        return f"{kind} event"
    return "event"
