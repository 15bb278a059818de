"""Grading what a client sent the reference agent: one verdict per check, per thread, per scenario.

The recorder keeps every input a thread received, with the events the agent answered. The walk
replays them in order, tracking which interrupts (and pending calls) were open when each input came.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from adapter.conformance._report import Status
from adapter.conformance._scenarios import FINAL_STATE, LONG_TEXT, SCENARIOS
from schema_tools import SchemaIssue, SchemaPolicyError, validate

Event = dict[str, Any]


@dataclass(slots=True)
class Received:
    """One input the agent received, and what it answered."""

    body: dict[str, Any]
    at: datetime
    status: int = 0
    events: list[Event] = field(default_factory=list)
    size: int = 0
    """Bytes of the input and of the answer, as sent (what `Recording.max_bytes` counts)."""

    def outcome(self) -> str | None:
        """The run's outcome type; `error` for a RUN_ERROR, None without a terminal event."""
        if any(event.get("type") == "RUN_ERROR" for event in self.events):
            return "error"
        finished = [event for event in self.events if event.get("type") == "RUN_FINISHED"]
        return str((finished[0].get("outcome") or {}).get("type", "success")) if finished else None


@dataclass(frozen=True, slots=True)
class Check:
    """One graded question."""

    id: str
    status: Status
    detail: str


