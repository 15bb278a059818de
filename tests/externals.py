"""What some tests need beyond pip: the TypeScript clients and the CopilotKit example (`npm ci`), Chromium.

A test that needs one is marked (`needs_node`, `needs_copilotkit`, `needs_chromium`, `needs_strands`,
`needs_adk`, `needs_crewai`, `needs_llamaindex`, `needs_agno`, `needs_maf`). Where a
dependency is missing, a local run skips the test and says which command installs it. Under CI
(`CI` set, as `.ci/run` sets it) nothing is skipped: the test runs and fails with the same message,
so a missing dependency can never pass there.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
NODE_CLIENTS = (TESTS / "node" / "client-1.0", TESTS / "node" / "client-0.0.59")
COPILOTKIT = TESTS.parent / "examples" / "copilotkit"
CHROMIUM = Path("/usr/bin/chromium")
NO_NODE = "Node.js is not on the PATH: apt-get install -y nodejs npm."
MISSING_PLAYWRIGHT = "Playwright for Python is missing: pip install --group dev (or pip install playwright)."


def in_ci() -> bool:
    """True under CI, where a missing dependency must fail its tests, never skip them."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def missing_node() -> str | None:
    """What is missing for the TypeScript-client tests, with the fix; None when nothing is."""
    if shutil.which("node") is None:
        return NO_NODE
    stale = [folder for folder in NODE_CLIENTS if not _installed(folder)]
    if not stale:
        return None
    commands = " && ".join(f"(cd {folder.relative_to(TESTS.parent)} && npm ci)" for folder in stale)
    return f"the pinned @ag-ui/client is not installed: run {commands} (bash .ci/run does)."


def missing_copilotkit() -> str | None:
    """What is missing for the CopilotKit example's tests, with the fix; None when nothing is."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        return NO_NODE
    if not (COPILOTKIT / "node_modules" / ".package-lock.json").exists():
        return "the CopilotKit example is not installed: run (cd examples/copilotkit && npm ci) (bash .ci/run does)."
    return None


def missing_chromium() -> str | None:
    """What is missing for the browser tests, with the fix; None when nothing is."""
    if importlib.util.find_spec("playwright") is None:
        return MISSING_PLAYWRIGHT
    if not CHROMIUM.exists():
        return f"Chromium is not at {CHROMIUM}: apt-get install -y chromium chromium-driver (bash .ci/run does)."
    return None


STRANDS_REQUIREMENTS = TESTS / "upstreams" / "strands-requirements.txt"
FRAMEWORK_VENVS = {
    "strands": "strands",
    "adk": "agents",
    "llamaindex": "agents",
    "crewai": "crewai",
    "agno": "agno",
    "maf": "maf",
}
"""Each wrapped framework's virtualenv suffix: ADK and LlamaIndex share one, CrewAI's pins conflict with ADK's,
Microsoft Agent Framework pins ag-ui-protocol<0.2, whose RunAgentInput Agno's route would hold our input to."""


def requirements(name: str) -> Path:
    """The pinned requirements of a framework's virtualenv (`pip freeze` of a fresh one)."""
    return TESTS / "upstreams" / f"{FRAMEWORK_VENVS[name]}-requirements.txt"


def framework_python(name: str) -> Path:
    """A framework's interpreter: $AGUI_<NAME>_PYTHON, or `<this venv>-<suffix>` beside ours.

    The wrapped frameworks pin versions the project's environment cannot hold (ag-ui-strands an older
    opentelemetry-api, crewai and google-adk each their own), so they live in virtualenvs of their own
    (`.ci/run` makes `.venv-strands`, `.venv-agents` and `.venv-crewai` next to `.venv`).
    """
    configured = os.environ.get(f"AGUI_{name.upper()}_PYTHON")
    return Path(configured) if configured else Path(f"{sys.prefix}-{FRAMEWORK_VENVS[name]}") / "bin" / "python"


def missing_framework(name: str) -> str | None:
    """What is missing for a framework's upstream tests, with the fix; None when nothing is."""
    python = framework_python(name)
    if python.exists():
        return None
    venv = python.parents[1]
    return (
        f"no {name} virtualenv at {venv}: run python3 -m venv {venv} && {venv}/bin/pip install -r "
        f"{requirements(name).relative_to(TESTS.parent)} (bash .ci/run does), or set AGUI_{name.upper()}_PYTHON."
    )


def strands_python() -> Path:
    """The Strands virtualenv's interpreter: $AGUI_STRANDS_PYTHON, or `<this venv>-strands` beside ours."""
    return framework_python("strands")


def missing_strands() -> str | None:
    """What is missing for the Strands upstream's tests, with the fix; None when nothing is."""
    return missing_framework("strands")


def _installed(folder: Path) -> bool:
    """`npm ci` has installed the version of @ag-ui/client that the folder's package.json pins."""
    installed = folder / "node_modules" / "@ag-ui" / "client" / "package.json"
    if not installed.is_file():
        return False
    pinned = json.loads((folder / "package.json").read_text())["dependencies"]["@ag-ui/client"]
    return bool(json.loads(installed.read_text())["version"] == pinned)
