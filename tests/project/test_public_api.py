"""The public doors: each name has one home door, pinned here and listed completely in docs/architecture.md."""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]

DOORS = {
    # What an app author wires: the adapter and its sub-app, tools and forms, the options' types, the errors.
    "adapter": [
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
    ],
    # The Python AG-UI client: runs an agent, checks its streams, keeps the conversation, writes resume entries.
    "adapter.client": [
        "SERVER_ROLES",
        "AGUIClient",
        "CallReader",
        "ClientError",
        "Frame",
        "GatedCall",
        "Lifecycle",
        "ParsedBody",
        "ProtocolError",
        "RequestRefused",
        "Run",
        "SSEDecoder",
        "StreamDropped",
        "StreamLimitError",
        "StreamLimitExceeded",
        "StreamLimits",
        "StreamedCall",
        "Target",
        "Thread",
        "approved",
        "cancelled",
        "denied",
        "fold_messages",
        "gated_call",
        "new_id",
        "parse_sse",
        "read_sse",
        "resolved",
    ],
    # A store author's kit: the protocol, what it reads and writes, its errors; and the stores that ship.
    "adapter.stores": [
        "ANY_INCARNATION",
        "KEEP",
        "JournalAppend",
        "JournalEvent",
        "MemoryStore",
        "PostgresStore",
        "RunJournal",
        "SQLiteStore",
        "StaleClaim",
        "StoreConflict",
        "StoreUnavailable",
        "StoredMessage",
        "StoredThread",
        "ThreadChange",
        "ThreadGone",
        "ThreadHead",
        "ThreadSummary",
        "TurnStore",
    ],
}

APP_AUTHOR_LIMIT = 26  # 25, and `Limits`: the bounds thirteen options of `Adapter` were (issue 41)
"""The most names `adapter` may hold: what an app author wires, and no more."""

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


def test_each_name_has_one_home_door() -> None:
    homes: dict[str, list[str]] = {}
    for door in public_doors():
        for name in importlib.import_module(door).__all__:
            homes.setdefault(name, []).append(door)
    assert {name: doors for name, doors in homes.items() if len(doors) > 1} == {}


def test_the_app_authors_door_stays_small() -> None:
    assert len(DOORS["adapter"]) <= APP_AUTHOR_LIMIT


ADAPTER_OPTIONS_LIMIT = 18
"""Keywords `Adapter(...)` takes at most: its bounds are grouped in `Limits`, its test hooks are no options."""


def test_the_adapter_takes_few_options() -> None:
    from adapter import Adapter

    parameters = inspect.signature(Adapter).parameters.values()
    keywords = [p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]

    assert len(keywords) <= ADAPTER_OPTIONS_LIMIT, keywords
    assert not [name for name in keywords if name.startswith("max_")]


@pytest.mark.parametrize("moved", ["max_steps", "claim_lease", "max_body_bytes"])
def test_an_option_that_moved_into_limits_names_its_new_spelling(moved: str) -> None:
    from adapter import Adapter, create_app
    from adapter.backends import ScriptedBackend

    old: dict[str, Any] = {moved: 1}
    with pytest.raises(TypeError, match=rf"limits=Limits\({moved}=\.\.\.\)"):
        Adapter(ScriptedBackend(), **old)
    with pytest.raises(TypeError, match=rf"limits=Limits\({moved}=\.\.\.\)"):
        create_app(Adapter(ScriptedBackend()), **old)


def test_clock_is_no_option_and_says_how_tests_set_it() -> None:
    from adapter import Adapter
    from adapter.backends import ScriptedBackend

    with pytest.raises(TypeError, match=r"config\.use_clock"):
        Adapter(ScriptedBackend(), clock=lambda: None)  # type: ignore[call-arg]


def test_every_name_design_pins_imports_from_adapter_as_the_object_of_its_home() -> None:
    adapter = importlib.import_module("adapter")
    for name in DESIGN_PINS:
        home = next(door for door in DOORS if name in DOORS[door])
        assert getattr(adapter, name) is getattr(importlib.import_module(home), name), name


def public_doors() -> list[str]:
    """`adapter`, `schema_tools`, and every package or module of `adapter` whose name has no leading underscore."""
    found = ["adapter", "schema_tools"]
    for path in sorted((ROOT / "adapter").iterdir()):
        if path.name.startswith("_"):
            continue
        if (path / "__init__.py").is_file() or (path.suffix == ".py"):
            found.append(f"adapter.{path.stem}")
    return found


def architecture_doors() -> dict[str, set[str]]:
    """docs/architecture.md's table of doors: each door's names, as the page lists them."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text[text.index("## The doors") :]
    rows = re.findall(r"^\| `([\w.]+)` \|[^\n]*\| ([^\n]*) \|$", section, re.M)
    return {door: set(re.findall(r"`(\w+)`", names)) for door, names in rows}


def test_the_architecture_page_lists_every_door_completely() -> None:
    listed = architecture_doors()

    assert sorted(listed) == sorted(public_doors())
    for door, names in listed.items():
        assert names == set(importlib.import_module(door).__all__), door


PRIVATE_IMPORT = re.compile(r"^\s*(from|import) (adapter|schema_tools)(\.\w+)*\._[a-z]\w*( |$)")


def test_a_test_imports_a_private_module_only_on_purpose_and_says_why() -> None:
    """A test uses the doors; one that reaches below them says why, on the import or in the comment just above."""
    unexplained = []
    for path in sorted(Path(__file__).parents[1].rglob("*.py")):
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
