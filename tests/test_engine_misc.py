"""Versioning, run identity, state, history repair, backend failures, capabilities, text encoding."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import pytest
from ag_ui.core import ActivityMessage, AgentCapabilities, AssistantMessage, ToolMessage
from agui import FRONTEND_TOOLS, extras_in, new_id, nulls_in, run_input, tool_answer, user

from adapter import Adapter, ModelRequest, ScriptedBackend, TextDelta

if TYPE_CHECKING:
    from conftest import Connect, Kit, Serve


@pytest.mark.parametrize("declared", [None, "1.0", "1.3"], ids=["absent", "1.0", "1.3"])
async def test_run_started_declares_the_servers_protocol_version(connect: Connect, declared: str | None) -> None:
    client = await connect()
    body = run_input(new_id("thread"), [user("hello")])
    if declared is None:
        del body["protocolVersion"]
    else:
        body["protocolVersion"] = declared

    reply = await client.post(body)

    assert reply.started["protocolVersion"] == "1.0"
    assert reply.outcome == {"type": "success"}


async def test_run_identity_is_echoed_with_the_parent_run(connect: Connect) -> None:
    client = await connect()
    body = run_input(new_id("thread"), [user("hello")], parentRunId="run-parent")

    reply = await client.post(body)

    assert reply.types[0] == "RUN_STARTED"
    assert (reply.started["threadId"], reply.started["runId"]) == (body["threadId"], body["runId"])
    assert reply.started["parentRunId"] == "run-parent"
    assert (reply.finished["threadId"], reply.finished["runId"]) == (body["threadId"], body["runId"])


async def test_state_is_snapshotted_before_an_interrupt(connect: Connect, backend: ScriptedBackend) -> None:
    client = await connect()
    state = {"cart": ["lamp"], "note": None}

    reply = await client.thread().say("email ceo@x.io", state=state)

    (snapshot,) = reply.of("STATE_SNAPSHOT")
    assert snapshot["snapshot"] == state
    assert reply.index("MESSAGES_SNAPSHOT") < reply.index("RUN_FINISHED")
    assert reply.index("STATE_SNAPSHOT") < reply.index("RUN_FINISHED")
    assert reply.outcome["type"] == "interrupt"
    assert backend.requests[0].state == state


async def test_history_is_repaired_before_the_model_sees_it(connect: Connect, backend: ScriptedBackend) -> None:
    client = await connect()
    calls = [
        {"id": f"call_{n}", "type": "function", "function": {"name": "lookup_order", "arguments": "{}"}}
        for n in ("answered", "orphan")
    ]
    history = [
        user("earlier"),
        {"id": "a1", "role": "assistant", "toolCalls": calls},
        {"id": "act1", "role": "activity", "activityType": "progress", "content": {"done": 1}},
        tool_answer("call_answered", "found"),
        tool_answer("call_answered", "found twice"),
        tool_answer("call_nowhere", "stray"),
        user("hello"),
    ]

    reply = await client.post(run_input(new_id("thread"), history))

    assert reply.outcome == {"type": "success"}
    seen = backend.requests[0].messages
    assert not [m for m in seen if isinstance(m, ActivityMessage)]
    answers = [m for m in seen if isinstance(m, ToolMessage)]
    assert [(m.tool_call_id, m.error) for m in answers] == [("call_answered", None), ("call_orphan", "missing")]
    assert answers[0].content == "found"
    position = {m.id: i for i, m in enumerate(seen)}
    assert position[answers[0].id] == position["a1"] + 1 and position[answers[1].id] == position["a1"] + 2
    for message in seen:
        if isinstance(message, AssistantMessage):
            for call in message.tool_calls or []:
                assert sum(isinstance(m, ToolMessage) and m.tool_call_id == call.id for m in seen) == 1


class FailingBackend:
    """Says a little, then fails with an error whose text must never reach the client."""

    def __init__(self) -> None:
        self.requests: list[ModelRequest] = []

    async def stream(self, request: ModelRequest) -> AsyncIterator[TextDelta]:
        self.requests.append(request)
        yield TextDelta("Let me ")
        yield TextDelta("check")
        raise RuntimeError("upstream 500: api_key=sk-secret-123")


async def test_backend_failure_closes_the_text_and_ends_in_a_sanitised_run_error(serve: Serve, kit: Kit) -> None:
    served = await serve(Adapter(FailingBackend(), tools=kit.tools))

    reply = await served.client.thread().say("hello")

    assert reply.types == [
        "RUN_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_ERROR",
    ]
    assert reply.error["code"] == "BACKEND_ERROR"
    assert reply.error["message"]
    body = reply.body.decode()
    assert "Traceback" not in body and "sk-secret" not in body and "RuntimeError" not in body


async def test_capabilities_declare_interrupts_and_only_server_tools(connect: Connect, kit: Kit) -> None:
    client = await connect()
    await client.thread(tools=FRONTEND_TOOLS).say("go to orders")

    response = await client.get("/capabilities")

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    body: dict[str, Any] = response.json()
    assert nulls_in(body) == []
    capabilities = AgentCapabilities.model_validate(body)
    assert extras_in(capabilities) == []
    hitl = body["humanInTheLoop"]
    assert (hitl["interrupts"], hitl["approvals"], hitl["approveWithEdits"]) == (True, True, True)
    assert body["tools"]["clientProvided"] is True
    assert [item["name"] for item in body["tools"]["items"]] == [t.name for t in kit.tools]
    assert body["transport"]["streaming"] is True


async def test_capabilities_follow_the_approve_with_edits_option(connect: Connect) -> None:
    client = await connect(approve_with_edits=False)
    (interrupt,) = (await client.thread().say("email ceo@x.io")).interrupts

    body = (await client.get("/capabilities")).json()

    assert body["humanInTheLoop"]["approveWithEdits"] is False
    assert "editedArgs" not in interrupt["responseSchema"]["properties"]


async def test_multibyte_text_survives_streaming(connect: Connect) -> None:
    client = await connect()

    reply = await client.thread().say("hello")

    assert reply.text == "héllo 👍🏽 👨‍👩‍👧"
    assert len(reply.of("TEXT_MESSAGE_CONTENT")) >= 2
    assert "héllo".encode() in reply.body


class ClosableBackend(ScriptedBackend):
    closed = False

    async def aclose(self) -> None:
        self.closed = True


async def test_closing_the_adapter_closes_its_backend_and_store(tmp_path: Any) -> None:
    from adapter import SQLiteStore

    backend = ClosableBackend()
    store = SQLiteStore(tmp_path / "t.db")
    adapter = Adapter(backend, store=store)

    await adapter.aclose()

    assert backend.closed
    with pytest.raises(RuntimeError):
        await store.load("t")
