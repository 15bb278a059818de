"""Backends: the agents the adapter can put AG-UI in front of."""

from adapter.backends._openai import OpenAIChatBackend
from adapter.backends._scripted import Call, Progress, Rule, ScriptedBackend, ToolOutcome, split_deltas, summarize
from adapter.backends._upstream import AGUIUpstream

__all__ = [
    "AGUIUpstream",
    "Call",
    "OpenAIChatBackend",
    "Progress",
    "Rule",
    "ScriptedBackend",
    "ToolOutcome",
    "split_deltas",
    "summarize",
]
