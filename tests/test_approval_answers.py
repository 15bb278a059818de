"""Approvals come only through `resume`, and the answers third-party UIs send are read as a person meant them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from agui import FRONTEND_TOOLS, Reply, Thread, resolved

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
    thread = (await serve(make_adapter())).client.thread(tools=FRONTEND_TOOLS)
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
