"""docs/compatibility.md says what tests/compat/measure.py measures, for the frameworks in this process."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).parents[2]


def measure_module() -> Any:
    spec = importlib.util.spec_from_file_location("measure", ROOT / "tests" / "compat" / "measure.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["measure"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def page_table(framework: str) -> dict[str, list[str]]:
    """The page's statuses for one framework: case -> [alone, behind the adapter]."""
    page = (ROOT / "docs" / "compatibility.md").read_text(encoding="utf-8")
    section = page.split(f"| case | {framework} alone |", 1)[1].split("\n\n", 1)[0]
    rows = [line.split("|")[1:-1] for line in section.splitlines()[2:]]
    return {row[0].strip().strip("`"): [cell.strip() for cell in row[1:]] for row in rows}


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore")  # the frameworks' own deprecation warnings
@pytest.mark.parametrize("framework", ["pydantic_ai", "langgraph"])
async def test_the_page_shows_what_the_script_measures(framework: str) -> None:
    measure = measure_module()

    measured = await measure.measure([framework])

    found = {case.id: [measure.cell(m, case.id) for m in measured] for case in measured[0].report.cases}
    assert found == page_table(framework)
    behind = measured[1].report
    if framework == "langgraph":  # ag-ui-langgraph 0.0.47 resumes two pending interrupts with one value: refused
        assert {case.id for case in behind.failures} == {"approvals-one-by-one", "approvals-together"}
    else:
        assert behind.ok, behind.table()
    if framework == "pydantic_ai":
        failing = {case.id for case in measured[0].report.failures}
        assert failing == {"new-message-while-open", "partial-resume"}, "stateless: the rest warn (AG-UI 1.1)"
        stored, stored_behind = measured[2:]
        assert (stored.where, stored_behind.where) == ("with a store, alone", "with a store, behind the adapter")
        assert {case.id for case in stored.report.failures} == {"new-message-while-open", "concurrent-resume"}
        assert stored_behind.report.ok, stored_behind.report.table()
