"""What bench_growth.py sends and how it reports: the conversation a client holds, and the rows of one run."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bench_adapter import Row


def prior_turns(count: int) -> list[dict[str, Any]]:
    """`count` settled turns of a conversation, as a client sends them back."""
    messages: list[dict[str, Any]] = []
    for k in range(count):
        call = {"id": f"call-{k}", "type": "function", "function": {"name": "navigate", "arguments": '{"path": "/p"}'}}
        messages += [
            {"id": f"u-{k}", "role": "user", "content": f"go to page{k}, the one with the order list"},
            {"id": f"a-{k}", "role": "assistant", "toolCalls": [call]},
            {"id": f"t-{k}", "role": "tool", "toolCallId": f"call-{k}", "content": '{"navigated": true}'},
            {"id": f"r-{k}", "role": "assistant", "content": "Opened it. The order list is on the page now."},
        ]
    return messages


def held_by_client(sent: list[dict[str, Any]], events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages a client holds after a run that ended calling its tool: what it sent, plus the call."""
    calls = [e for e in events if e["type"] == "TOOL_CALL_START"]
    args = {e["toolCallId"]: e["delta"] for e in events if e["type"] == "TOOL_CALL_ARGS"}
    assistant = {
        "id": calls[0]["parentMessageId"],
        "role": "assistant",
        "toolCalls": [
            {"id": c["toolCallId"], "type": "function", "function": {"name": c["toolCallName"], "arguments": ""}}
            for c in calls
        ],
    }
    for call in assistant["toolCalls"]:
        call["function"]["arguments"] = args.get(call["id"], "")
    return [*sent, assistant]


def settled_messages(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tool results and assistant text a finished resume streamed, as a client adds them to its messages."""
    messages: list[dict[str, Any]] = []
    for event in events:
        if event["type"] == "TOOL_CALL_RESULT":
            result = {"id": event["messageId"], "role": "tool", "toolCallId": event["toolCallId"]}
            messages.append({**result, "content": event["content"]})
        elif event["type"] == "TEXT_MESSAGE_START":
            messages.append({"id": event["messageId"], "role": "assistant", "content": ""})
        elif event["type"] == "TEXT_MESSAGE_CONTENT":
            messages[-1]["content"] += event["delta"]
    return messages


@dataclass
class Rows:
    """The rows of one run: each figure per server name, the baseline's beside every adapter's."""

    names: list[str]
    rows: list[tuple[str, str, dict[str, float], float | None]] = field(default_factory=list)

    def add(self, workload: str, metric: str, figures: dict[str, float], target: float | None = None) -> None:
        self.rows.append((workload, metric, figures, target))

    def of(self, name: str) -> list[Row]:
        """The rows of the adapter `name` against the baseline, as `bench_adapter` prints them."""
        return [Row(w, m, f[name], f["baseline"], ("<=", t) if t else None) for w, m, f, t in self.rows]

    def table(self) -> str:
        adapters = [name for name in self.names if name != "baseline"]
        head = f"{'workload':<34} {'metric':<24}" + "".join(f" {n:>9} {'ratio':>6}" for n in adapters)
        lines = [head + f" {'baseline':>9}  target", "-" * (len(head) + 20)]
        for workload, metric, figures, target in self.rows:
            line = f"{workload:<34} {metric:<24}"
            for name in adapters:
                line += f" {figures[name]:>9.2f} {figures[name] / figures['baseline']:>5.2f}x"
            verdict = "(info)"
            if target is not None:
                met = figures["adapter"] / figures["baseline"] <= target
                verdict = f"<= {target:.1f}x {'met' if met else 'MISSED'}"
            lines.append(line + f" {figures['baseline']:>9.2f}  {verdict}")
        return "\n".join(lines)
