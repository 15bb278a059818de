"""An in-process chat with one adapter, for the approval suites (rules, reasons, grants): say, resume, read."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ag_ui.core import RunAgentInput
from agui import apply_events, collect, new_id, run_input, user

from adapter import Adapter


@dataclass
class Chat:
    """One thread of `adapter`, kept as a client keeps it; each run's events are kept in `replies`."""

    adapter: Adapter
    principal: str | None = None
    thread_id: str = field(default_factory=lambda: new_id("thread"))
    messages: list[dict[str, Any]] = field(default_factory=list)
    replies: list[list[dict[str, Any]]] = field(default_factory=list)

    async def say(self, text: str) -> list[dict[str, Any]]:
        """Send a new user message; the run's events."""
        self.messages.append(user(text))
        return await self.send()

    async def resume(self, *entries: Mapping[str, Any], principal: str | None = None) -> list[dict[str, Any]]:
        """Answer open interrupts (as `principal`, or the chat's own); the run's events."""
        return await self.send(resume=list(entries), principal=principal)

    async def send(
        self, *, resume: Sequence[Mapping[str, Any]] | None = None, principal: str | None = None
    ) -> list[dict[str, Any]]:
        body = RunAgentInput.model_validate(run_input(self.thread_id, self.messages, resume=resume))
        who = principal if principal is not None else self.principal
        events = await collect(self.adapter.run(body, principal=who), resumed=resume is not None)
        if events[-1]["type"] == "RUN_FINISHED":
            self.messages = apply_events(self.messages, events)
        self.replies.append(events)
        return events


def of(events: Sequence[Mapping[str, Any]], kind: str) -> list[dict[str, Any]]:
    """The events of one type, in order."""
    return [dict(event) for event in events if event["type"] == kind]


def interrupts(events: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The interrupts the run ended with; none when it ended otherwise."""
    outcome = events[-1].get("outcome") or {}
    return list(outcome.get("interrupts", [])) if outcome.get("type") == "interrupt" else []


def results(events: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The TOOL_CALL_RESULT events, in order."""
    return of(events, "TOOL_CALL_RESULT")


def approvals(events: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The contents of the `agent_approval` activity records the run streamed."""
    return [e["content"] for e in of(events, "ACTIVITY_SNAPSHOT") if e["activityType"] == "agent_approval"]
