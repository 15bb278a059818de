"""The backend author's kit: the seam, the items a backend yields, and the backends that ship.

A backend is anything with `stream(ModelRequest) -> AsyncIterator[BackendItem]`, which streams one
assistant step. `BackendError` ends the run with a `RUN_ERROR` whose code the backend chooses.

The backends that speak HTTP (`OpenAIChatBackend`, `AGUIUpstream`, `UpstreamLimits`) are imported on
first use: they bring httpx, which an app on another backend need not hold in memory (issue 22).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from adapter._errors import BackendError
from adapter._lazy import deferred
from adapter.backends._gated import confirmation_call_id, gated_call_ids
from adapter.backends._scripted import Call, Progress, Rule, ScriptedBackend, ToolOutcome, split_deltas, summarize
from adapter.backends._seam import (
    Backend,
    BackendInterrupt,
    BackendItem,
    DeferredToolCall,
    ExecutedToolCall,
    LateToolResult,
    ModelRequest,
    Passthrough,
    ReasoningDelta,
    TextDelta,
    ToolCall,
    ToolCallChunk,
    Usage,
)

if TYPE_CHECKING:
    from adapter.backends._openai import OpenAIChatBackend
    from adapter.backends._upstream import AGUIUpstream
    from adapter.backends._upstream_limits import UpstreamLimits

_LAZY = {
    "OpenAIChatBackend": "adapter.backends._openai",
    "AGUIUpstream": "adapter.backends._upstream",
    "UpstreamLimits": "adapter.backends._upstream_limits",
}
"""The names imported on first use, by the module that defines them."""

__all__ = [
    "AGUIUpstream",
    "Backend",
    "BackendError",
    "BackendInterrupt",
    "BackendItem",
    "Call",
    "DeferredToolCall",
    "ExecutedToolCall",
    "LateToolResult",
    "ModelRequest",
    "OpenAIChatBackend",
    "Passthrough",
    "Progress",
    "ReasoningDelta",
    "Rule",
    "ScriptedBackend",
    "TextDelta",
    "ToolCall",
    "ToolCallChunk",
    "ToolOutcome",
    "UpstreamLimits",
    "Usage",
    "confirmation_call_id",
    "gated_call_ids",
    "split_deltas",
    "summarize",
]


__getattr__, __dir__ = deferred(globals(), _LAZY)
