"""The approval property, over any sequence of calls, answers, revocations, policy changes and restarts.

A call runs only if a person allowed to approve approved it, or a grant made by someone allowed to approve at
that moment covered its tool (and the tool takes grants), or its rule said it needs no approval; each call runs
at most once; a call a grant let through leaves a record naming the grant; the thread read lists the grants.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Coroutine
from typing import Any

import pytest
from agui import resolved
from approvals_kit import Chat, approvals, interrupts
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from adapter import Adapter, Forbidden, ToolContext, tool
from adapter.backends import Call, Rule, ScriptedBackend
from adapter.stores import MemoryStore

GRANTABLE = {"gated": True, "ruled": True, "locked": False}
"""Which tools take grants at first; a redeploy may change `locked` (a grant made before stays stored, and void)."""
PEOPLE = ("alice", "bob", "carol")  # alice owns and runs; carol reads and never approves
OUTCOMES = ("yes", "no", "boom")  # what the rule of `ruled` says: asks, runs at once, raises (and so asks)


def rules() -> list[Rule]:
    return [
        Rule(
            rf"call {name} (\d+) (\w+)",
            steps=[[Call(name, lambda p: {"label": int(p.match[1]), "needs": p.match[2]})]],
            reply="done",
        )
        for name in GRANTABLE
    ]


class ApprovalMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.store = MemoryStore()
        self.ran: list[int] = []
        self.approvers = {"alice", "bob"}
        self.grants: dict[str, str] = {}
        self.grantable = dict(GRANTABLE)
        self.waiting: tuple[str, str, int] | None = None  # interrupt id, tool, label
        self.expected: list[int] = []
        self.labels = itertools.count(1)
        self.chat = Chat(self.adapter(), principal="alice")

    def adapter(self) -> Adapter:
        def rule_of_ruled(ctx: ToolContext, arguments: dict[str, Any]) -> bool:
            if arguments["needs"] == "boom":
                raise RuntimeError("the rule failed")
            return bool(arguments["needs"] == "yes")

        def make(name: str, asks: Any) -> Any:
            def run(label: int, needs: str) -> str:
                self.ran.append(label)
                return f"ran {label}"

            return tool(name=name, description=name, requires_approval=asks, grantable=self.grantable[name])(run)

        def policy(principal: str | None, owner: str | None, action: str) -> bool:
            return principal in self.approvers if action == "approve" else principal in PEOPLE

        tools = [make("gated", True), make("ruled", rule_of_ruled), make("locked", True)]
        return Adapter(ScriptedBackend(rules()), tools=tools, store=self.store, authorize=policy)

    def run(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        return self.loop.run_until_complete(coroutine)

    def teardown(self) -> None:
        self.loop.close()

    def covered(self, name: str) -> str | None:
        """Who granted `name`, if a grant covers it now: the tool takes grants, and its maker may approve."""
        maker = self.grants.get(name)
        return maker if self.grantable[name] and maker in self.approvers else None

    @precondition(lambda self: self.waiting is None)
    @rule(name=st.sampled_from(sorted(GRANTABLE)), needs=st.sampled_from(OUTCOMES))
    def call(self, name: str, needs: str) -> None:
        label = next(self.labels)
        events = self.run(self.chat.say(f"call {name} {label} {needs}"))

        asks = name != "ruled" or needs != "no"
        maker = self.covered(name) if asks else None
        if asks and maker is None:
            (interrupt,) = interrupts(events)
            self.waiting = (interrupt["id"], name, label)
            assert approvals(events) == []
            return
        self.expected.append(label)
        assert interrupts(events) == []
        made = [record["grant"] for record in approvals(events)]
        assert made == ([] if maker is None else [{**made[0], "tool": name, "grantedBy": maker}])

    @precondition(lambda self: self.waiting is not None)
    @rule(who=st.sampled_from(PEOPLE), approved=st.booleans(), remember=st.booleans())
    def answer(self, who: str, approved: bool, remember: bool) -> None:
        assert self.waiting is not None
        interrupt_id, name, label = self.waiting
        payload: dict[str, Any] = {"approved": approved, **({"remember": "thread"} if remember else {})}
        try:
            events = self.run(self.chat.resume(resolved(interrupt_id, payload), principal=who))
        except Forbidden as refused:
            assert who not in self.approvers
            assert refused.code == "APPROVAL_FORBIDDEN"
            return
        assert who in self.approvers
        if approved and remember and not self.grantable[name]:
            assert events[-1]["code"] == "RESUME_GRANT_REFUSED"
            return
        assert events[-1]["type"] == "RUN_FINISHED"
        self.waiting = None
        if approved:
            self.expected.append(label)
            if remember:
                self.grants[name] = who

    @rule(who=st.sampled_from(PEOPLE), name=st.sampled_from(sorted(GRANTABLE)))
    def revoke(self, who: str, name: str) -> None:
        try:
            revoked = self.run(self.chat.adapter.revoke_grant(self.chat.thread_id, name, principal=who))
        except Forbidden as refused:
            assert who not in self.approvers
            assert refused.code == "APPROVAL_FORBIDDEN"
            return
        if not self.chat.replies:  # no thread yet: as for any unknown thread
            assert revoked is None
            return
        assert who in self.approvers
        assert revoked is (name in self.grants)
        self.grants.pop(name, None)

    @rule()
    def bob_changes_role(self) -> None:
        self.approvers ^= {"bob"}

    @rule()
    def restart(self) -> None:
        self.chat.adapter = self.adapter()  # another process on the same store: nothing of the last one is kept

    @rule()
    def redeploy_with_locked_grantable_or_not(self) -> None:
        self.grantable["locked"] = not self.grantable["locked"]
        self.chat.adapter = self.adapter()

    @invariant()
    def each_call_ran_once_and_only_as_allowed(self) -> None:
        assert self.ran == self.expected
        assert len(set(self.ran)) == len(self.ran)

    @invariant()
    def the_thread_lists_the_grants(self) -> None:
        read = self.run(self.chat.adapter.thread(self.chat.thread_id, principal="alice"))
        listed = {} if read is None else {grant["tool"]: grant["grantedBy"] for grant in read["grants"]}
        assert listed == self.grants


TestApprovals = ApprovalMachine.TestCase
TestApprovals.settings = settings(
    max_examples=150,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[*settings().suppress_health_check, HealthCheck.too_slow],
)


# Sequences the search may take long to draw, replayed on every run: each breaks the property if one check is lost.
SEQUENCES = {
    "a grant whose maker lost the right to approve": [
        ("call", {"name": "gated", "needs": "yes"}),
        ("answer", {"who": "bob", "approved": True, "remember": True}),
        ("bob_changes_role", {}),
        ("call", {"name": "gated", "needs": "yes"}),
    ],
    "a grant made while the tool took grants": [
        ("redeploy_with_locked_grantable_or_not", {}),
        ("call", {"name": "locked", "needs": "yes"}),
        ("answer", {"who": "alice", "approved": True, "remember": True}),
        ("redeploy_with_locked_grantable_or_not", {}),
        ("call", {"name": "locked", "needs": "yes"}),
    ],
    "a revoked grant, across a restart": [
        ("call", {"name": "ruled", "needs": "boom"}),
        ("answer", {"who": "alice", "approved": True, "remember": True}),
        ("call", {"name": "ruled", "needs": "yes"}),
        ("restart", {}),
        ("revoke", {"who": "bob", "name": "ruled"}),
        ("call", {"name": "ruled", "needs": "yes"}),
        ("answer", {"who": "carol", "approved": True, "remember": False}),
        ("answer", {"who": "alice", "approved": False, "remember": True}),
        ("call", {"name": "ruled", "needs": "no"}),
    ],
}


@pytest.mark.parametrize("steps", list(SEQUENCES.values()), ids=list(SEQUENCES))
def test_a_sequence_keeps_the_property(steps: list[tuple[str, dict[str, Any]]]) -> None:
    machine = ApprovalMachine()
    try:
        for name, arguments in steps:
            getattr(machine, name)(**arguments)
            machine.each_call_ran_once_and_only_as_allowed()
            machine.the_thread_lists_the_grants()
    finally:
        machine.teardown()
