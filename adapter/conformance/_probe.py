"""What every case shares: the options, the registry, and the two flows most cases start from.

A case is black-box: it sees only what a consumer sees (HTTP status, SSE events), unless the target offers
the exact channel (`--executions-url`). How the kit tells that a tool ran is in `_evidence`.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn, TypeAlias

import httpx

from adapter.client import GatedCall, gated_call
from adapter.conformance._approvals import NoAnswer, approval_answer
from adapter.conformance._client import Client, Reply, Thread, resolved
from adapter.conformance._evidence import (
    MAX_PAGE_BODY,
    ExecutionCounter,
    ExecutionsUnavailable,
    SideBodyRefused,
    Watch,
    executed,
    get_json,
    tool_answers,
)
from adapter.conformance._report import Status

Verdict: TypeAlias = tuple[Status, str]
Restart: TypeAlias = Callable[[], Awaitable[None]]
_MAX_PAGES = 20  # pages of a thread read the kit follows; its threads are a few messages long

PERMISSIVE_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}
"""The declared client tool's parameters: any object."""


class Skip(Exception):
    """The target lacks what a case needs; the message says what."""


class Fail(Exception):
    """What a case needed to set up already broke a rule (a gated tool ran with no approval); the message says how."""


@dataclass(frozen=True, slots=True)
class Options:
    """How to drive the target: the client tool to declare and the messages that make its agent act."""

    frontend_tool: str
    frontend_message: str
    approval_message: str
    parallel_approval_message: str | None = None
    restart: Restart | None = None
    executions_url: str | None = None
    thread_url: str | None = None
    """`GET` it with `{thread}` replaced by a thread id: `{"messages": [...]}`, the thread as the server keeps it.
    None: the kit tries this adapter's own route, `<url>/threads/{thread}`."""


@dataclass(frozen=True, slots=True)
class Case:
    """One black-box case: its id, the AG-UI rules it checks, and how to run it."""

    id: str
    rules: tuple[str, ...]
    run: Callable[[Probe], Awaitable[Verdict]]
    summary: str
    part: str = ""
    """The part of the contract the case grades (`approvals`, `client tools`): a part none of whose cases could
    be graded is reported `not graded`, which is not a pass."""

    @property
    def module(self) -> str:
        """The module that defines the case: cases run module by module, in registration order."""
        return self.run.__module__


CASES: list[Case] = []


