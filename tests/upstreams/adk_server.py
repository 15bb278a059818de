"""A Google ADK agent behind ag-ui-adk, with a scripted model, served over HTTP in its own process.

It runs in its own virtualenv (tests/upstreams/frameworks-requirements.txt), so it imports nothing from
the project. `python adk_server.py` prints `PORT <n>` once it listens. ADK's own tool confirmation gates
the tools (`FunctionTool(require_confirmation=True)`), reported as interrupts (`emit_interrupt_outcome`).

    "go to orders"      -> calls the client's `navigate` tool
    "delete the draft"  -> calls `delete_file`, which waits for confirmation
    "delete both"       -> two `delete_file` calls in one step
    "refund order 42"   -> calls `refund_order`, which waits for confirmation
    a tool's answer     -> "Done: <tool> said <content>"
GET /deleted lists what the gated tools really did; POST /deleted clears it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import Any

from ag_ui_adk import ADKAgent, AGUIToolset, add_adk_fastapi_endpoint
from fastapi import FastAPI
from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.tools import FunctionTool
from google.genai import types
from journal_server import add_journal, serve

DELETED: list[str] = []


def delete_file(path: str) -> str:
    """Delete a file."""
    DELETED.append(path)
    return f"deleted {path}"


def refund_order(order: str) -> str:
    """Refund an order."""
    DELETED.append(f"refund {order}")
    return f"refunded order {order}"


def _reply(contents: list[types.Content]) -> tuple[str, list[tuple[str, dict[str, Any]]]]:
    last = contents[-1]
    responses = [part.function_response for part in last.parts or [] if part.function_response]
    responses = [r for r in responses if r.name != "adk_request_confirmation"]
    if responses:
        result = responses[-1]
        return f"Done: {result.name} said {json.dumps(result.response)}", []
    prompt = " ".join(part.text or "" for part in last.parts or [])
    if "go to orders" in prompt:
        return "", [("navigate", {"path": "/orders"})]
    if "delete both" in prompt:
        return "", [("delete_file", {"path": p}) for p in ["/tmp/a.txt", "/tmp/b.txt"]]
    if "delete the draft" in prompt:
        return "", [("delete_file", {"path": "/tmp/draft.txt"})]
    if "refund order 42" in prompt:
        return "", [("refund_order", {"order": "42"})]
    return "Hello from ADK.", []


class ScriptedLlm(BaseLlm):
    """A model whose reply depends only on the conversation it is given."""

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        text, calls = _reply(list(llm_request.contents))
        parts = [types.Part(text=text)] if text else []
        parts += [types.Part(function_call=types.FunctionCall(name=name, args=args)) for name, args in calls]
        yield LlmResponse(content=types.Content(role="model", parts=parts))


def app() -> FastAPI:
    agent = LlmAgent(
        name="support",
        model=ScriptedLlm(model="scripted"),
        tools=[
            FunctionTool(delete_file, require_confirmation=True),
            FunctionTool(refund_order, require_confirmation=True),
            AGUIToolset(),
        ],
    )
    served = FastAPI()
    add_adk_fastapi_endpoint(
        served,
        ADKAgent(
            adk_agent=agent,
            app_name="support",
            user_id="u",
            emit_interrupt_outcome=True,
            # ag-ui-adk's default (10) counts every thread paused for approval, and the conformance kit leaves
            # more than ten waiting (docs/backends.md); a deployment sizes it for its open approvals the same way.
            max_concurrent_executions=100,
        ),
        "/",
    )

    return add_journal(served, DELETED)


if __name__ == "__main__":
    serve(app())
