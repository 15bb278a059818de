"""Approvals come only through `resume`, and the answers third-party UIs send are read as a person meant them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from agui import FRONTEND_TOOLS, Reply, Thread, resolved
from pydantic import BaseModel

from adapter import tool

# on purpose: the schema a tool with `$defs` gets, without a server
from adapter._run._interrupts import approval_schema
from schema_tools import validate

if TYPE_CHECKING:
    from conftest import Kit, MakeAdapter, Serve, Served

PROPOSED = {"to": "ceo@x.io", "subject": "s", "body": "b"}


async def suspended(serve: Serve, make_adapter: MakeAdapter) -> tuple[Served, Thread, dict[str, Any]]:
    served = await serve(make_adapter())
    thread = served.client.thread(tools=FRONTEND_TOOLS)
    (interrupt,) = (await thread.say("email ceo@x.io")).interrupts
    return served, thread, interrupt


async def stored(served: Served, thread: Thread) -> Any:
    assert served.adapter is not None
    return await served.call(served.adapter.store.load(thread.id))


def result_of(reply: Reply, interrupt: dict[str, Any]) -> dict[str, Any]:
    return reply.results()[interrupt["toolCallId"]]


async def test_a_tool_message_does_not_approve(serve: Serve, make_adapter: MakeAdapter, kit: Kit) -> None:
    served, thread, interrupt = await suspended(serve, make_adapter)
    before = await stored(served, thread)

    reply = await thread.answer(interrupt["toolCallId"], {"approved": True})

    assert reply.types == ["RUN_STARTED", "RUN_ERROR"]
    assert reply.error["code"] == "RESUME_REQUIRED"
    assert kit.count("send_email") == 0
    assert await stored(served, thread) == before
    thread.messages.pop()
    assert (await thread.resume(resolved(interrupt["id"], {"approved": True}))).outcome == {"type": "success"}
    assert kit.count("send_email") == 1


async def test_a_client_tool_interrupt_keeps_the_tool_message_path(serve: Serve, make_adapter: MakeAdapter) -> None:
    thread = (await serve(make_adapter(frontend_outcome="interrupt"))).client.thread(tools=FRONTEND_TOOLS)
    (interrupt,) = (await thread.say("go to settings")).interrupts

    reply = await thread.answer(interrupt["toolCallId"], {"ok": True})

    assert reply.outcome == {"type": "success"}


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param({"approved": False, "editedArgs": {}}, id="agui-inspector-prefill"),
        pytest.param({"approved": False, "editedArgs": {"to": 5}}, id="denied-with-invalid-edits"),
        pytest.param({"approved": False, "editedArgs": "not an object"}, id="denied-with-a-non-object"),
    ],
)
async def test_a_denial_ignores_its_edited_args(
    serve: Serve, make_adapter: MakeAdapter, kit: Kit, payload: dict[str, Any]
) -> None:
    _, thread, interrupt = await suspended(serve, make_adapter)

    reply = await thread.resume(resolved(interrupt["id"], payload))

    assert reply.outcome == {"type": "success"}
    assert "declined" in result_of(reply, interrupt)["content"]
    assert kit.count("send_email") == 0


async def test_empty_edited_args_mean_no_edits(serve: Serve, make_adapter: MakeAdapter, kit: Kit) -> None:
    _, thread, interrupt = await suspended(serve, make_adapter)

    reply = await thread.resume(resolved(interrupt["id"], {"approved": True, "editedArgs": {}}))

    assert reply.outcome == {"type": "success"}
    assert kit.calls["send_email"] == [PROPOSED]


@pytest.mark.parametrize(
    ("edits", "expected"),
    [
        pytest.param({**PROPOSED, "to": 5}, [("/editedArgs/to", "type")], id="wrong-type"),
        pytest.param({"to": "a@x.io"}, [("/editedArgs/body", "required")], id="missing-property"),
    ],
)
async def test_edited_args_errors_point_into_the_payload(
    serve: Serve, make_adapter: MakeAdapter, kit: Kit, edits: dict[str, Any], expected: list[tuple[str, str]]
) -> None:
    served, thread, interrupt = await suspended(serve, make_adapter)
    before = await stored(served, thread)

    reply = await thread.resume(resolved(interrupt["id"], {"approved": True, "editedArgs": edits}))

    assert reply.error["code"] == "RESUME_PAYLOAD_INVALID"
    details = reply.error["metadata"]["details"]
    assert [(detail["pointer"], detail["keyword"]) for detail in details] == expected
    assert expected[0][0] in reply.error["message"]
    assert kit.count("send_email") == 0
    assert await stored(served, thread) == before


def send_email_parameters(served: Served) -> dict[str, Any]:
    """The tool's parameter schema as the model sees it (its spec), and as the resume gate checks edits."""
    assert served.adapter is not None
    (tool,) = [each for each in served.adapter.config.tools if each.name == "send_email"]
    parameters = dict(tool.spec().parameters or {})
    assert served.adapter.config.tool_schemas()["send_email"] == parameters  # what the gate checks edits against
    return parameters


