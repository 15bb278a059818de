"""An Agno agent behind its AG-UI interface (`agno.os.interfaces.agui`), with a scripted model, served over HTTP.

It runs in its own virtualenv (tests/upstreams/agno-requirements.txt), so it imports nothing from the
project. `python agno_server.py` prints `PORT <n>` once it listens. Its `refund` tool is declared
`requires_confirmation=True`: Agno pauses the run and streams the refund call unanswered, with no interrupt;
the client answers it with a ToolMessage whose content is `{"accepted": true}` (or false), the last message
of the next run's `messages` (agno/os/interfaces/agui/resume.py). Paused runs live in an in-memory database.

    "refund 5 euros"    -> calls `refund` with {"amount": 5}, which waits for confirmation
    a tool's result     -> "Done: <tool> said <content>"
GET /deleted lists the refunds really made; POST /deleted clears it.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

from agno.agent import Agent
from agno.db.in_memory import InMemoryDb
from agno.models.base import Model
from agno.models.message import Message
from agno.models.response import ModelResponse
from agno.os.interfaces.agui import AGUI
from agno.tools import tool
from fastapi import FastAPI
from journal_server import add_journal, serve

DELETED: list[str] = []


@tool(requires_confirmation=True)
def refund(amount: int) -> str:
    """Refund an amount of euros to the customer."""
    DELETED.append(f"refund {amount}")
    return f"refunded {amount} euros"


def _reply(messages: list[Message]) -> ModelResponse:
    last = messages[-1]
    if last.role == "tool":
        return ModelResponse(role="assistant", content=f"Done: {last.tool_name} said {last.content}")
    prompt = str(last.content or "")
    if "refund" in prompt:
        call = {"id": f"call_{uuid.uuid4().hex[:12]}", "type": "function",
                "function": {"name": "refund", "arguments": '{"amount": 5}'}}  # fmt: skip
        return ModelResponse(role="assistant", content="", tool_calls=[call])
    return ModelResponse(role="assistant", content="Hello from Agno.")


@dataclass
class ScriptedModel(Model):
    """A model whose reply depends only on the conversation it is given."""

    id: str = "scripted"
    name: str = "Scripted"
    provider: str = "tests"

    def invoke(self, messages: list[Message], *args: Any, **kwargs: Any) -> ModelResponse:
        return _reply(messages)

    async def ainvoke(self, messages: list[Message], *args: Any, **kwargs: Any) -> ModelResponse:
        return _reply(messages)

    def invoke_stream(self, messages: list[Message], *args: Any, **kwargs: Any) -> Iterator[ModelResponse]:
        yield _reply(messages)

    async def ainvoke_stream(  # type: ignore[override]
        self, messages: list[Message], *args: Any, **kwargs: Any
    ) -> AsyncIterator[ModelResponse]:
        yield _reply(messages)

    def _parse_provider_response(self, response: Any, **kwargs: Any) -> ModelResponse:
        return response  # type: ignore[no-any-return]

    def _parse_provider_response_delta(self, response: Any) -> ModelResponse:
        return response  # type: ignore[no-any-return]


def app() -> FastAPI:
    agent = Agent(name="support", model=ScriptedModel(), tools=[refund], db=InMemoryDb(), telemetry=False)
    served = FastAPI()
    served.include_router(AGUI(agent=agent).get_router())  # POST /agui
    return add_journal(served, DELETED)


if __name__ == "__main__":
    serve(app())
