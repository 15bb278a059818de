"""AGUIUpstream against a real third-party AG-UI agent: Pydantic AI's AG-UI integration, served in-process.

The agent's model is a `FunctionModel` whose function decides from the messages it gets, so every test
shows what Pydantic AI itself received from us.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest
from agui import NAVIGATE, resolved, run_events, run_input, user
from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.messages import ModelMessage, ModelRequest, RetryPromptPart, ToolReturnPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls
from pydantic_ai.models.function import FunctionModel as PydanticFunctionModel
from pydantic_ai.ui.ag_ui import AGUIAdapter
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from adapter import Adapter, tool
from adapter.backends import AGUIUpstream

if TYPE_CHECKING:
    from conftest import Serve

ORDER = {"order": "A17", "status": "shipped"}
OWN_TOOLS = ["delete_file", "search_docs"]
"""The Pydantic AI agent's own tools, which it runs itself."""


@dataclass
class PydanticAgent:
    """A Pydantic AI agent behind its own AG-UI endpoint; records every tool return its model is given."""

    returns: list[tuple[str, Any]] = field(default_factory=list)
    tool_names: list[list[str]] = field(default_factory=list)
    expected: dict[str, Any] = field(default_factory=dict)
    """Tool name -> the content its return must have, checked inside the model function."""
    deleted: list[str] = field(default_factory=list)

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
            return await AGUIAdapter.dispatch_request(request, agent=agent)

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


@dataclass
class Spy:
    """Our server tools, with every execution recorded."""

    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    @property
    def tools(self) -> list[Any]:
        spy = self

        @tool
        def lookup_order(order_id: str) -> dict[str, Any]:
            """Look an order up."""
            spy.calls.append(("lookup_order", {"order_id": order_id}))
            return {**ORDER, "order": order_id}

        @tool(requires_approval=True)
        def refund_order(order_id: str, amount: float) -> str:
            """Refund an order."""
            spy.calls.append(("refund_order", {"order_id": order_id, "amount": amount}))
            return f"refunded {amount} on {order_id}"

        return [lookup_order, refund_order]


@pytest.fixture
def pydantic_agent() -> PydanticAgent:
    return PydanticAgent()


@pytest.fixture
def spy() -> Spy:
    return Spy()


async def run(adapter: Adapter, body: dict[str, Any], *, resumed: bool = False) -> list[dict[str, Any]]:
    return await run_events(adapter, body, resumed=resumed)


def text_of(events: list[dict[str, Any]]) -> str:
    return "".join(each["delta"] for each in events if each["type"] == "TEXT_MESSAGE_CONTENT")


def with_call(events: list[dict[str, Any]], call_id: str) -> list[str]:
    return [each["type"] for each in events if each.get("toolCallId") == call_id]


async def test_a_frontend_tool_the_agent_calls_becomes_our_interrupt_and_its_answer_a_tool_return(
    pydantic_agent: PydanticAgent,
) -> None:
    adapter = Adapter(AGUIUpstream(pydantic_agent.app), frontend_outcome="interrupt")
    payload = {"opened": "/orders", "tabs": ["orders", "returns"]}
    pydantic_agent.expected["navigate"] = payload

    first = await run(adapter, run_input("t1", [user("go to orders")], tools=[NAVIGATE]))
    (interrupt,) = first[-1]["outcome"]["interrupts"]
    second = await run(
        adapter, run_input("t1", [], tools=[NAVIGATE], resume=[resolved(interrupt["id"], payload)]), resumed=True
    )

    assert pydantic_agent.tool_names[0] == sorted([*OWN_TOOLS, "navigate"])
    assert (interrupt["reason"], interrupt["toolCallId"]) == ("tool_call", "pai-navigate")
    assert with_call(first, "pai-navigate") == ["TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END"]
    assert pydantic_agent.returns == [("navigate", payload)]
    assert with_call(second, "pai-navigate") == ["TOOL_CALL_RESULT"]
    assert text_of(second) == f"Done: navigate said {json.dumps(payload)}"
    assert second[-1]["outcome"] == {"type": "success"}


async def test_a_server_tool_the_agent_calls_runs_here_and_its_result_reaches_the_agent(
    pydantic_agent: PydanticAgent, spy: Spy
) -> None:
    adapter = Adapter(AGUIUpstream(pydantic_agent.app), tools=spy.tools)
    pydantic_agent.expected["lookup_order"] = ORDER

    events = await run(adapter, run_input("t1", [user("where is A17?")], tools=[NAVIGATE]))

    assert pydantic_agent.tool_names[0] == sorted([*OWN_TOOLS, "lookup_order", "navigate", "refund_order"])
    assert spy.calls == [("lookup_order", {"order_id": "A17"})]
    assert pydantic_agent.returns == [("lookup_order", ORDER)]
    assert with_call(events, "pai-lookup_order") == [
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_RESULT",
    ]
    assert text_of(events) == f"Done: lookup_order said {json.dumps(ORDER)}"
    assert events[-1]["outcome"] == {"type": "success"}