@dataclass(slots=True)
class _Walk:
    issued: dict[str, Event] = field(default_factory=dict)
    open: set[str] = field(default_factory=set)
    answers: Counter[str] = field(default_factory=Counter)
    pending: Counter[str] = field(default_factory=Counter)
    seen: set[str] = field(default_factory=set)
    wrong: list[str] = field(default_factory=list)
    invalid: list[str] = field(default_factory=list)
    late: list[str] = field(default_factory=list)
    interleaved: list[str] = field(default_factory=list)
    tentative: Counter[str] = field(default_factory=Counter)
    """This input's answers: they count once the run accepts them and the interrupt does not stay open."""

    def take(self, received: Received) -> None:
        entries = [e for e in received.body.get("resume") or [] if isinstance(e, dict)]
        fresh = [m for m in received.body.get("messages") or [] if isinstance(m, dict) and m.get("id") not in self.seen]
        self.seen |= {str(m.get("id")) for m in received.body.get("messages") or [] if isinstance(m, dict)}
        by_call = {str(self.issued[i].get("toolCallId")): i for i in self.open}
        answered_by_message = [
            by_call[m["toolCallId"]] for m in fresh if m.get("role") == "tool" and m.get("toolCallId") in by_call
        ]
        if self.open and not entries and not answered_by_message:
            self.interleaved.append(f"a new input while {', '.join(sorted(self.open))} was open")
        self.tentative = Counter(answered_by_message)
        for entry in entries:
            self._entry(entry, received.at)
        for message in fresh:
            if message.get("role") == "tool" and message.get("toolCallId") in self.pending:
                self.pending[str(message["toolCallId"])] += 1
        self._outcome(received)

    def _entry(self, entry: dict[str, Any], at: datetime) -> None:
        interrupt_id = str(entry.get("interruptId"))
        if interrupt_id not in self.open:
            self.wrong.append(interrupt_id)
        interrupt = self.issued.get(interrupt_id)
        if interrupt is None:
            return
        self.tentative[interrupt_id] += 1
        if entry.get("status") != "resolved":
            return
        schema = interrupt.get("responseSchema")
        if isinstance(schema, dict) and not _fits(entry.get("payload"), schema):
            self.invalid.append(f"{interrupt_id}: {json.dumps(entry.get('payload'))}")
        expires = interrupt.get("expiresAt")
        if isinstance(expires, str) and at > datetime.fromisoformat(expires.replace("Z", "+00:00")):
            self.late.append(interrupt_id)

    def _outcome(self, received: Received) -> None:
        outcome = received.outcome()
        if outcome in (None, "error"):
            return  # a refused input leaves the open interrupts as they were, and answered nothing
        finished = next(e for e in received.events if e.get("type") == "RUN_FINISHED")
        interrupts = (finished.get("outcome") or {}).get("interrupts") or []
        reissued = {str(i.get("id")) for i in interrupts}
        self.answers.update({i: n for i, n in self.tentative.items() if i not in reissued})
        self.issued.update({str(i["id"]): i for i in interrupts})
        self.open = {str(i["id"]) for i in interrupts}
        results = {e.get("toolCallId") for e in received.events if e.get("type") == "TOOL_CALL_RESULT"}
        bound = {i.get("toolCallId") for i in interrupts}
        for start in (e for e in received.events if e.get("type") == "TOOL_CALL_START"):
            if start.get("toolCallId") not in results | bound:
                self.pending[str(start["toolCallId"])] += 0

    def checks(self) -> list[Check]:
        return [self._once(), self._ids(), self._payloads(), self._expiry(), self._interleaving()]

    def _once(self) -> Check:
        counts = {**{i: self.answers[i] for i in self.issued}, **self.pending}
        if not counts:
            return Check("answered-once", "skip", "no interrupt or pending call")
        wrong = [f"{key} answered {n} times" if n else f"{key} never answered" for key, n in counts.items() if n != 1]
        return Check("answered-once", "fail" if wrong else "pass", "; ".join(wrong) or f"{len(counts)} answered once")

    def _ids(self) -> Check:
        if not self.issued:
            return Check("right-ids", "skip", "no interrupt")
        if self.wrong:
            return Check("right-ids", "fail", f"entries for interrupts that were not open: {', '.join(self.wrong)}")
        return Check("right-ids", "pass", "every entry named an open interrupt")

    def _payloads(self) -> Check:
        if not self.issued:
            return Check("valid-payloads", "skip", "no interrupt")
        if self.invalid:
            return Check("valid-payloads", "fail", f"payloads that fail responseSchema: {'; '.join(self.invalid)}")
        return Check("valid-payloads", "pass", "every resolved payload met its responseSchema")

    def _expiry(self) -> Check:
        expiring = [i for i, interrupt in self.issued.items() if interrupt.get("expiresAt")]
        if not expiring:
            return Check("expiry", "skip", "no interrupt with expiresAt")
        silent = [i for i in expiring if not self.answers[i]]
        if self.late or silent:
            late = [f"{i} resolved after expiresAt" for i in self.late] + [
                f"{i} neither answered nor cancelled" for i in silent
            ]
            return Check("expiry", "fail", "; ".join(late))
        return Check("expiry", "pass", "answered before expiresAt, or cancelled")

    def _interleaving(self) -> Check:
        if not self.issued:
            return Check("no-input-while-open", "skip", "no interrupt")
        if self.interleaved:
            return Check("no-input-while-open", "fail", "; ".join(self.interleaved))
        return Check("no-input-while-open", "pass", "no new input while an interrupt was open")


def grade_thread(scenario: str, received: list[Received]) -> list[Check]:
    """Every check for one thread: the common ones, then the scenario's own."""
    walk = _Walk()
    for each in received:
        walk.take(each)
    own = _OWN.get(scenario)
    return walk.checks() + ([own(received)] if own else [])


def grade(threads: Iterable[tuple[str, list[Received]]]) -> dict[str, Any]:
    """The report: one entry per scenario, failing when any of its threads fails a check."""
    played: dict[str, list[list[Check]]] = {scenario.id: [] for scenario in SCENARIOS}
    for scenario, received in threads:
        played.setdefault(scenario, []).append(grade_thread(scenario, received))
    return {"scenarios": [_scenario(scenario, runs) for scenario, runs in played.items()]}


