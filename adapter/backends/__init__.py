"""The backend author's kit: the seam, the items a backend yields, and the backends that ship.

A backend is anything with `stream(ModelRequest) -> AsyncIterator[BackendItem]`, which streams one
assistant step. `BackendError` ends the run with a `RUN_ERROR` whose code the backend chooses.
"""

from adapter._errors import BackendError
from adapter._gated import confirmation_call_id, gated_call_ids
from adapter._types import (
    Backend,
    BackendInterrupt,
    BackendItem,
    DeferredToolCall,
    ExecutedToolCall,
    LateToolResult,
    ModelRequest,
    Passthrough,
    TextDelta,
    ToolCall,
    ToolCallChunk,
    Usage,
)
from adapter.backends._openai import OpenAIChatBackend
from adapter.backends._scripted import Call, Progress, Rule, ScriptedBackend, ToolOutcome, split_deltas, summarize
from adapter.backends._upstream import AGUIUpstream
from adapter.backends._upstream_limits import UpstreamLimits

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
