"""A Strands agent behind ag-ui-strands, with a scripted model, served over HTTP in its own process.

It runs in its own virtualenv (ag-ui-strands needs an older opentelemetry than the project's), so it
imports nothing from the project. `python strands_server.py` prints `PORT <n>` once it listens.

    "go to orders"      -> calls the client's `navigate` tool
    "delete the draft"  -> calls its own `delete_file`, which waits for approval (interrupt_on_call)
    "delete both"       -> two `delete_file` calls in one step
    a tool's answer     -> "Done: <tool> said <content>"
GET /deleted lists what `delete_file` really deleted; POST /deleted clears it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from ag_ui_strands import StrandsAgent, StrandsAgentConfig, ToolBehavior, add_strands_fastapi_endpoint
from fastapi import FastAPI
from journal_server import add_journal, serve
from strands import Agent, tool
from strands.models.model import Model

DELETED: list[str] = []


@tool
def delete_file(path: str) -> str:
    """Delete a file."""
    DELETED.append(path)
    return f"deleted {path}"


def _reply(messages: list[dict[str, Any]]) -> tuple[str, list[tuple[str, str, dict[str, Any]]]]:
    last = messages[-1]
    results = [block["toolResult"] for block in last["content"] if "toolResult" in block]
    if results:
        names = {
            block["toolUse"]["toolUseId"]: block["toolUse"]["name"]
            for message in messages
            for block in message["content"]
            if "toolUse" in block
        }
        result = results[-1]
        content = "".join(part.get("text", json.dumps(part.get("json"))) for part in result["content"])
        return f"Done: {names.get(result['toolUseId'], '?')} said {content}", []
    prompt = " ".join(block.get("text", "") for block in last["content"])
    turn = sum(1 for m in messages if m["role"] == "user" and any("text" in b for b in m["content"]))
    if "go to orders" in prompt:
        return "", [(f"st-{turn}-0", "navigate", {"path": "/orders"})]
    if "delete both" in prompt:
        return "", [(f"st-{turn}-{i}", "delete_file", {"path": p}) for i, p in enumerate(["/tmp/a.txt", "/tmp/b.txt"])]
    if "delete the draft" in prompt:
        return "", [(f"st-{turn}-0", "delete_file", {"path": "/tmp/draft.txt"})]
    return "Hello from Strands.", []


class ScriptedModel(Model):
    """A model whose reply depends only on the conversation it is given."""

    def update_config(self, **model_config: Any) -> None:
        pass

    def get_config(self) -> Any:
        return {}

    def structured_output(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    async def stream(
        self, messages: Any, tool_specs: Any = None, system_prompt: Any = None, **kwargs: Any
    ) -> AsyncIterator[Any]:
        text, calls = _reply(messages)
        yield {"messageStart": {"role": "assistant"}}
        if text:
            yield {"contentBlockStart": {"start": {}}}
            yield {"contentBlockDelta": {"delta": {"text": text}}}
            yield {"contentBlockStop": {}}
        for call_id, name, arguments in calls:
            yield {"contentBlockStart": {"start": {"toolUse": {"toolUseId": call_id, "name": name}}}}
            yield {"contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps(arguments)}}}}
            yield {"contentBlockStop": {}}
        yield {"messageStop": {"stopReason": "tool_use" if calls else "end_turn"}}


def app() -> FastAPI:
    agent = StrandsAgent(
        Agent(model=ScriptedModel(), tools=[delete_file], callback_handler=None),
        name="support",
        config=StrandsAgentConfig(tool_behaviors={"delete_file": ToolBehavior(interrupt_on_call=True)}),
    )
    served = FastAPI()
    add_strands_fastapi_endpoint(served, agent, "/")

    return add_journal(served, DELETED)


if __name__ == "__main__":
    serve(app())
