"""The error codes: one module defines them, docs/resuming.md documents each, no other module spells one."""

from __future__ import annotations

import re
from pathlib import Path

from adapter import _errors

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "resuming.md"
_CODE = re.compile(r"[A-Z][A-Z0-9_]+")


def documented(header: str) -> list[str]:
    """The codes of the docs table whose header row is `header`, in order."""
    lines = DOCS.read_text(encoding="utf-8").splitlines()
    start = lines.index(header)
    column = [cell.strip() for cell in header.strip("|").split("|")].index("code")
    codes = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cell = line.strip("|").split("|")[column].strip().strip("`")
        assert _CODE.fullmatch(cell), f"not a code in {DOCS.name}: {line}"
        codes.append(cell)
    return codes


def defined() -> set[str]:
    """Every code constant of `adapter._errors` (a name whose value is the name itself)."""
    return {name for name, value in vars(_errors).items() if _CODE.fullmatch(name) and value == name}


def test_the_http_table_documents_exactly_the_http_codes() -> None:
    assert sorted(documented("| status | code | when |")) == sorted(_errors.HTTP_CODES)


def test_the_run_error_table_documents_exactly_the_run_codes() -> None:
    assert sorted(documented("| code | when |")) == sorted(_errors.RUN_CODES)


def test_every_code_constant_belongs_to_one_table() -> None:
    both = {_errors.STORE_UNAVAILABLE, _errors.THREAD_CONFLICT, _errors.INTERNAL_ERROR}  # a 4xx/5xx, or a RUN_ERROR
    assert _errors.HTTP_CODES & _errors.RUN_CODES == both
    assert defined() == _errors.HTTP_CODES | _errors.RUN_CODES


def test_no_other_module_spells_a_code() -> None:
    spelled = {
        f"{path.relative_to(ROOT)}: {code}"
        for path in (ROOT / "adapter").rglob("*.py")
        if path.name != "_errors.py"
        for code in defined()
        if f'"{code}"' in path.read_text(encoding="utf-8") or f"'{code}'" in path.read_text(encoding="utf-8")
    }
    assert spelled == set()


def test_every_error_class_reports_a_documented_code() -> None:
    classes: list[type[_errors.AdapterError]] = [_errors.AdapterError, _errors.BackendError]
    assert {cls.code for cls in classes} <= _errors.RUN_CODES
    refusals = [
        _errors.ToolNameConflict(["x"]),
        _errors.InvalidClientTool("x"),
        _errors.LimitExceeded("x", code=_errors.TOO_MANY_TOOLS),
    ]
    assert {(r.status_code // 100, r.code in _errors.HTTP_CODES) for r in refusals} == {(4, True)}
    assert _errors.Forbidden("x").code in _errors.HTTP_CODES  # refused before any stream: a 403
