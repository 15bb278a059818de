"""What a check found: one result per case, as JSON (the pinned `--json` shape) and as a terminal table.

Cases grade parts of the contract (`approvals`, `client tools`). A part none of whose cases could be graded (every
one skipped: the target never opened an approval) is `not graded`: that is not a pass, so the report is not `ok`
unless the caller said it accepts it (`allow_not_graded`, `--allow-not-graded`).
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ElementTree
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeAlias

Status: TypeAlias = Literal["pass", "fail", "warn", "skip"]

_COLOURS: dict[str, str] = {"pass": "32", "fail": "31", "warn": "33", "skip": "90"}


class ConformanceFailure(AssertionError):
    """A check found at least one failing case; the message lists them."""


@dataclass(frozen=True, slots=True)
class CaseResult:
    """One case's verdict: its status, the AG-UI rules it checks and one line of evidence."""

    id: str
    status: Status
    evidence: str
    rules: tuple[str, ...] = ()

    @property
    def detail(self) -> str:
        """The evidence followed by the rule ids, as the JSON report's `detail` carries it."""
        return f"{self.evidence} [{', '.join(self.rules)}]" if self.rules else self.evidence

    def as_json(self) -> dict[str, Any]:
        """The case as the JSON report carries it."""
        return {"id": self.id, "status": self.status, "detail": self.detail, "rules": list(self.rules)}


@dataclass(frozen=True, slots=True)
class Part:
    """A part of the contract and the cases that grade it: graded when at least one of them was not skipped."""

    id: str
    cases: tuple[str, ...]
    graded: bool

    @property
    def status(self) -> str:
        """`graded` or `not graded`."""
        return "graded" if self.graded else "not graded"

    def as_json(self) -> dict[str, Any]:
        """The part as the JSON report carries it."""
        return {"id": self.id, "status": self.status, "cases": list(self.cases)}


