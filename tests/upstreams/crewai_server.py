"""A CrewAI flow behind ag-ui-crewai, with a scripted model, served over HTTP in its own process.

It runs in its own virtualenv (tests/upstreams/crewai-requirements.txt: crewai's pins conflict with
google-adk's and the dev extra's), so it imports nothing from the project. `python crewai_server.py`
prints `PORT <n>` once it listens. The model is litellm's own mock (`mock_response`, `mock_tool_calls`):
no network. The approval is CrewAI's `@human_feedback`, whose interrupt names no tool call.

    "go to orders"      -> calls the client's `navigate` tool
    "delete the draft"  -> calls its own `delete_file`, then asks for feedback before it runs
    "refund order 42"   -> calls its own `refund_order`, then asks for feedback before it runs
    a tool's answer     -> "Done: <tool> said <content>"
GET /deleted lists what the gated tools really did; POST /deleted clears it.
"""

from __future__ import annotations

import json
import os
import uuid
from typing import Any

os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")
os.environ.setdefault("OTEL_SDK_DISABLED", "true")
os.environ.setdefault("CREWAI_TRACING_ENABLED", "false")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network: the cost map that ships with it

import litellm
from ag_ui_crewai import (
    CopilotKitState,
    add_crewai_flow_fastapi_endpoint,
    agui_feedback_provider,
    copilotkit_emit_tool_result,
    copilotkit_stream,
)
from crewai.flow.flow import Flow, listen, router, start
from crewai.flow.human_feedback import HumanFeedbackResult, human_feedback
from fastapi import FastAPI
from journal_server import add_journal, serve

DELETED: list[str] = []
ASK = 'Approve this tool call? Answer {"approved": true} or {"approved": false}.'
GATED = {
    "delete the draft": ("delete_file", {"path": "/tmp/draft.txt"}),
    "refund order 42": ("refund_order", {"order": "42"}),
}


def _run_tool(name: str, arguments: dict[str, Any]) -> str:
    if name == "delete_file":
        DELETED.append(arguments["path"])
        return f"deleted {arguments['path']}"
    DELETED.append(f"refund {arguments['order']}")
    return f"refunded order {arguments['order']}"


def _field(message: Any, name: str) -> Any:
    return message.get(name) if isinstance(message, dict) else getattr(message, name, None)


async def _model(messages: list[Any], *, text: str = "", calls: list[tuple[str, dict[str, Any]]] = ()) -> Any:
    """One streamed completion of litellm's mock model (`mock_response`, no network): `text`, or tool calls."""
    mock: Any = text
    if calls:
        tool_calls = [
            {"id": f"cr-{uuid.uuid4().hex[:12]}", "type": "function",
             "function": {"name": name, "arguments": json.dumps(arguments)}}
            for name, arguments in calls
        ]  # fmt: skip
        message = {"role": "assistant", "content": None, "tool_calls": tool_calls}
        mock = litellm.ModelResponse(choices=[{"index": 0, "message": message, "finish_reason": "tool_calls"}])
    response = await copilotkit_stream(
        await litellm.acompletion(model="openai/scripted", messages=messages, stream=True, mock_response=mock)
    )
    return response.choices[0].message


class SupportFlow(Flow[CopilotKitState]):
    """Calls a tool the model picks; a gated one waits for `@human_feedback` before it runs."""

    @start()
    async def chat(self) -> str:
        messages = self.state.messages
        last = messages[-1] if messages else {}
        if _field(last, "role") == "tool":
            said = await _model(messages, text=f"Done: navigate said {_field(last, 'content')}")
            messages.append(said.model_dump())
            return "done"
        prompt = str(_field(last, "content") or "")
        if "go to orders" in prompt:
            said = await _model(messages, calls=[("navigate", {"path": "/orders"})])
            messages.append(said.model_dump())
            return "done"
        for asked, call in GATED.items():
            if asked in prompt:
                said = await _model(messages, calls=[call])
                messages.append(said.model_dump())
                return "gated"
        said = await _model(messages, text="Hello from CrewAI.")
        messages.append(said.model_dump())
        return "done"

    @router(chat)
    def route(self) -> str:
        last = self.state.messages[-1]
        return (
            "gated"
            if _field(last, "tool_calls")
            and _field(_field(last, "tool_calls")[0], "function")["name"] in ("delete_file", "refund_order")
            else "done"
        )

    @listen("gated")
    @human_feedback(
        message='Approve this tool call? Answer {"approved": true} or false.', provider=agui_feedback_provider
    )
    def approve(self) -> str:
        return "approve the call"

    @listen(approve)
    async def run_gated(self, result: HumanFeedbackResult) -> None:
        call = _field(self.state.messages[-1], "tool_calls")[0]
        function = _field(call, "function")
        try:
            approved = json.loads(result.feedback or "{}").get("approved") is True
        except ValueError:
            approved = False
        content = (
            _run_tool(function["name"], json.loads(function["arguments"]))
            if approved
            else "The user rejected this call."
        )
        await copilotkit_emit_tool_result(_field(call, "id"), content)
        self.state.messages.append({"role": "tool", "tool_call_id": _field(call, "id"), "content": content})
        said = await _model(self.state.messages, text=f"Done: {function['name']} said {content}")
        self.state.messages.append(said.model_dump())


def app() -> FastAPI:
    served = FastAPI()
    add_crewai_flow_fastapi_endpoint(served, SupportFlow(), "/", emit_interrupt_outcome=True)

    return add_journal(served, DELETED)


if __name__ == "__main__":
    serve(app())
