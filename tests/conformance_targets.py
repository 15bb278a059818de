"""The servers the conformance kit is tested against: this adapter with two parallel approvals, and Pydantic AI.

Pydantic AI's AG-UI adapter runs in-process with a `FunctionModel` that reacts to the latest user
message, like the demo's scripted agent: `go to settings` calls the client's `navigate`, `refund`
calls `refund_order` (approval required), `two refunds` calls it twice in one step.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls
from pydantic_ai.models.function import FunctionModel as PydanticFunctionModel
from pydantic_ai.ui.ag_ui import AGUIAdapter
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from adapter import Adapter, create_app, tool
from adapter.backends import Call, Rule, ScriptedBackend
from adapter.stores import SQLiteStore

TWO_REFUNDS = "refund orders A1 and B2"


@tool(requires_approval=True)
def refund_order(order_id: str, amount: float) -> str:
    """Refund an order; a person approves it first."""
    return f"refunded {amount} on {order_id}"


def parallel_approval_app(db_path: str | None = None) -> Starlette:
    """This adapter with a scripted agent that asks for one approval, or two at once."""
    rules = [
        Rule(r"go to (\w+)", steps=[[Call("navigate", {"page": "{1}"})]]),
        Rule(
            r"refund orders (\w+) and (\w+)",
            steps=[
                [
                    Call("refund_order", {"order_id": "{1}", "amount": 1.0}),
                    Call("refund_order", {"order_id": "{2}", "amount": 2.0}),
                ]
            ],
        ),
        Rule(r"refund order (\w+)", steps=[[Call("refund_order", {"order_id": "{1}", "amount": 5.0})]]),
    ]
    store = SQLiteStore(db_path) if db_path else None
    return create_app(Adapter(ScriptedBackend(rules), tools=[refund_order], store=store))


@dataclass
class PydanticTarget:
    """Pydantic AI's AG-UI adapter in its default mode, with a refund tool that needs approval."""

    refunds: list[str] = field(default_factory=list)
    """Every refund that ran, by order id: the side effect the kit must never cause twice."""

    @property
    def app(self) -> Starlette:
        agent = Agent(PydanticFunctionModel(stream_function=self.model), output_type=[str, DeferredToolRequests])

        @agent.tool_plain(requires_approval=True)
        def refund_order(order_id: str) -> str:
            """Refund an order."""
            self.refunds.append(order_id)
            return f"refunded {order_id}"

        async def run(request: Request) -> Response:
            return await AGUIAdapter.dispatch_request(request, agent=agent)

        return Starlette(routes=[Route("/", run, methods=["POST"])])

    async def model(self, messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
        last = messages[-1]
        assert isinstance(last, ModelRequest)
        returned = [part for part in last.parts if isinstance(part, ToolReturnPart)]
        if returned:
            yield f"Done: {returned[-1].tool_name} said {json.dumps(returned[-1].content)}"
            return
        prompt = " ".join(str(p.content) for p in last.parts if isinstance(p, UserPromptPart))
        calls = _calls(prompt, len(messages))
        if calls:
            yield {index: call for index, call in enumerate(calls)}
            return
        yield "Hello from Pydantic AI."


def _calls(prompt: str, turn: int) -> list[DeltaToolCall]:
    if "go to" in prompt:
        return [
            DeltaToolCall(name="navigate", json_args=json.dumps({"page": "settings"}), tool_call_id=f"pai-nav-{turn}")
        ]
    if TWO_REFUNDS in prompt:
        return [
            DeltaToolCall(name="refund_order", json_args=json.dumps({"order_id": o}), tool_call_id=f"pai-{o}-{turn}")
            for o in ("A1", "B2")
        ]
    if "refund" in prompt:
        return [DeltaToolCall(name="refund_order", json_args='{"order_id": "A1"}', tool_call_id=f"pai-A1-{turn}")]
    return []
