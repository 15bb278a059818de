"""What every case shares: the options, the registry, and the two flows most cases start from.

A case is black-box: it sees only what a consumer sees (HTTP status, SSE events). Whether a server
tool ran is read from its `TOOL_CALL_RESULT`: a result counts as an execution unless it is marked
as an error (`metadata.error`) or reads as a refusal ("denied", "declined", "cancelled", ...).
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from adapter.conformance._client import Client, Event, Reply, Thread
from adapter.conformance._report import Status

Verdict: TypeAlias = tuple[Status, str]
Restart: TypeAlias = Callable[[], Awaitable[None]]

APPROVE = {"approved": True}
DENY = {"approved": False}
PERMISSIVE_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}
"""The declared client tool's parameters: any object."""

_REFUSAL = re.compile(r"den(?:y|ied)|declin|reject|cancel|not (?:been )?(?:run|executed|approved)|did not run", re.I)


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
    """A run that stopped for approval: the interrupts and the calls they are about."""

    thread: Thread
    reply: Reply
    interrupts: list[dict[str, Any]]
    calls: dict[str, Event] = field(default_factory=dict)
    """The TOOL_CALL_START of each interrupt's call, by interrupt id."""

    @property
    def first(self) -> dict[str, Any]:
        """The first interrupt."""
        return self.interrupts[0]

    def call_of(self, interrupt: dict[str, Any]) -> str:
        """The tool call id an interrupt is about."""
        return str(interrupt.get("toolCallId"))


class Probe:
    """The target, the options, and the flows the cases share."""

    def __init__(self, client: Client, options: Options) -> None:
        self.client = client
        self.options = options

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The client tool the kit declares, with a permissive schema."""
        name = self.options.frontend_tool
        return [{"name": name, "description": f"The client's {name}.", "parameters": PERMISSIVE_SCHEMA}]

    def thread(self) -> Thread:
        """A fresh thread that declares the client tool."""
        return self.client.thread(self.tools)

    async def frontend(self) -> Frontend:
        """Send the frontend message on a fresh thread; Skip unless the agent called the client tool."""
        thread = self.thread()
        reply = await thread.say(self.options.frontend_message)
        calls = reply.calls(self.options.frontend_tool)
        if not calls:
            raise Skip(f"the frontend message did not call {self.options.frontend_tool} ({reply.ending()})")
        call_id = str(calls[-1]["toolCallId"])
        interrupt = next((i for i in reply.interrupts if i.get("toolCallId") == call_id), None)
        return Frontend(thread, reply, call_id, interrupt)

    async def approval(self, message: str | None = None, *, at_least: int = 1) -> Approval:
        """Send an approval message on a fresh thread; Skip unless the run ends with tool-bound interrupts."""
        thread = self.thread()
        reply = await thread.say(message or self.options.approval_message)
        interrupts = reply.interrupts
        if not interrupts:
            raise Skip(f"the approval message ended with {reply.ending()}, not an interrupt")
        if len(interrupts) < at_least:
            raise Skip(f"the message opened {len(interrupts)} interrupt(s); the case needs {at_least}")
        starts = {str(event.get("toolCallId")): event for event in reply.calls()}
        calls = {
            str(i.get("id")): starts[str(i.get("toolCallId"))] for i in interrupts if i.get("toolCallId") in starts
        }
        return Approval(thread, reply, interrupts, calls)


def executed(result: Event) -> bool:
    """Whether a TOOL_CALL_RESULT reports that the tool ran (see the module docstring)."""
    metadata = result.get("metadata")
    if isinstance(metadata, dict) and metadata.get("error"):
        return False
    content = result.get("content")
    return not _REFUSAL.search(content if isinstance(content, str) else json.dumps(content))


def executions(reply: Reply, call_id: str) -> int:
    """How many of the reply's results for `call_id` report a run of the tool."""
    return sum(executed(result) for result in reply.results(call_id))


def refused(reply: Reply) -> bool:
    """True when the target refused the input: an HTTP error, or a RUN_ERROR."""
    return not reply.is_stream or reply.error is not None


def still_open(reply: Reply, interrupt_ids: set[str]) -> bool:
    """True when the run ended with an interrupt outcome that re-issues all of `interrupt_ids`."""
    return interrupt_ids <= {str(i.get("id")) for i in reply.interrupts}


def held(reply: Reply, interrupt_ids: set[str]) -> Verdict | None:
    """The verdict for an input that must not close `interrupt_ids`: pass when refused or re-issued, else None."""
    if refused(reply):
        return "pass", f"refused: {reply.ending()}"
    if still_open(reply, interrupt_ids):
        return "pass", f"the open interrupt was issued again: {reply.ending()}"
    return None
