"""What a peer from before protocol versioning receives (VER-5).

An input without `protocolVersion` comes from a client older than AG-UI 1.0, such as
`@ag-ui/client` 0.0.x, which parses a success outcome strictly: `pendingToolCallIds` makes it reject
the whole run. Dropping that list is lossless (it is every call the run left without a result), so
such a peer gets `{"type": "success"}`. Nothing else changes: not the outcome's type, not an id, not
the order of events. A `cancelled` outcome cannot be downgraded and is sent as it is.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing

from ag_ui.core import BaseEvent, RunFinishedEvent, RunFinishedSuccessOutcome


async def for_unversioned_peer(events: AsyncGenerator[BaseEvent, None]) -> AsyncGenerator[BaseEvent, None]:
    """The run's events, with `pendingToolCallIds` left out of a success outcome."""
    async with aclosing(events) as stream:
        async for event in stream:
            if isinstance(event, RunFinishedEvent) and isinstance(event.outcome, RunFinishedSuccessOutcome):
                if event.outcome.pending_tool_call_ids is not None:
                    event = event.model_copy(update={"outcome": RunFinishedSuccessOutcome()})
            yield event
