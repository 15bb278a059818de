"""Backends: the agents the adapter can put AG-UI in front of."""

from adapter.backends._scripted import Call, Progress, Rule, ScriptedBackend, ToolOutcome, split_deltas, summarize

__all__ = ["Call", "Progress", "Rule", "ScriptedBackend", "ToolOutcome", "split_deltas", "summarize"]
