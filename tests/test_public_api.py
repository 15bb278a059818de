from __future__ import annotations

import importlib

import adapter

PUBLIC = [
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


def test_public_names_are_pinned() -> None:
    assert adapter.__all__ == PUBLIC


def test_every_public_name_imports() -> None:
    module = importlib.import_module("adapter")
    for name in PUBLIC:
        assert getattr(module, name) is not None, name
    namespace: dict[str, object] = {}
    exec("from adapter import *", namespace)
    assert sorted(k for k in namespace if not k.startswith("__")) == sorted(PUBLIC)
