"""A Microsoft Agent Framework agent behind agent-framework-ag-ui, with a scripted chat client, served over HTTP.

It runs in its own virtualenv (tests/upstreams/maf-requirements.txt), so it imports nothing from the
project. `python maf_server.py` prints `PORT <n>` once it listens. Its `refund` tool is declared
`approval_mode="always_require"`; with the wrapper's default `require_confirmation=True` the run streams the
refund call and a `confirm_changes` companion call, and leaves both unanswered.

    "refund 5 euros"    -> calls `refund` with {"amount": 5}, which waits for approval
    a tool's result     -> "Done: <tool> said <content>"
GET /deleted lists the refunds really made; POST /deleted clears it.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from agent_framework import (
    Agent,
    BaseChatClient,
    ChatResponse,
    ChatResponseUpdate,
    Content,
    FunctionInvocationLayer,
    Message,
    ResponseStream,
    tool,
)
from agent_framework_ag_ui import AgentFrameworkAgent, add_agent_framework_fastapi_endpoint
from fastapi import FastAPI
from journal_server import add_journal, serve

DELETED: list[str] = []


@tool(approval_mode="always_require")
def refund(amount: int) -> str:
    """Refund an amount of euros to the customer."""
    DELETED.append(f"refund {amount}")
    return f"refunded {amount} euros"


def _reply(messages: Sequence[Message]) -> list[Content]:
    last = messages[-1]
    results = [c for c in last.contents or [] if c.type == "function_result"]
    if results:
        names = {c.call_id: c.name for m in messages for c in m.contents or [] if c.type == "function_call"}
        result = results[-1]
        return [Content.from_text(f"Done: {names.get(result.call_id, '?')} said {result.result}")]
    prompt = " ".join(c.text or "" for c in last.contents or [] if c.type == "text")
    if last.role == "user" and "refund" in prompt:
        call_id = f"call_{uuid.uuid4().hex[:12]}"
        return [Content.from_function_call(call_id=call_id, name="refund", arguments={"amount": 5})]
    return [Content.from_text("Hello from Agent Framework.")]


class ScriptedChatClient(FunctionInvocationLayer[Any], BaseChatClient[Any]):
    """A chat client whose reply depends only on the conversation it is given; the layer runs the tools."""

    def _inner_get_response(
        self, *, messages: Sequence[Message], stream: bool, options: Mapping[str, Any], **kwargs: Any
    ) -> Any:
        contents = _reply(messages)
        if not stream:

            async def respond() -> ChatResponse[Any]:
                return ChatResponse(messages=[Message(role="assistant", contents=contents)])

            return respond()

        async def updates() -> AsyncIterator[ChatResponseUpdate]:
            yield ChatResponseUpdate(role="assistant", contents=contents, message_id=f"msg_{uuid.uuid4().hex[:12]}")

        return ResponseStream(updates(), finalizer=ChatResponse.from_updates)


def app() -> FastAPI:
    agent = Agent(client=ScriptedChatClient(), name="support", instructions="Refund when asked.", tools=[refund])
    served = FastAPI()
    # One user: this test server has no authentication, and its approvals are scoped to it.
    add_agent_framework_fastapi_endpoint(served, AgentFrameworkAgent(agent=agent), "/", single_user=True)
    return add_journal(served, DELETED)


if __name__ == "__main__":
    serve(app())