def _scenario(scenario: str, runs: list[list[Check]]) -> dict[str, Any]:
    if not runs:
        return {"id": scenario, "status": "skip", "threads": 0, "checks": [], "detail": "not played"}
    checks = [check for run in runs for check in run]
    failed = [check for check in checks if check.status == "fail"]
    status: Status = "fail" if failed else "pass"
    detail = "; ".join(f"{c.id}: {c.detail}" for c in failed) or "every check passed"
    return {
        "id": scenario,
        "status": status,
        "threads": len(runs),
        "checks": [{"id": c.id, "status": c.status, "detail": c.detail} for c in checks],
        "detail": detail,
    }


def _after(received: list[Received], ended: Callable[[Received], bool]) -> Received | None:
    """The first input after the first run that `ended` picks."""
    index = next((n for n, each in enumerate(received) if ended(each)), None)
    return received[index + 1] if index is not None and index + 1 < len(received) else None


def _follow_up(
    check: str, ended: Callable[[Received], bool], judge: Callable[[Received], str | None]
) -> Callable[[list[Received]], Check]:
    def grade_follow_up(received: list[Received]) -> Check:
        after = _after(received, ended)
        if after is None:
            return Check(check, "fail", "no input followed the scenario's run")
        problem = judge(after)
        return Check(check, "fail" if problem else "pass", problem or "the follow-up input was right")

    return grade_follow_up


def _no_resume(after: Received) -> str | None:
    return "the follow-up carried a resume" if after.body.get("resume") else None


def _kept_state(after: Received) -> str | None:
    state = after.body.get("state")
    return None if state == FINAL_STATE else f"state {json.dumps(state)}, not {json.dumps(FINAL_STATE)}"


def _kept_text(after: Received) -> str | None:
    texts = [m.get("content") for m in after.body.get("messages") or [] if m.get("role") == "assistant"]
    return None if LONG_TEXT in texts else "no assistant message holds the streamed text exactly"


def _edited(received: list[Received]) -> Check:
    entries = [e for each in received for e in each.body.get("resume") or [] if isinstance(e, dict)]
    edits = [
        e for e in entries if isinstance(e.get("payload"), dict) and isinstance(e["payload"].get("editedArgs"), dict)
    ]
    if edits:
        return Check("edited-args", "pass", f"editedArgs {json.dumps(edits[0]['payload']['editedArgs'])}")
    return Check("edited-args", "fail", "no resume entry carried editedArgs")


def _emitted(kind: str) -> Callable[[Received], bool]:
    return lambda each: any(event.get("type") == kind for event in each.events)


_OWN: dict[str, Callable[[list[Received]], Check]] = {
    "approval-edits": _edited,
    "cancelled": _follow_up("continued", lambda each: each.outcome() == "cancelled", _no_resume),
    "state": _follow_up("kept-state", _emitted("STATE_DELTA"), _kept_state),
    "long-text": _follow_up("kept-text", lambda each: each.outcome() == "success", _kept_text),
    "run-error": _follow_up("continued", lambda each: each.outcome() == "error", _no_resume),
}


SCHEMA_STEPS = 100_000  # a small payload against a sane schema takes a few hundred


def schema_issues(payload: Any, schema: dict[str, Any]) -> list[SchemaIssue] | str:
    """How `payload` breaks a target's schema, checked within `SCHEMA_STEPS`; or why the kit cannot judge it.

    A target's schema comes from outside: one that costs 2^n to evaluate, or refers to itself without end,
    is a reason (a string), never a stall or a traceback.
    """
    try:
        issues = validate(payload, schema, max_steps=SCHEMA_STEPS)
    except SchemaPolicyError as error:
        first = error.violations[0]
        return f"the interrupt's responseSchema cannot be used: {first.rule}: {first.message}"
    if any(issue.keyword == "max-steps" for issue in issues):
        return f"the interrupt's responseSchema costs more than {SCHEMA_STEPS} steps to evaluate"
    return issues


def _fits(payload: Any, schema: dict[str, Any]) -> bool:
    """Whether the payload fits the schema; a schema the kit cannot use judges nothing."""
    issues = schema_issues(payload, schema)
    return isinstance(issues, str) or not issues
