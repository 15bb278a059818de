"""An AG-UI adapter: frontend tools, interrupts, resume, approvals and durable turns for any agent backend.

This door holds what an app author wires: the adapter and its sub-app, tools and forms, the options'
types and the errors. Each name has one home door: the backend author's kit and the backends that
ship are in `adapter.backends`, the stores in `adapter.stores` (docs/architecture.md lists each door).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from adapter._adapter import Adapter
from adapter._edge._http import create_app, mount
from adapter._errors import AdapterError, ConfigurationError, Forbidden, InputRejected, LimitExceeded, ResumeError
from adapter._lazy import deferred
from adapter._run._access import Action, Authorize
from adapter._run._config import HistoryMode, Limits
from adapter._run._events import TurnEvent, TurnEventType
from adapter._run._forms import FormDefinition, FormRequired, UserInputTool
from adapter._run._tools import BaseTool, FrontendOutcome, FunctionTool, InputRequired, ToolContext, ToolError, tool
from adapter._state._predict import PredictState

# Pinned by DESIGN.md as importable from here, at home in their own doors: kept for compatibility, not in __all__.
from adapter.backends import Backend as Backend
from adapter.backends import ModelRequest as ModelRequest
from adapter.backends import ScriptedBackend as ScriptedBackend
from adapter.backends import TextDelta as TextDelta
from adapter.backends import ToolCall as ToolCall
from adapter.stores import TurnStore as TurnStore

if TYPE_CHECKING:
    from adapter.stores import MemoryStore as MemoryStore
    from adapter.stores import PostgresStore as PostgresStore
    from adapter.stores import SQLiteStore as SQLiteStore

__all__ = [
    "Action",
    "Adapter",
    "AdapterError",
    "Authorize",
    "BaseTool",
    "ConfigurationError",
    "Forbidden",
    "FormDefinition",
    "FormRequired",
    "FrontendOutcome",
    "FunctionTool",
    "HistoryMode",
    "InputRejected",
    "InputRequired",
    "LimitExceeded",
    "Limits",
    "PredictState",
    "ResumeError",
    "ToolContext",
    "ToolError",
    "TurnEvent",
    "TurnEventType",
    "UserInputTool",
    "create_app",
    "mount",
    "tool",
]


# The stores pinned here that `adapter.stores` imports on first use.
__getattr__, __dir__ = deferred(
    globals(), {"MemoryStore": "adapter.stores", "PostgresStore": "adapter.stores", "SQLiteStore": "adapter.stores"}
)
