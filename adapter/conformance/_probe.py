"""What every case shares: the options, the registry, and the two flows most cases start from.

A case is black-box: it sees only what a consumer sees (HTTP status, SSE events), unless the target offers
the exact channel (`--executions-url`). How the kit tells that a tool ran is in `_evidence`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn, TypeAlias

from adapter.client import GatedCall, gated_call
from adapter.conformance._client import Client, Reply, Thread
from adapter.conformance._evidence import ExecutionCounter, Watch
from adapter.conformance._report import Status

Verdict: TypeAlias = tuple[Status, str]
Restart: TypeAlias = Callable[[], Awaitable[None]]

APPROVE = {"approved": True}
DENY = {"approved": False}
PERMISSIVE_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}
"""The declared client tool's parameters: any object."""


class Skip(Exception):
    """The target lacks what a case needs; the message says what."""


@dataclass(frozen=True, slots=True)
class Options:
    """How to drive the target: the client tool to declare and the messages that make its agent act."""

    frontend_tool: str
    frontend_message: str
    approval_message: str
    parallel_approval_message: str | None = None
    restart: Restart | None = None
    executions_url: str | None = None


@dataclass(frozen=True, slots=True)
class Case:
    """One black-box case: its id, the AG-UI rules it checks, and how to run it."""

    id: str
    rules: tuple[str, ...]
    run: Callable[[Probe], Awaitable[Verdict]]
    summary: str

    @property
    def module(self) -> str:
        """The module that defines the case: cases run module by module, in registration order."""
        return self.run.__module__


CASES: list[Case] = []


def case(case_id: str, *rules: str) -> Callable[[Callable[[Probe], Awaitable[Verdict]]], Callable[..., Any]]:
    """Register a case; cases run in the order they are registered."""

    def register(run: Callable[[Probe], Awaitable[Verdict]]) -> Callable[[Probe], Awaitable[Verdict]]:
        CASES.append(Case(case_id, rules, run, (run.__doc__ or "").strip().splitlines()[0]))
        return run

    return register


@dataclass(slots=True)
class Frontend:
    """A run that called the declared client tool: how it ended, and the call."""

    thread: Thread
    reply: Reply
    call_id: str
    interrupt: dict[str, Any] | None
    """The interrupt about the call, when the run ended with one; None for a pending call."""


@dataclass(slots=True)
class Approval:
    """A run that stopped for approval: the interrupts and the calls they gate."""

    thread: Thread
    reply: Reply
    interrupts: list[dict[str, Any]]
    gates: dict[str, GatedCall | None] = field(default_factory=dict)
    """The call each interrupt gates, by interrupt id; None when nothing names or leaves one."""

    @property
    def first(self) -> dict[str, Any]:
        """The first interrupt."""
        return self.interrupts[0]

    def gate(self, interrupt: dict[str, Any] | None = None) -> GatedCall | None:
        """The call an interrupt (the first by default) gates."""
        return self.gates.get(str((interrupt or self.first).get("id")))

    def call_of(self, interrupt: dict[str, Any] | None = None) -> str | None:
        """The id of the call an interrupt gates."""
        gate = self.gate(interrupt)
        return gate.id if gate else None


class Probe:
    """The target, the options, and the flows the cases share."""

    def __init__(self, client: Client, options: Options) -> None:
        self.client = client
        self.options = options
        self.counter = ExecutionCounter(options.executions_url, client.http) if options.executions_url else None
        self._setup: dict[str, str] = {}
        """Messages found not to do what they are for, with what came back instead."""

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The client tool the kit declares, with a permissive schema."""
        name = self.options.frontend_tool
        return [{"name": name, "description": f"The client's {name}.", "parameters": PERMISSIVE_SCHEMA}]

    def thread(self) -> Thread:
        """A fresh thread that declares the client tool."""
        return self.client.thread(tools=self.tools)

    async def watch(self, thread: Thread, call: GatedCall | None) -> Watch:
        """Watch `thread` for runs of `call` from now on."""
        client_calls = {c.id for run in thread.runs for c in run.calls if c.name == self.options.frontend_tool}
        return await Watch.start(thread, call, self.counter, client_calls)

    async def frontend(self) -> Frontend:
        """Send the frontend message on a fresh thread; Skip unless the agent called the client tool."""
        self._refuse("--frontend-message")
        thread = self.thread()
        reply = await thread.say(self.options.frontend_message)
        calls = [call for call in reply.calls if call.name == self.options.frontend_tool]
        if not calls:
            self._fail("--frontend-message", f"did not call {self.options.frontend_tool} ({reply.ending()})", reply)
        call_id = calls[-1].id
        interrupt = next((i for i in reply.wire_interrupts if _gates(i, reply, call_id)), None)
        return Frontend(thread, reply, call_id, interrupt)

    async def approval(self, message: str | None = None, *, at_least: int = 1) -> Approval:
        """Send an approval message on a fresh thread; Skip unless it opens approvals of server tools."""
        flag = "--parallel-approval-message" if message else "--approval-message"
        self._refuse(flag)
        thread = self.thread()
        reply = await thread.say(message or self.options.approval_message)
        interrupts = reply.wire_interrupts
        if not interrupts:
            self._fail(flag, f"ended with {reply.ending()}, not an interrupt", reply)
        ids = [call.id for call in reply.calls]
        answered = {str(result.get("toolCallId")) for result in reply.of("TOOL_CALL_RESULT")}
        gates = {str(i.get("id")): gated_call(i, ids, answered) for i in interrupts}
        names = {call.id: call.name for call in reply.calls}
        client = [g.id for g in gates.values() if g and names.get(g.id) == self.options.frontend_tool]
        if client:
            self._fail(flag, f"opened a client-tool interrupt ({self.options.frontend_tool} call {client[0]})", reply)
        if len(interrupts) < at_least:
            self._fail(flag, f"opened {len(interrupts)} approval(s); the case needs {at_least}", reply)
        return Approval(thread, reply, interrupts, gates)

    def _refuse(self, flag: str) -> None:
        """Skip at once when an earlier case found that `flag`'s message does not do what it is for."""
        if flag in self._setup:
            raise Skip(self._setup[flag])

    def _fail(self, flag: str, what: str, reply: Reply) -> NoReturn:
        """Skip: the message did not do what it is for.

        A plain answer is remembered, so later cases skip at once; a refusal (an HTTP error, a RUN_ERROR) may
        be passing, so the next case tries again.
        """
        detail = f"setup: {flag} {what}, so this case cannot run"
        if not refused(reply):
            self._setup[flag] = detail
        raise Skip(detail)


def _gates(interrupt: dict[str, Any], reply: Reply, call_id: str) -> bool:
    gate = gated_call(interrupt, [call.id for call in reply.calls])
    return gate is not None and gate.id == call_id


def refused(reply: Reply) -> bool:
    """True when the target refused the input: an HTTP error, or a RUN_ERROR."""
    return not reply.is_stream or reply.error is not None


def still_open(reply: Reply, interrupt_ids: set[str]) -> bool:
    """True when the run ended with an interrupt outcome that re-issues all of `interrupt_ids`."""
    return interrupt_ids <= {str(i.get("id")) for i in reply.wire_interrupts}


def held(reply: Reply, interrupt_ids: set[str]) -> Verdict | None:
    """The verdict for an input that must not close `interrupt_ids`: pass when refused or re-issued, else None."""
    if refused(reply):
        return "pass", f"refused: {reply.ending()}"
    if still_open(reply, interrupt_ids):
        return "pass", f"the open interrupt was issued again: {reply.ending()}"
    return None
