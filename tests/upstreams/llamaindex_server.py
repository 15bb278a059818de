"""A LlamaIndex workflow behind llama-index-protocols-ag-ui, with a scripted model, served over HTTP in its own process.

It runs in its own virtualenv (tests/upstreams/agents-requirements.txt), so it imports nothing from the
project. `python llamaindex_server.py` prints `PORT <n>` once it listens. LlamaIndex's AG-UI workflow has
no human-in-the-loop and streams every call as TOOL_CALL_CHUNK only; its own tools' results come only in
its MESSAGES_SNAPSHOT.

    "go to orders"       -> calls the client's `navigate` tool
    "look up order 42"   -> calls its own `lookup_order`
    a tool's answer      -> "Done: <tool> said <content>"
GET /deleted lists the lookups `lookup_order` really made; POST /deleted clears it.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI
from journal_server import add_journal, serve
from llama_index.core.base.llms.types import ChatMessage, TextBlock, ToolCallBlock
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.protocols.ag_ui.router import AGUIWorkflowRouter, get_default_workflow_factory

LOOKED_UP: list[str] = []


def lookup_order(order: str) -> str:
    """Look an order up."""
    LOOKED_UP.append(order)
    return f"order {order} shipped"


def _reply(messages: Sequence[ChatMessage], **_: Any) -> ChatMessage:
    last = messages[-1]
    # Its own tool's result comes as a tool message; a client's answer as a user message after the call,
    # which it writes into the assistant's text as <tool_call><name>...</name>...</tool_call>.
    called = re.findall(r"<name>(.*?)</name>", str(messages[-2].content)) if len(messages) > 1 else []
    if last.role.value == "tool" or called:
        return ChatMessage(role="assistant", content=f"Done: {(called or ['lookup_order'])[-1]} said {last.content}")
    prompt = str(last.content)
    call: tuple[str, dict[str, Any]] | None = None
    if "go to orders" in prompt:
        call = ("navigate", {"path": "/orders"})
    elif "look up order 42" in prompt:
        call = ("lookup_order", {"order": "42"})
    if call is None:
        return ChatMessage(role="assistant", blocks=[TextBlock(text="Hello from LlamaIndex.")])
    block = ToolCallBlock(tool_call_id=f"li-{uuid.uuid4().hex[:12]}", tool_name=call[0], tool_kwargs=call[1])
    return ChatMessage(role="assistant", blocks=[block])


def app() -> FastAPI:
    llm = MockFunctionCallingLLM(response_generator=_reply)
    factory = get_default_workflow_factory(llm=llm, backend_tools=[lookup_order])
    served = FastAPI()
    served.add_api_route("/", AGUIWorkflowRouter(factory).run, methods=["POST"])

    return add_journal(served, LOOKED_UP)


if __name__ == "__main__":
    serve(app())