async def test_an_approval_offers_the_tools_own_parameter_schema_for_edits(
    serve: Serve, make_adapter: MakeAdapter
) -> None:
    served, _, interrupt = await suspended(serve, make_adapter)

    schema = interrupt["responseSchema"]

    assert schema["properties"]["editedArgs"] == send_email_parameters(served)
    assert schema["required"] == ["approved"]


async def test_edits_valid_under_the_offered_schema_run_and_invalid_ones_are_refused(
    serve: Serve, make_adapter: MakeAdapter, kit: Kit
) -> None:
    served, thread, interrupt = await suspended(serve, make_adapter)
    offered = interrupt["responseSchema"]["properties"]["editedArgs"]
    invalid, valid = {**PROPOSED, "subject": 5}, {**PROPOSED, "to": "cfo@x.io"}
    assert validate(invalid, offered) != []
    assert validate(valid, offered) == []

    refused = await thread.resume(resolved(interrupt["id"], {"approved": True, "editedArgs": invalid}))
    assert refused.error["code"] == "RESUME_PAYLOAD_INVALID"
    details = refused.error["metadata"]["details"]
    assert [(detail["pointer"], detail["keyword"]) for detail in details] == [("/editedArgs/subject", "type")]
    assert kit.count("send_email") == 0
    thread.messages.pop()

    reply = await thread.resume(resolved(interrupt["id"], {"approved": True, "editedArgs": valid}))

    assert reply.outcome == {"type": "success"}
    assert kit.calls["send_email"] == [valid]
    assert send_email_parameters(served) == offered


async def test_without_edits_the_approval_schema_has_no_edited_args(serve: Serve, make_adapter: MakeAdapter) -> None:
    served = await serve(make_adapter(approve_with_edits=False))
    (interrupt,) = (await served.client.thread(tools=FRONTEND_TOOLS).say("email ceo@x.io")).interrupts

    assert interrupt["responseSchema"] == {
        "type": "object",
        "properties": {
            "approved": {"type": "boolean"},
            "reason": {"type": "string", "maxLength": 2000},
            "remember": {"type": "string", "enum": ["thread"]},
        },
        "required": ["approved"],
    }


class Item(BaseModel):
    sku: str
    quantity: int


def test_a_tool_schema_with_definitions_keeps_them_where_its_references_resolve() -> None:
    @tool(requires_approval=True)
    def order(items: list[Item]) -> str:
        """Order items."""
        return "ordered"

    parameters = dict(order.spec().parameters or {})
    assert "$defs" in parameters

    schema = approval_schema(parameters)

    assert schema["$defs"] == parameters["$defs"]
    assert schema["properties"]["editedArgs"] == {k: v for k, v in parameters.items() if k != "$defs"}
    assert validate({"approved": True, "editedArgs": {"items": [{"sku": "A", "quantity": 1}]}}, schema) == []
    missing = validate({"approved": True, "editedArgs": {"items": [{"sku": "A"}]}}, schema)
    assert [issue.pointer for issue in missing] == ["/editedArgs/items/0/quantity"]
