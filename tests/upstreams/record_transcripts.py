"""Record what Agno and Microsoft Agent Framework really stream around their approvals, over real HTTP.

Run from the project root with the project's interpreter (the framework servers run in .venv-agno and .venv-maf):

    .venv/bin/python tests/upstreams/record_transcripts.py

Each run of each scenario is written to tests/upstreams/transcripts/<framework>/<scenario>-<n>-<step>.jsonl,
one event per line, each line the `data:` text exactly as received, beside the RunAgentInput we posted
(`....request.json`). `summary.json` lists, per scenario, the refunds the framework really made. The client
side of each scenario is the plain AG-UI client's: the history it sends is the previous input's messages
with the run's events folded in (`adapter.client.fold_messages`), and the answer is a new message.
"""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

TESTS = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(TESTS), str(TESTS.parent)]

from adapter.client import SSEDecoder, fold_messages  # noqa: E402
from upstreams.kit import UpstreamServer  # noqa: E402

OUT = Path(__file__).resolve().parent / "transcripts"


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def body(thread: str, messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"threadId": thread, "runId": new_id("run"), "messages": messages, "tools": [], "context": [],
            "state": {}, "forwardedProps": {}, **extra}  # fmt: skip


def post(url: str, sent: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    """The `data:` texts of the response, exactly as received, and the events they hold."""
    decoder, texts = SSEDecoder(), []
    with httpx.stream("POST", url, json=sent, timeout=60) as response:
        response.raise_for_status()
        for chunk in response.iter_bytes():
            texts += [frame.text for frame in decoder.feed(chunk) if frame.text is not None]
    texts += [frame.text for frame in decoder.close() if frame.text is not None]
    return texts, [json.loads(text) for text in texts]


class Recorder:
    def __init__(self, framework: str, server: UpstreamServer, path: str) -> None:
        self.framework, self.server, self.url = framework, server, server.url + path
        self.summary: dict[str, Any] = {}

    def scenario(self, name: str, answer: Callable[[list[dict[str, Any]], list[dict[str, Any]]], dict[str, Any]],
                 *, follow_up: bool = False) -> None:  # fmt: skip
        """Ask for a refund, then send `answer(history, first_events)` as the next run (and a follow-up)."""
        self.server.clear()
        thread = new_id(f"{self.framework}-{name}")
        ask = body(thread, [{"id": new_id("user"), "role": "user", "content": "refund 5 euros please"}])
        asked = self.run(name, 1, "ask", ask)
        history = fold_messages(ask["messages"], asked)
        second = answer(history, asked)
        second["threadId"] = thread
        answered = self.run(name, 2, "answer", second)
        if follow_up:
            history = fold_messages(second["messages"], answered)
            later = body(thread, [*history, {"id": new_id("user"), "role": "user", "content": "thanks"}])
            self.run(name, 3, "follow-up", later)
        self.summary[name] = {"refunds": self.server.deleted()}

    def run(self, name: str, number: int, step: str, sent: dict[str, Any]) -> list[dict[str, Any]]:
        folder = OUT / self.framework
        folder.mkdir(parents=True, exist_ok=True)
        texts, events = post(self.url, sent)
        stem = folder / f"{name}-{number}-{step}"
        stem.with_suffix(".request.json").write_text(json.dumps(sent, indent=2) + "\n")
        stem.with_suffix(".jsonl").write_text("".join(f"{text}\n" for text in texts))
        return events


def calls(events: list[dict[str, Any]]) -> dict[str, str]:
    """The calls a run opened, by name."""
    return {e["toolCallName"]: e["toolCallId"] for e in events if e["type"] == "TOOL_CALL_START"}


def tool_message(call_id: str, content: dict[str, Any]) -> dict[str, Any]:
    return {"id": new_id("tool"), "role": "tool", "toolCallId": call_id, "content": json.dumps(content)}


def record_agno(server: UpstreamServer) -> dict[str, Any]:
    agno = Recorder("agno", server, "agui")

    def answering(content: dict[str, Any]) -> Callable[[list[dict[str, Any]], list[dict[str, Any]]], dict[str, Any]]:
        return lambda history, asked: body("", [*history, tool_message(calls(asked)["refund"], content)])

    agno.scenario("approve", answering({"accepted": True}), follow_up=True)
    agno.scenario("deny", answering({"accepted": False}), follow_up=True)
    agno.scenario("deny-with-note", answering({"accepted": False, "note": "not today"}))
    agno.scenario("plain-text-answer", lambda history, asked: body("", [*history, {
        "id": new_id("tool"), "role": "tool", "toolCallId": calls(asked)["refund"], "content": "yes"}]))  # fmt: skip
    return agno.summary


def record_maf(server: UpstreamServer) -> dict[str, Any]:
    maf = Recorder("maf", server, "")

    def resuming(entry: dict[str, Any]) -> Callable[[list[dict[str, Any]], list[dict[str, Any]]], dict[str, Any]]:
        def answer(history: list[dict[str, Any]], asked: list[dict[str, Any]]) -> dict[str, Any]:
            (interrupt,) = asked[-1]["outcome"]["interrupts"]
            return body("", history, resume=[{"interruptId": interrupt["id"], **entry}])

        return answer

    def telling(
        name: str, content: dict[str, Any]
    ) -> Callable[[list[dict[str, Any]], list[dict[str, Any]]], dict[str, Any]]:
        return lambda history, asked: body("", [*history, tool_message(calls(asked)[name], content)])

    maf.scenario("resume-approve", resuming({"status": "resolved", "payload": {"approved": True}}), follow_up=True)
    maf.scenario("resume-deny", resuming({"status": "resolved", "payload": {"approved": False}}), follow_up=True)
    maf.scenario("resume-cancel", resuming({"status": "cancelled"}))
    maf.scenario("toolmessage-refund-approve", telling("refund", {"accepted": True}), follow_up=True)
    maf.scenario("toolmessage-refund-deny", telling("refund", {"accepted": False}))
    maf.scenario("toolmessage-confirm-changes-approve", telling("confirm_changes", {"accepted": True}))

    def both(history: list[dict[str, Any]], asked: list[dict[str, Any]]) -> dict[str, Any]:
        sent = telling("confirm_changes", {"accepted": True})(history, asked)
        sent["resume"] = resuming({"status": "resolved", "payload": {"approved": True}})(history, asked)["resume"]
        return sent

    maf.scenario("resume-and-confirm-changes-toolmessage-approve", both)
    return maf.summary


def main() -> None:
    summary: dict[str, Any] = {}
    for name, record in (("agno", record_agno), ("maf", record_maf)):
        server = UpstreamServer.start(name)
        try:
            summary[name] = record(server)
        finally:
            server.stop()
    (OUT / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
