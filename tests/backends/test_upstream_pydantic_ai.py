"""AGUIUpstream against a real third-party AG-UI agent: Pydantic AI's AG-UI integration, served in-process.

The agent's model is a `FunctionModel` whose function decides from the messages it gets, so every test
shows what Pydantic AI itself received from us.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest
from agui import NAVIGATE, resolved, run_events, run_input, user
from upstreams.pydantic_agent import OWN_TOOLS, PydanticAgent

from adapter import Adapter, tool
from adapter.backends import AGUIUpstream

if TYPE_CHECKING:
    from conftest import Serve

ORDER = {"order": "A17", "status": "shipped"}


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
