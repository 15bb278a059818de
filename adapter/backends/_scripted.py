"""A deterministic backend for demos and tests: rules instead of a model, no network, no key."""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from ag_ui.core import AssistantMessage, Message, ToolMessage, UserMessage

from adapter._ids import new_id
from adapter._limits import loads
from adapter.backends._seam import BackendItem, ModelRequest, TextDelta, ToolCall

Arguments: TypeAlias = Mapping[str, Any] | Callable[["Progress"], Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class Call:
    """A tool call a rule makes.

    String argument values may name the pattern's groups: "{1}", "{order}". A callable computes the
    arguments from the rule's progress: its match and the answers of the steps before.
    """

    name: str
    arguments: Arguments = field(default_factory=dict)

    def render(self, progress: Progress) -> ToolCall:
        """The call with its arguments filled in, under a fresh id."""
        raw = self.arguments(progress) if callable(self.arguments) else self.arguments
        groups = _groups(progress.match)
        filled = {k: _fill(v, groups) if isinstance(v, str) else v for k, v in raw.items()}
        return ToolCall(id=new_id("call"), name=self.name, arguments=json.dumps(filled))


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """A tool call the rule made, with the answer it got."""

    name: str
    arguments: dict[str, Any]
    content: str
    error: str | None

    @property
    def ok(self) -> bool:
        """True when the call ran and succeeded."""
        return self.error is None


@dataclass(frozen=True, slots=True)
class Progress:
    """Where a rule stands in the current turn: its match and the answers so far."""

    match: re.Match[str]
    outcomes: list[ToolOutcome]
    request: ModelRequest | None = None
    """The request being answered: its context and state, for rules that read them."""

    @property
    def failed(self) -> bool:
        """True when any call was declined, cancelled or failed."""
        return any(not outcome.ok for outcome in self.outcomes)

    def result(self, name: str) -> Any:
        """The latest answer of the tool called `name`, parsed as JSON when it is JSON; None if none."""
        outcome = next((o for o in reversed(self.outcomes) if o.name == name), None)
        if outcome is None:
            return None
        try:
            return json.loads(outcome.content)
        except ValueError:
            return outcome.content


Reply: TypeAlias = str | Callable[[Progress], str]


@dataclass(frozen=True, slots=True)
class Rule:
    """When the latest user message matches `pattern`, make `steps` of calls, then say `reply`.

    Each step's calls are made together (in parallel); the next step comes once they are all
    answered. A declined, cancelled or failed call skips the remaining steps. A string reply may
    name the pattern's groups, like a call's arguments: "{1}", "{order}".
    """

    pattern: str
    steps: Sequence[Sequence[Call]] = ()
    reply: Reply | None = None
    say: str = ""
    """Text the first step says before its calls."""

    def match(self, text: str) -> re.Match[str] | None:
        """Match the user's text, case-insensitively, anywhere in it."""
        return re.search(self.pattern, text, re.IGNORECASE)


class ScriptedBackend:
    """A backend that follows rules, for demos and tests. It records the latest requests it receives.

    Args:
        rules: Tried in order against the latest user message; the first match drives the turn.
        fallback: What to say when no rule matches; by default it echoes the user.
        keep_requests: How many of the latest requests `requests` holds; older ones are dropped, so a
            long-running demo server does not grow without bound.
    """

    def __init__(self, rules: Sequence[Rule] = (), *, fallback: Reply | None = None, keep_requests: int = 1000) -> None:
        self.rules = list(rules)
        self.fallback = fallback
        self.requests: deque[ModelRequest] = deque(maxlen=keep_requests)
        """The latest `keep_requests` requests, oldest first (a deque: index it, `len` it, iterate it)."""

    async def stream(self, request: ModelRequest) -> AsyncIterator[BackendItem]:
        """Produce the next step of whichever rule the latest user message matches."""
        self.requests.append(request)
        text, calls = self._next_step(request)
        for delta in split_deltas(text):
            yield TextDelta(delta)
        for call in calls:
            yield call

    def _next_step(self, request: ModelRequest) -> tuple[str, list[ToolCall]]:
        messages = request.messages
        user_text, since = _latest_user_turn(messages)
        for rule in self.rules:
            match = rule.match(user_text)
            if match is None:
                continue
            progress = Progress(match, _outcomes(since), request)
            rounds = sum(1 for m in since if isinstance(m, AssistantMessage) and m.tool_calls)
            if rounds < len(rule.steps) and not progress.failed:
                return (rule.say if rounds == 0 else ""), [c.render(progress) for c in rule.steps[rounds]]
            return _render(rule.reply, progress), []
        if self.fallback is None:
            return (f"You said: {user_text}" if user_text else "Hello! How can I help?"), []
        everything = re.match(r".*", user_text, re.DOTALL)
        assert everything is not None  # ".*" matches any text
        return _render(self.fallback, Progress(everything, _outcomes(since), request)), []


def _groups(match: re.Match[str]) -> dict[str, str]:
    groups = {str(i): g or "" for i, g in enumerate((match.group(0), *match.groups()))}
    groups.update({k: v or "" for k, v in match.groupdict().items()})
    return groups


def _fill(template: str, groups: Mapping[str, str]) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: groups.get(m[1], m[0]), template)


def split_deltas(text: str) -> list[str]:
    """Split text into word-sized deltas, so that even short replies stream in several pieces."""
    return re.findall(r"\S+\s*|\s+", text)


def summarize(progress: Progress) -> str:
    """A reply that states every call's answer: what a model would say after its tools returned."""
    if not progress.outcomes:
        return "Done."
    parts = []
    for outcome in progress.outcomes:
        if outcome.ok:
            parts.append(f"{outcome.name} returned {outcome.content}")
        else:
            parts.append(f"{outcome.name} was not completed ({outcome.error}): {outcome.content}")
    return "; ".join(parts) + "."


def _render(reply: Reply | None, progress: Progress) -> str:
    if reply is None:
        return summarize(progress)
    if callable(reply):
        return reply(progress)
    return _fill(reply, _groups(progress.match))


def _latest_user_turn(messages: Sequence[Message]) -> tuple[str, list[Message]]:
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, UserMessage):
            content = message.content
            text = content if isinstance(content, str) else " ".join(getattr(p, "text", "") for p in content)
            return text, list(messages[index + 1 :])
    return "", list(messages)


def _outcomes(since: Sequence[Message]) -> list[ToolOutcome]:
    calls = {
        call.id: call for message in since if isinstance(message, AssistantMessage) for call in message.tool_calls or []
    }
    outcomes = []
    for message in since:
        if isinstance(message, ToolMessage) and message.tool_call_id in calls:
            call = calls[message.tool_call_id]
            content = message.content if isinstance(message.content, str) else "(parts)"
            try:
                arguments = loads(call.function.arguments or "{}")
            except ValueError:
                arguments = {}
            outcomes.append(ToolOutcome(call.function.name, arguments, content, message.error))
    return outcomes