@dataclass(frozen=True, slots=True)
class Report:
    """The result of `check()`: the target, one result per case in the order they ran, and the parts they grade."""

    target: str
    cases: Sequence[CaseResult]
    parts: Sequence[Part] = ()
    allow_not_graded: bool = False
    """Whether a part left `not graded` is acceptable to whoever ran the check."""

    @property
    def ok(self) -> bool:
        """True when no case failed and every part was graded (or `allow_not_graded`): the CLI's exit code 0."""
        return not self.failures and (self.allow_not_graded or not self.not_graded)

    @property
    def not_graded(self) -> list[Part]:
        """The parts none of whose cases could be graded."""
        return [part for part in self.parts if not part.graded]

    @property
    def exit_code(self) -> int:
        """0 when `ok`; 1 when a case failed; 3 when none failed but a part was not graded (and that is not allowed)."""
        return 0 if self.ok else 1 if self.failures else 3

    @property
    def failures(self) -> list[CaseResult]:
        """The failing cases."""
        return [case for case in self.cases if case.status == "fail"]

    def status(self, case_id: str) -> Status:
        """The status of one case, by id; KeyError if the check has no such case."""
        return self[case_id].status

    def __getitem__(self, case_id: str) -> CaseResult:
        for case in self.cases:
            if case.id == case_id:
                return case
        raise KeyError(case_id)

    def as_json(self) -> dict[str, Any]:
        """`{"target", "cases": [{"id", "status", "detail", "rules"}], "parts": [{"id", "status", "cases"}], ...}`."""
        return {
            "target": self.target,
            "cases": [case.as_json() for case in self.cases],
            "parts": [part.as_json() for part in self.parts],
            "allowNotGraded": self.allow_not_graded,
            "ok": self.ok,
        }

    def write_json(self, path: str | Path) -> None:
        """Write the JSON report to `path`."""
        Path(path).write_text(json.dumps(self.as_json(), indent=2) + "\n", encoding="utf-8")

    def junit(self) -> str:
        """JUnit XML, one test case per kit case: `fail` fails, `skip` skips, `warn` passes with its evidence."""
        counts = {s: sum(case.status == s for case in self.cases) for s in _COLOURS}
        suite = ElementTree.Element(
            "testsuite",
            name="ag-ui-conformance",
            tests=str(len(self.cases)),
            failures=str(counts["fail"]),
            skipped=str(counts["skip"]),
            errors="0",
        )
        properties = ElementTree.SubElement(suite, "properties")
        ElementTree.SubElement(properties, "property", name="target", value=self.target)
        for part in self.parts:
            ElementTree.SubElement(properties, "property", name=f"part {part.id}", value=part.status)
        for case in self.cases:
            element = ElementTree.SubElement(suite, "testcase", classname="ag-ui-conformance", name=case.id)
            if case.status == "fail":
                ElementTree.SubElement(element, "failure", message=case.evidence).text = case.detail
            elif case.status == "skip":
                ElementTree.SubElement(element, "skipped", message=case.evidence)
            ElementTree.SubElement(element, "system-out").text = f"{case.status.upper()}: {case.detail}"
        for part in self.not_graded:
            element = ElementTree.SubElement(suite, "testcase", classname="ag-ui-conformance", name=f"{part.id} graded")
            what = f"not graded: every case of {part.id} was skipped ({', '.join(part.cases)})"
            if self.allow_not_graded:
                ElementTree.SubElement(element, "skipped", message=what)
            else:
                ElementTree.SubElement(element, "failure", message=what).text = what
        suite.set("tests", str(len(self.cases) + len(self.not_graded)))
        suite.set("failures", str(counts["fail"] + (0 if self.allow_not_graded else len(self.not_graded))))
        suites = ElementTree.Element("testsuites")
        suites.append(suite)
        return ElementTree.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"

    def write_junit(self, path: str | Path) -> None:
        """Write the JUnit XML report to `path`."""
        Path(path).write_text(self.junit(), encoding="utf-8")

    def raise_for_failures(self, *, allow: Collection[str] = ()) -> None:
        """Raise `ConformanceFailure` naming every failing case, except the case ids in `allow`.

        `allow` is for failures a team knows about and accepts; a case in it that passes is not an error.
        """
        unknown = set(allow) - {case.id for case in self.cases}
        if unknown:
            raise ValueError(f"allow names cases the check does not have: {', '.join(sorted(unknown))}")
        failing = [case for case in self.failures if case.id not in allow]
        lines = [f"  {case.id}: {case.detail}" for case in failing]
        if not self.allow_not_graded:
            lines += [f"  {part.id}: not graded (every case was skipped)" for part in self.not_graded]
        if lines:
            raise ConformanceFailure(
                f"{len(failing)} conformance case(s) failed, {len(lines) - len(failing)} part(s) not graded,"
                f" against {self.target}:\n" + "\n".join(lines)
            )

    def table(self, *, colour: bool = False) -> str:
        """The report as a readable table: status (coloured on a terminal), case, rules, evidence."""
        width = max((len(case.id) for case in self.cases), default=4)
        rules_width = max((len(", ".join(case.rules)) for case in self.cases), default=5)
        lines = [f"AG-UI conformance: {self.target}", ""]
        lines.append(f"{'STATUS':6}  {'CASE':{width}}  {'RULES':{rules_width}}  EVIDENCE")
        for case in self.cases:
            status = f"{case.status.upper():6}"
            if colour:
                status = f"\x1b[{_COLOURS[case.status]}m{status}\x1b[0m"
            lines.append(f"{status}  {case.id:{width}}  {', '.join(case.rules):{rules_width}}  {case.evidence}")
        counts = {s: sum(case.status == s for case in self.cases) for s in _COLOURS}
        lines += ["", ", ".join(f"{n} {s}" for s, n in counts.items())]
        for part in self.not_graded:
            accepted = " (accepted: --allow-not-graded)" if self.allow_not_graded else ""
            lines.append(f"NOT GRADED: {part.id}: every case was skipped ({', '.join(part.cases)}){accepted}")
        return "\n".join(lines)
