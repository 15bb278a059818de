from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

DOORS = {
    # What an app author wires: the adapter, its options' types, tools, forms, the stores and backends it takes.
    "adapter": [
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
    ],
    # The backend author's kit: the seam, every item a backend may yield, and the backends that ship.
    "adapter.backends": [
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
        "Usage",
        "confirmation_call_id",
        "gated_call_ids",
        "split_deltas",
        "summarize",
    ],
    # A store author's kit: the protocol, what it reads and writes, its errors; and the stores that ship.
    "adapter.stores": [
        "KEEP",
        "MemoryStore",
        "PostgresStore",
        "SQLiteStore",
        "StaleClaim",
        "StoreConflict",
        "StoreUnavailable",
        "StoredMessage",
        "StoredThread",
        "ThreadChange",
        "ThreadHead",
        "TurnStore",
    ],
}

# ../shared/DESIGN.md "Public surface": names tests and users outside the package import from `adapter`.
DESIGN_PINS = [
    "create_app",
    "Adapter",
    "Backend",
    "ModelRequest",
    "TextDelta",
    "ToolCall",
    "ScriptedBackend",
    "tool",
    "ToolContext",
    "FormRequired",
    "FormDefinition",
    "UserInputTool",
    "TurnStore",
    "MemoryStore",
    "SQLiteStore",
    "PostgresStore",
]


@pytest.mark.parametrize("door", DOORS)
def test_each_door_pins_its_names(door: str) -> None:
    assert importlib.import_module(door).__all__ == DOORS[door]


@pytest.mark.parametrize("door", DOORS)
def test_every_name_of_a_door_imports(door: str) -> None:
    module = importlib.import_module(door)
    for name in DOORS[door]:
        assert getattr(module, name) is not None, name
    namespace: dict[str, object] = {}
    exec(f"from {door} import *", namespace)
    assert sorted(k for k in namespace if not k.startswith("__")) == sorted(DOORS[door])


def test_the_names_design_pins_import_from_adapter() -> None:
    assert set(DESIGN_PINS) <= set(DOORS["adapter"])


def test_a_name_in_two_doors_is_one_object() -> None:
    doors = {door: importlib.import_module(door) for door in DOORS}
    for name in set(DOORS["adapter"]) & set(DOORS["adapter.backends"]):
        assert getattr(doors["adapter"], name) is getattr(doors["adapter.backends"], name), name


PRIVATE_IMPORT = re.compile(r"^\s*from (adapter|schema_tools)(\.\w+)*\._[a-z]\w* import ")


def test_a_test_imports_a_private_module_only_on_purpose_and_says_why() -> None:
    """A test uses the doors; one that reaches below them says why, on the import or in the comment just above."""
    unexplained = []
    for path in sorted(Path(__file__).parent.rglob("*.py")):
        lines = path.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines):
            if PRIVATE_IMPORT.match(line) and not _explained(lines, number):
                unexplained.append(f"{path.name}:{number + 1}: {line.strip()}")
    assert unexplained == []


def _explained(lines: list[str], number: int) -> bool:
    for line in reversed(lines[: number + 1]):
        if "on purpose" in line:
            return True
        if not (PRIVATE_IMPORT.match(line) or line.lstrip().startswith("#")):
            return False
    return False