def case(
    case_id: str, *rules: str, part: str = ""
) -> Callable[[Callable[[Probe], Awaitable[Verdict]]], Callable[..., Any]]:
    """Register a case; cases run in the order they are registered."""

    def register(run: Callable[[Probe], Awaitable[Verdict]]) -> Callable[[Probe], Awaitable[Verdict]]:
        CASES.append(Case(case_id, rules, run, (run.__doc__ or "").strip().splitlines()[0], part))
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
        self.counter = (
            ExecutionCounter(options.executions_url, client.http, client.limits.event_timeout)
            if options.executions_url
            else None
        )
        self._setup: dict[str, str] = {}
        """Messages found not to do what they are for, with what came back instead."""
        self._broken: dict[str, str] = {}
        """Messages found to break a rule as they are sent (a gated tool that ran unasked), with how."""
        self.tries: Counter[str] = Counter()
        """How many times each setup message was sent."""
        self.refusals: Counter[str] = Counter()
        """How many of those sends the target refused."""
        self._gated_names: set[str] = set()
        """The tools seen waiting for approval: a result for one of them, unasked, is the gated tool running."""
        self._stateless: tuple[str | None] | None = None
        """Why the target carries nothing across the gap, once the transplant probe ran (None inside: it does)."""
        self.answers: dict[str, str] = {}
        """The approval answers the current case sent, each with how the interrupt's schema led to it."""

    def answer(self, interrupt: Mapping[str, Any], approve: bool = True) -> Any:
        """The payload that approves (or denies) `interrupt`, as its `responseSchema` asks; Skip when none fits.

        The case's evidence names each answer it sent (`_check`).
        """
        try:
            built = approval_answer(interrupt, approve)
        except NoAnswer as error:
            raise Skip(str(error)) from None
        self.answers.setdefault(json.dumps(built.payload), built.how)
        return built.payload

    async def unless_stateless(self, detail: str) -> Verdict:
        """A failure only a target that keeps state across runs can avoid: `fail`, or `warn` for one that keeps none.

        AG-UI 1.1 (Interrupts and Resume): "A producer that carries nothing across the gap is conformant"; replays,
        partial or duplicate resumes and a history's second answer are then the consumer's to prevent.
        """
        why = await self.stateless()
        if why is None:
            return "fail", detail
        return "warn", f"{detail}; AG-UI 1.1 allows it: the target carries nothing across the gap ({why})"

    async def stateless(self) -> str | None:
        """How the target showed that it keeps nothing across runs, or None when it keeps something (or cannot tell).

        The transplant: an approval opened on one thread is resumed on a new thread, with the first thread's history.
        A target that keeps the interrupts it raised refuses it, or issues an interrupt again; one that runs the
        gated tool took everything from the input. Asked once, when a case first needs it.
        """
        if self._stateless is None:
            self._stateless = (await self._transplant(),)
        return self._stateless[0]

    async def _transplant(self) -> str | None:
        try:
            approval = await self.approval()
            thread = self.thread()
            thread.messages = [dict(m) for m in approval.thread.messages]
            watch = await self.watch(thread, approval.gate())
            reply = await thread.resume(resolved(str(approval.first.get("id")), self.answer(approval.first)))
            ran = await watch.ran(reply)
        except (Skip, Fail, ExecutionsUnavailable):
            return None
        if refused(reply) or reply.wire_interrupts or not ran.count:
            return None
        return f"a resume of another thread's approval, sent with that thread's history on a new thread, ran it: {ran}"

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

    async def read_thread(self, thread_id: str) -> list[dict[str, Any]] | None:
        """The thread's messages as the server keeps them (its thread read), or None when it has none.

        `--thread-url` names the read; without it the kit tries this adapter's `GET <url>/threads/{thread}`. Only a
        200 answer `{"messages": [...]}` counts; its pages (`next`, `?after=`) are followed.
        """
        template = self.options.thread_url or self.client.url.rstrip("/") + "/threads/{thread}"
        url = template.replace("{thread}", thread_id)
        messages: list[dict[str, Any]] = []
        params: dict[str, str] = {}
        for _ in range(_MAX_PAGES):
            try:
                timeout = self.client.limits.event_timeout
                status, body = await get_json(self.client.http, url, params, max_bytes=MAX_PAGE_BODY, timeout=timeout)
            except (httpx.HTTPError, SideBodyRefused):
                return None
            if status != 200:
                return None
            if not isinstance(body, Mapping) or not isinstance(body.get("messages"), list):
                return None
            page = body["messages"]
            messages += [m for m in page if isinstance(m, dict)]
            after = body.get("next")
            if not isinstance(after, str) or not after:
                break
            params = {"after": after}
        return messages

    async def frontend(self) -> Frontend:
        """Send the frontend message on a fresh thread; Skip unless the agent called the client tool."""
        self._refuse("--frontend-message")
        thread = self.thread()
        reply = await self._send(thread, "--frontend-message", self.options.frontend_message)
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
        before = await self.counter.count(thread.id) if self.counter is not None else 0
        reply = await self._send(thread, flag, message or self.options.approval_message)
        interrupts = reply.wire_interrupts
        if not interrupts:
            unasked = await self._ran_unasked(thread, reply, before)
            if unasked:
                self._broke(flag, f"ran {unasked} with no approval at all ({reply.ending()})")
            self._fail(flag, f"ended with {reply.ending()}, not an interrupt", reply)
        ids = [call.id for call in reply.calls]
        answered = {str(result.get("toolCallId")) for result in reply.of("TOOL_CALL_RESULT")}
        gates = {str(i.get("id")): gated_call(i, ids, answered) for i in interrupts}
        names = {call.id: call.name for call in reply.calls}
        client = [g.id for g in gates.values() if g and names.get(g.id) == self.options.frontend_tool]
        if client:
            self._fail(flag, f"opened a client-tool interrupt ({self.options.frontend_tool} call {client[0]})", reply)
        early = [f"{names.get(g.id, 'a gated tool')} (call {g.id})" for g in gates.values() if g and _ran(reply, g.id)]
        if early:
            self._broke(flag, f"ran {early[0]} before anyone approved it: its result came with the approval request")
        if len(interrupts) < at_least:
            self._fail(flag, f"opened {len(interrupts)} approval(s); the case needs {at_least}", reply)
        self._gated_names |= {names[g.id] for g in gates.values() if g and g.id in names}
        return Approval(thread, reply, interrupts, gates)

    async def _send(self, thread: Thread, flag: str, message: str) -> Reply:
        """Send a setup message, counting the tries and the refusals (the `runs-accepted` case reads them)."""
        reply = await thread.say(message)
        self.tries[flag] += 1
        self.refusals[flag] += refused(reply)
        return reply

    async def _ran_unasked(self, thread: Thread, reply: Reply, before: int) -> str:
        """What ran in a run that asked for no approval: exact with the counter, else from the results; "" for nothing.

        Without the counter, a result that reads as a run of a tool seen waiting for approval in an earlier case is
        the gated tool; when no approval has been seen yet, a run of any server tool is taken for it (inferred).
        """
        if self.counter is not None:
            count = await self.counter.count(thread.id) - before
            return f"a tool {count} time(s) (--executions-url, exact)" if count else ""
        names = {call.id: call.name for call in reply.calls}
        server = [
            (name, call_id, where)
            for call_id, name in names.items()
            if name != self.options.frontend_tool
            for where, result in tool_answers(reply, call_id)
            if executed(result)
        ]
        gated = [each for each in server if each[0] in self._gated_names]
        if gated:
            name, call_id, where = gated[0]
            return f"{name}, a tool it asks approval for (call {call_id}: {where})"
        if server and not self._gated_names:
            name, call_id, where = server[0]
            return f"{name} (call {call_id}: {where}; inferred to be the gated tool)"
        return ""

    def _refuse(self, flag: str) -> None:
        """Skip (or fail) at once when an earlier case found that `flag`'s message does not do what it is for."""
        if flag in self._broken:
            raise Fail(self._broken[flag])
        if flag in self._setup:
            raise Skip(self._setup[flag])

    def _broke(self, flag: str, what: str) -> NoReturn:
        """Fail: sending the message already broke a rule. Later cases fail at once, without sending it again."""
        self._broken[flag] = f"setup: {flag} {what}; a gated tool must wait for its answer"
        raise Fail(self._broken[flag])

    def _fail(self, flag: str, what: str, reply: Reply) -> NoReturn:
        """Skip: the message did not do what it is for.

        A plain answer is remembered, so later cases skip at once; a refusal (an HTTP error, a RUN_ERROR) may
        be passing, so the next case tries again.
        """
        detail = f"setup: {flag} {what}, so this case cannot run"
        if not refused(reply):
            self._setup[flag] = detail
        raise Skip(detail)


def _ran(reply: Reply, call_id: str) -> bool:
    """Whether the reply reports a run of `call_id` (a result that reads as one)."""
    return any(executed(result) for _, result in tool_answers(reply, call_id))


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
