"""A Pydantic AI agent behind its own AG-UI endpoint (pydantic-ai's `AGUIAdapter`), with a scripted model.

The model is a `FunctionModel` whose function decides from the messages it gets, and records every tool
return it is given, so a test shows what Pydantic AI itself received:

"go to orders"      -> calls the client's `navigate` tool
"where is A17"      -> calls `lookup_order` (a tool the client or the adapter declares)
"refund A17"        -> calls `refund_order`
"search"            -> calls its own `search_docs`
"delete both"       -> two `delete_file` calls in one step, each needing approval
"delete" otherwise  -> calls its own `delete_file`, which needs approval (a deferred tool request)
a tool's answer     -> "Done: <tool> said <content>"
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.conversation_store import ConversationStore
from pydantic_ai.messages import ModelMessage, ModelRequest, RetryPromptPart, ToolReturnPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls
from pydantic_ai.models.function import FunctionModel as PydanticFunctionModel
from pydantic_ai.ui.ag_ui import AGUIAdapter
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

OWN_TOOLS = ["delete_file", "search_docs"]
"""The agent's own tools, which it runs itself."""


@dataclass
class PydanticAgent:
    """A Pydantic AI agent behind its own AG-UI endpoint; records every tool return its model is given."""

    returns: list[tuple[str, Any]] = field(default_factory=list)
    tool_names: list[list[str]] = field(default_factory=list)
    expected: dict[str, Any] = field(default_factory=dict)
    """Tool name -> the content its return must have, checked inside the model function."""
    deleted: list[str] = field(default_factory=list)
    conversation_store: ConversationStore | None = None
    """Keeps the conversation on the server (pydantic-ai's own record); None: the client's history is the truth."""

    @property
    def app(self) -> Starlette:
        model = PydanticFunctionModel(stream_function=self.model)
        agent = Agent(model, output_type=[str, DeferredToolRequests])

        @agent.tool_plain
        def search_docs(query: str) -> str:
            """Search the help centre."""
            return f"3 articles about {query}"

        @agent.tool_plain(requires_approval=True)
        def delete_file(path: str) -> str:
            """Delete a file."""
            self.deleted.append(path)
            return f"deleted {path}"

        async def run(request: Request) -> Response:
            return await AGUIAdapter.dispatch_request(request, agent=agent, conversation_store=self.conversation_store)

        return Starlette(routes=[Route("/", run, methods=["POST"])])

    async def model(self, messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
        self.tool_names.append(sorted(t.name for t in info.function_tools))
        last = messages[-1]
        assert isinstance(last, ModelRequest)
        for part in last.parts:
            if isinstance(part, ToolReturnPart | RetryPromptPart):
                self.returns.append((part.tool_name or "", part.content))
                if part.tool_name in self.expected:
                    assert part.content == self.expected[part.tool_name]
        answered = [part for part in last.parts if isinstance(part, ToolReturnPart)]
        if answered:
            yield f"Done: {answered[-1].tool_name} said {json.dumps(answered[-1].content)}"
            return
        prompt = next(p.content for p in last.parts if isinstance(p, UserPromptPart))
        if "delete both" in str(prompt):
            for index, path in enumerate(["/tmp/a.txt", "/tmp/b.txt"]):
                delete = json.dumps({"path": path})
                yield {index: DeltaToolCall(name="delete_file", json_args=delete, tool_call_id=f"pai-delete-{index}")}
            return
        # A call id is unique in a thread, as a real model's are: a later turn's call gets the turn's number.
        turn = sum(
            isinstance(part, UserPromptPart) for m in messages if isinstance(m, ModelRequest) for part in m.parts
        )
        for phrase, name, arguments in _CALLS:
            if phrase in str(prompt):
                call_id = f"pai-{name}" if turn == 1 else f"pai-{name}-{turn}"
                yield {0: DeltaToolCall(name=name, json_args=json.dumps(arguments), tool_call_id=call_id)}
                return
        yield "Hello from Pydantic AI."


_CALLS = [
    ("go to orders", "navigate", {"path": "/orders"}),
    ("where is A17", "lookup_order", {"order_id": "A17"}),
    ("refund A17", "refund_order", {"order_id": "A17", "amount": 42.5}),
    ("search", "search_docs", {"query": "refunds"}),
    ("delete", "delete_file", {"path": "/tmp/draft.txt"}),
]
