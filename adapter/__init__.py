"""An AG-UI adapter: frontend tools, interrupts, resume, approvals and durable turns for any agent backend.

This door holds what an app author wires. Backend authors find their kit in `adapter.backends`,
and the stores are in `adapter.stores`.
"""

from adapter._access import Action, Authorize
from adapter._adapter import Adapter
from adapter._config import HistoryMode
from adapter._errors import AdapterError, ConfigurationError, Forbidden, LimitExceeded, ResumeError
from adapter._forms import FormDefinition, FormRequired, UserInputTool
from adapter._http import create_app
from adapter._lifecycle import Listener, TurnEvent, TurnEventType
from adapter._mount import mount
from adapter._predict import PredictState
from adapter._tools import BaseTool, FrontendOutcome, FunctionTool, InputRequired, ToolContext, ToolError, tool
from adapter._types import Backend, ModelRequest, TextDelta, ToolCall
from adapter.backends import AGUIUpstream, OpenAIChatBackend, ScriptedBackend
from adapter.stores import MemoryStore, PostgresStore, SQLiteStore, TurnStore

__all__ = [
    "AGUIUpstream",
    "Action",
    "Adapter",
    "AdapterError",
    "Authorize",
    "Backend",
    "BaseTool",
    "ConfigurationError",
    "FormDefinition",
    "Forbidden",
    "FormRequired",
    "FrontendOutcome",
    "FunctionTool",
    "HistoryMode",
    "InputRequired",
    "LimitExceeded",
    "Listener",
    "MemoryStore",
    "ModelRequest",
    "OpenAIChatBackend",
    "PostgresStore",
    "PredictState",
    "ResumeError",
    "SQLiteStore",
    "ScriptedBackend",
    "TextDelta",
    "ToolCall",
    "ToolContext",
    "ToolError",
    "TurnEvent",
    "TurnEventType",
    "TurnStore",
    "UserInputTool",
    "create_app",
    "mount",
    "tool",
]