async def test_an_approval_gated_server_tool_the_agent_calls_waits_for_our_approval(
    pydantic_agent: PydanticAgent, spy: Spy
) -> None:
    adapter = Adapter(AGUIUpstream(pydantic_agent.app), tools=spy.tools)

    first = await run(adapter, run_input("t1", [user("refund A17 please")]))
    (interrupt,) = first[-1]["outcome"]["interrupts"]
    ran_before_approval = list(spy.calls)
    second = await run(
        adapter, run_input("t1", [], resume=[resolved(interrupt["id"], {"approved": True})]), resumed=True
    )

    assert ran_before_approval == []
    assert (interrupt["reason"], interrupt["toolCallId"]) == ("tool_call", "pai-refund_order")
    assert interrupt["metadata"] == {"toolName": "refund_order"}
    assert spy.calls == [("refund_order", {"order_id": "A17", "amount": 42.5})]
    assert pydantic_agent.returns == [("refund_order", "refunded 42.5 on A17")]
    assert text_of(second) == 'Done: refund_order said "refunded 42.5 on A17"'
    assert second[-1]["outcome"] == {"type": "success"}


async def test_the_agents_own_tool_runs_upstream_and_is_recorded(pydantic_agent: PydanticAgent, spy: Spy) -> None:
    adapter = Adapter(AGUIUpstream(pydantic_agent.app), tools=spy.tools)

    events = await run(adapter, run_input("t1", [user("search the docs")]))

    assert with_call(events, "pai-search_docs") == [
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_RESULT",
    ]
    (result,) = [each for each in events if each["type"] == "TOOL_CALL_RESULT"]
    assert result["content"] == "3 articles about refunds"
    assert spy.calls == []
    assert text_of(events) == 'Done: search_docs said "3 articles about refunds"'


async def test_the_agents_own_approval_interrupt_passes_through_with_its_ids(pydantic_agent: PydanticAgent) -> None:
    adapter = Adapter(AGUIUpstream(pydantic_agent.app))

    events = await run(adapter, run_input("t1", [user("delete the draft")]))

    (interrupt,) = events[-1]["outcome"]["interrupts"]
    assert interrupt["id"] == "int-pai-delete_file"
    assert (interrupt["reason"], interrupt["toolCallId"]) == ("tool_call", "pai-delete_file")
    assert interrupt["message"] == 'Approve delete_file({"path":"/tmp/draft.txt"})?'
    assert with_call(events, "pai-delete_file") == ["TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END"]
    assert pydantic_agent.deleted == []


async def test_approving_the_agents_own_tool_lets_the_agent_run_it(pydantic_agent: PydanticAgent) -> None:
    adapter = Adapter(AGUIUpstream(pydantic_agent.app))

    first = await run(adapter, run_input("t1", [user("delete the draft")]))
    (interrupt,) = first[-1]["outcome"]["interrupts"]
    second = await run(
        adapter, run_input("t1", [], resume=[resolved(interrupt["id"], {"approved": True})]), resumed=True
    )

    assert second[-1]["type"] == "RUN_FINISHED", second[-1]
    assert pydantic_agent.deleted == ["/tmp/draft.txt"]
    assert with_call(second, "pai-delete_file") == ["TOOL_CALL_RESULT"]


async def test_over_real_http_the_whole_round_trip_streams_clean(
    serve: Serve, pydantic_agent: PydanticAgent, spy: Spy
) -> None:
    upstream = await serve(pydantic_agent.app)
    backend = AGUIUpstream(upstream.url + "/")
    ours = await serve(Adapter(backend, tools=spy.tools, frontend_outcome="interrupt"))
    thread = ours.client.thread(tools=[NAVIGATE])
    pydantic_agent.expected["navigate"] = {"opened": "/orders"}

    looked_up = await thread.say("where is A17?")
    asked = await thread.say("go to orders")
    (interrupt,) = asked.interrupts
    answered = await thread.resume(resolved(interrupt["id"], {"opened": "/orders"}))
    await ours.call(backend.aclose())

    assert looked_up.outcome == {"type": "success"}
    assert looked_up.text == f"Done: lookup_order said {json.dumps(ORDER)}"
    assert interrupt["toolCallId"] == "pai-navigate-2"  # the second turn's call
    assert answered.outcome == {"type": "success"}
    assert answered.text == 'Done: navigate said {"opened": "/orders"}'
    assert pydantic_agent.returns == [("lookup_order", ORDER), ("navigate", {"opened": "/orders"})]
    assert spy.calls == [("lookup_order", {"order_id": "A17"})]
