"""An AG-UI adapter: frontend tools, interrupts, resume, approvals and durable turns for any agent backend."""

from adapter._adapter import Adapter
from adapter._errors import AdapterError, ConfigurationError
from adapter._forms import FormDefinition, FormRequired, UserInputTool
from adapter._http import create_app
from adapter._lifecycle import TurnEvent, TurnEventType
from adapter._tools import InputRequired, ToolContext, ToolError, tool
from adapter._types import (
    Backend,
    BackendInterrupt,
    DeferredToolCall,
    ExecutedToolCall,
    LateToolResult,
    ModelRequest,
    Passthrough,
    TextDelta,
    ToolCall,
    Usage,
)
from adapter.backends import AGUIUpstream, Call, OpenAIChatBackend, Rule, ScriptedBackend
from adapter.stores import MemoryStore, SQLiteStore, TurnStore

__all__ = [
    "AGUIUpstream",
    "Adapter",
    "AdapterError",
    "Backend",
    "BackendInterrupt",
    "Call",
    "ConfigurationError",
    "DeferredToolCall",
    "ExecutedToolCall",
    "FormDefinition",
    "FormRequired",
    "InputRequired",
    "LateToolResult",
    "MemoryStore",
    "ModelRequest",
    "OpenAIChatBackend",
    "Passthrough",
    "Rule",
    "SQLiteStore",
    "ScriptedBackend",
    "TextDelta",
    "ToolCall",
    "ToolContext",
    "ToolError",
    "TurnEvent",
    "TurnEventType",
    "TurnStore",
    "Usage",
    "UserInputTool",
    "create_app",
    "tool",
]
