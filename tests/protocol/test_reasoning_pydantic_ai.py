"""A Pydantic AI agent that thinks, behind the adapter: its thinking signatures cross turns byte for byte.

Pydantic AI sends each thinking part as `REASONING_*` events and its signature as a `REASONING_ENCRYPTED_VALUE`,
and rebuilds the part from the reasoning message's `encryptedValue` on the next run: a provider that signs its
thinking (Anthropic, Bedrock) refuses a conversation whose signatures are lost or changed.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agui import run_events, run_input, user
from protocol_models import Recorder
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, ThinkingPart
from pydantic_ai.models.function import AgentInfo, DeltaThinkingCalls, DeltaThinkingPart, FunctionModel
from pydantic_ai.ui.ag_ui import AGUIAdapter
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from adapter import Adapter
from adapter.backends import AGUIUpstream

if TYPE_CHECKING:
    from conftest import Serve

SIGNATURES = ["RXF1YWxz+/c2lnbmVk==", 'sig "two" \\ ü 👍🏽']
"""What the model signs its thinking with on each turn: base64's own symbols, quotes, a backslash, non-ASCII."""


@dataclass
class ThinkingAgent:
    """A Pydantic AI agent whose model thinks (signed) before it answers; keeps the thinking parts it is given back."""

    given: list[list[ThinkingPart]] = field(default_factory=list)

    @property
    def app(self) -> Starlette:
        agent = Agent(FunctionModel(stream_function=self.model))

        async def run(request: Request) -> Response:
            return await AGUIAdapter.dispatch_request(request, agent=agent)

        return Starlette(routes=[Route("/", run, methods=["POST"])])

    async def model(self, messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaThinkingCalls]:
        earlier = [part for m in messages if isinstance(m, ModelResponse) for part in m.parts]
        self.given.append([part for part in earlier if isinstance(part, ThinkingPart)])
        signature = SIGNATURES[len(self.given) - 1]
        yield {0: DeltaThinkingPart(content="Let me ")}
        yield {0: DeltaThinkingPart(content="think.", signature=signature)}
        yield f"Answer {len(self.given)}."


def encrypted_values(events: list[dict[str, object]]) -> list[object]:
    return [event["encryptedValue"] for event in events if event["type"] == "REASONING_ENCRYPTED_VALUE"]


async def test_thinking_signatures_cross_two_turns_unchanged(serve: Serve) -> None:
    agent = ThinkingAgent()
    upstream = Recorder(agent.app)
    served = await serve(Adapter(AGUIUpstream(upstream)))
    thread = served.client.thread()

    first = await thread.say("hi")
    second = await thread.say("and again")

    sent = [encrypted_values(upstream.events(0)), encrypted_values(upstream.events(1))]
    assert [json.loads(str(value))["signature"] for values in sent for value in values] == SIGNATURES
    assert [encrypted_values(first.events), encrypted_values(second.events)] == sent
    for reply, values in zip((first, second), sent, strict=True):
        for value in values:
            assert json.dumps(value).encode() in reply.body  # the bytes the upstream wrote, as the client reads them
    (returned,) = [m for m in upstream.request(1)["messages"] if m["role"] == "reasoning"]
    assert returned["encryptedValue"] == sent[0][0]
    assert json.dumps(returned["encryptedValue"]).encode() in upstream.requests[1]
    assert returned["content"] == "Let me think."
    assert [[part.signature for part in parts] for parts in agent.given] == [[], SIGNATURES[:1]]
    assert [[part.content for part in parts] for parts in agent.given] == [[], ["Let me think."]]


async def test_the_stored_thread_keeps_each_reasoning_message_with_its_encrypted_value() -> None:
    agent = ThinkingAgent()
    upstream = Recorder(agent.app)
    adapter = Adapter(AGUIUpstream(upstream), history="server")

    await run_events(adapter, run_input("t1", [user("hi")]))
    await run_events(adapter, run_input("t1", [user("and again")]))

    thread = await adapter.thread("t1")
    assert thread is not None
    reasoning = [m for m in thread["messages"] if m["role"] == "reasoning"]
    assert [json.loads(m["encryptedValue"])["signature"] for m in reasoning] == SIGNATURES
    assert [m["role"] for m in thread["messages"]] == ["user", "reasoning", "assistant"] * 2
    assert [[part.signature for part in parts] for parts in agent.given] == [[], SIGNATURES[:1]]
