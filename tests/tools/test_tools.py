"""Server tools: schemas from signatures, failures the model sees, ToolContext, external and InputRequired."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest
from ag_ui.core import ToolMessage
from agui import FRONTEND_TOOLS, ORDER, frontend_tool, json_content, resolved

from adapter import Adapter, ConfigurationError, InputRequired, ToolContext, tool
from adapter.backends import Call, Rule, ScriptedBackend

if TYPE_CHECKING:
    from conftest import Connect, Kit, Serve


def answers_seen(backend: ScriptedBackend) -> dict[str, ToolMessage]:
    return {m.tool_call_id: m for m in backend.requests[-1].messages if isinstance(m, ToolMessage)}


def test_schema_comes_from_the_signature_without_the_context_parameter() -> None:
    @tool
    async def send_note(to: str, ctx: ToolContext, urgent: bool = False) -> str:
        """Send a note to someone."""
        return to

    assert send_note.name == "send_note"
    assert send_note.description == "Send a note to someone."
    assert send_note.parameters["properties"] == {
        "to": {"type": "string"},
        "urgent": {"default": False, "type": "boolean"},
    }
    assert send_note.parameters["required"] == ["to"]
    assert send_note.spec().name == "send_note"


def test_decorator_options_are_kept() -> None:
    @tool(name="remote_sign", description="Signed elsewhere.", external=True)
    def sign(doc: str) -> str:
        return doc

    assert (sign.name, sign.description, sign.external, sign.requires_approval) == (
        "remote_sign",
        "Signed elsewhere.",
        True,
        False,
    )
    with pytest.raises(ConfigurationError):
        tool(requires_approval=True, external=True)


@pytest.mark.parametrize(
    ("text", "name", "content"),
    [
        pytest.param("where is order B2", "lookup_order", {**ORDER, "order": "B2"}, id="sync"),
        pytest.param("stock of lamp", "check_stock", "12 lamp in stock", id="async"),
    ],
)
async def test_sync_and_async_tools_run(
    connect: Connect, kit: Kit, backend: ScriptedBackend, text: str, name: str, content: object
) -> None:
    client = await connect()

    reply = await client.thread().say(text)

    (call,) = reply.calls
    assert call["toolCallName"] == name
    result = reply.results()[call["toolCallId"]]["content"]
    assert (json.loads(result) if isinstance(content, dict) else result) == content
    assert kit.count(name) == 1
    assert answers_seen(backend)[call["toolCallId"]].error is None
    assert reply.outcome == {"type": "success"}


@pytest.mark.parametrize(
    ("text", "tool_name", "error", "says", "ran"),
    [
        pytest.param("bad arguments", "lookup_order", "invalid_arguments", "Invalid arguments", 0, id="invalid-args"),
        pytest.param("explode", "explode", "tool_error", "internal error (RuntimeError)", 1, id="exception"),
        pytest.param("refuse", "refuse", "tool_error", "the warehouse is closed", 1, id="tool-error"),
        pytest.param("mystery", "no_such_tool", "unknown_tool", "There is no tool named no_such_tool", 0, id="unknown"),
    ],
)
async def test_tool_failures_become_error_answers_and_the_run_continues(
    connect: Connect, kit: Kit, backend: ScriptedBackend, text: str, tool_name: str, error: str, says: str, ran: int
) -> None:
    client = await connect()

    reply = await client.thread().say(text)

    (call,) = reply.calls
    assert call["toolCallName"] == tool_name
    answer = answers_seen(backend)[call["toolCallId"]]
    assert answer.error == error
    assert says in answer.content
    assert reply.results()[call["toolCallId"]]["content"] == answer.content
    assert kit.count(tool_name) == ran
    assert len(backend.requests) == 2
    assert reply.outcome == {"type": "success"}
    assert "sk-secret" not in reply.body.decode()


async def test_tool_context_names_the_call(connect: Connect, kit: Kit) -> None:
    client = await connect()
    thread = client.thread()

    reply = await thread.say("audit")

    (ctx,) = kit.contexts["audit"]
    (call,) = reply.calls
    assert (ctx.thread_id, ctx.run_id, ctx.tool_call_id) == (thread.id, reply.started["runId"], call["toolCallId"])
    assert ctx.idempotency_key
    assert isinstance(ctx.idempotency_key, str)
    assert (ctx.answer, ctx.answered) == (None, False)


async def test_approved_call_runs_with_the_resuming_runs_context(connect: Connect, kit: Kit) -> None:
    client = await connect()
    thread = client.thread()
    (interrupt,) = (await thread.say("email ceo@x.io")).interrupts

    resumed = await thread.resume(resolved(interrupt["id"], {"approved": True}))

    (ctx,) = kit.contexts["send_email"]
    assert (ctx.thread_id, ctx.run_id) == (thread.id, resumed.started["runId"])
    assert ctx.tool_call_id == interrupt["toolCallId"]


async def test_idempotency_key_is_stable_across_suspensions_of_one_call(connect: Connect, kit: Kit) -> None:
    client = await connect()
    thread = client.thread()
    (approval,) = (await thread.say("gated audit")).interrupts
    assert kit.contexts["gated_audit"] == []

    asked = await thread.resume(resolved(approval["id"], {"approved": True}))
    (question,) = asked.interrupts
    done = await thread.resume(resolved(question["id"], "compliance"))

    first, second = kit.contexts["gated_audit"]
    assert first.idempotency_key == second.idempotency_key
    assert first.tool_call_id == second.tool_call_id == approval["toolCallId"] == question["toolCallId"]
    assert (first.run_id, second.run_id) == (asked.started["runId"], done.started["runId"])
    assert (first.answered, second.answered, second.answer) == (False, True, "compliance")
    assert kit.calls["gated_audit"] == [{"note": "n", "answer": "compliance"}]
    assert done.outcome == {"type": "success"}


async def test_idempotency_keys_differ_between_calls_and_threads(connect: Connect, kit: Kit) -> None:
    client = await connect()

    await client.thread().say("audit")
    await client.thread().say("audit")

    one, two = kit.contexts["audit"]
    assert one.idempotency_key != two.idempotency_key


@pytest.mark.parametrize("frontend_outcome", ["interrupt", "pending"])
async def test_external_server_tool_suspends_without_running(
    connect: Connect, kit: Kit, backend: ScriptedBackend, frontend_outcome: str
) -> None:
    client = await connect(frontend_outcome=frontend_outcome)
    thread = client.thread()

    first = await thread.say("sign contract7")

    (call,) = first.calls
    assert call["toolCallName"] == "sign_document"
    assert first.results() == {}
    assert kit.count("sign_document") == 0
    assert len(backend.requests) == 1
    if frontend_outcome == "interrupt":
        (interrupt,) = first.interrupts
        assert (interrupt["reason"], interrupt["toolCallId"]) == ("tool_call", call["toolCallId"])
        second = await thread.resume(resolved(interrupt["id"], {"signed": True}))
    else:
        assert first.outcome == {"type": "success", "pendingToolCallIds": [call["toolCallId"]]}
        second = await thread.answer(call["toolCallId"], {"signed": True})
    assert json_content(answers_seen(backend)[call["toolCallId"]].content) == {"signed": True}
    assert kit.count("sign_document") == 0
    assert second.outcome == {"type": "success"}


async def test_input_required_interrupts_and_replays_the_tool_with_the_answer(
    connect: Connect, kit: Kit, backend: ScriptedBackend
) -> None:
    client = await connect()
    thread = client.thread()

    first = await thread.say("reserve lamp")

    (call,) = first.calls
    (interrupt,) = first.interrupts
    assert interrupt["reason"] == "input_required"
    assert interrupt["toolCallId"] == call["toolCallId"]
    assert interrupt["message"] == "How many?"
    assert interrupt["responseSchema"] == {"type": "string", "minLength": 1}
    assert first.results() == {}
    assert kit.count("reserve_stock") == 0

    refused = await thread.resume(resolved(interrupt["id"], ""))
    assert refused.types == ["RUN_STARTED", "RUN_ERROR"]
    assert refused.error["code"] == "RESUME_PAYLOAD_INVALID"

    second = await thread.resume(resolved(interrupt["id"], "3"))

    assert kit.calls["reserve_stock"] == [{"item": "lamp", "answer": "3"}]
    assert [ctx.answered for ctx in kit.contexts["reserve_stock"]] == [False, True]
    assert second.results()[call["toolCallId"]]["content"] == "reserved 3 x lamp"
    assert [e["type"] for e in second.with_call(call["toolCallId"])] == ["TOOL_CALL_RESULT"]
    assert answers_seen(backend)[call["toolCallId"]].content == "reserved 3 x lamp"
    assert second.outcome == {"type": "success"}


async def test_client_tool_named_like_a_server_tool_is_refused(connect: Connect, kit: Kit) -> None:
    client = await connect()
    thread = client.thread(tools=[*FRONTEND_TOOLS, frontend_tool("lookup_order")])

    reply = await thread.say("where is order A17")

    refusal = reply.refusal(422)
    assert refusal["code"] == "TOOL_NAME_CONFLICT"
    assert "lookup_order" in refusal["message"]
    assert refusal["details"] == ["lookup_order"]
    assert kit.count("lookup_order") == 0


async def test_edited_arguments_survive_an_input_required_replay(connect: Connect, kit: Kit) -> None:
    client = await connect()
    thread = client.thread()
    (approval,) = (await thread.say("gated audit")).interrupts

    asked = await thread.resume(resolved(approval["id"], {"approved": True, "editedArgs": {"note": "edited"}}))
    (question,) = asked.interrupts
    await thread.resume(resolved(question["id"], "compliance"))

    assert kit.calls["gated_audit"] == [{"note": "edited", "answer": "compliance"}]


async def test_a_tool_that_asks_again_after_its_answer_gets_an_error_result_not_a_second_interrupt(
    connect: Connect,
) -> None:
    runs: list[bool] = []

    @tool
    def stubborn(ctx: ToolContext) -> str:
        """Asks for a reason, whatever it is told."""
        runs.append(ctx.answered)
        raise InputRequired("Why?")

    backend = ScriptedBackend([Rule(r"stubborn", steps=[[Call("stubborn")]])], fallback="ok")
    thread = (await connect(tools=[stubborn], backend=backend)).thread()
    (asked,) = (await thread.say("stubborn")).interrupts

    done = await thread.resume(resolved(asked["id"], "because"))

    assert done.outcome == {"type": "success"}  # no second interrupt
    assert runs == [False, True]
    assert answers_seen(backend)[asked["toolCallId"]].error == "INPUT_REQUIRED_AGAIN"


def client_tool(name: str, parameters: Any) -> dict[str, Any]:
    return {"name": name, "description": "a client tool", "parameters": parameters}


@pytest.mark.parametrize(
    ("parameters", "pointer"),
    [
        pytest.param({"type": "object", "title": "<script>alert(1)</script>"}, "/title", id="markup"),
        pytest.param(
            {"type": "object", "properties": {"a": {"$ref": "https://evil.example/s.json"}}},
            "/properties/a/$ref",
            id="remote-ref",
        ),
        pytest.param({"type": "string"}, "", id="not-an-object"),
    ],
)
async def test_a_client_tool_with_an_unsafe_schema_is_refused(
    connect: Connect, kit: Kit, parameters: dict[str, Any], pointer: str
) -> None:
    client = await connect()
    thread = client.thread(tools=[client_tool("render_widget", parameters)])

    reply = await thread.say("where is order A17")

    refusal = reply.refusal(422)
    assert refusal["code"] == "INVALID_TOOL_SCHEMA"
    assert pointer in [detail["pointer"] for detail in refusal["details"]]
    assert kit.count("lookup_order") == 0


async def test_a_draft_07_client_schema_is_accepted_without_its_dialect(
    connect: Connect, backend: ScriptedBackend
) -> None:
    client = await connect()
    parameters = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "properties": {}}
    thread = client.thread(tools=[client_tool("render_widget", parameters)])

    reply = await thread.say("hello")

    assert reply.outcome == {"type": "success"}
    (seen,) = [t for t in backend.requests[-1].tools if t.name == "render_widget"]
    assert seen.parameters == {"type": "object", "properties": {}}


async def test_two_client_tools_with_one_name_are_refused(connect: Connect) -> None:
    client = await connect()
    twice = [client_tool("render_widget", {"type": "object"})] * 2

    reply = await client.thread(tools=twice).say("hello")

    assert reply.refusal(422)["code"] == "TOOL_NAME_CONFLICT"


async def test_the_client_tool_policy_can_be_turned_off(connect: Connect) -> None:
    client = await connect(client_tool_policy=None)

    reply = await client.thread(tools=[client_tool("render_widget", {"type": "string"})]).say("hello")

    assert reply.outcome == {"type": "success"}


async def test_arguments_are_validated_strictly_before_the_tool_runs(serve: Serve) -> None:
    """`{"amount": "999"}` must not run a `float` tool: binding alone (pydantic's lax mode) would coerce it."""
    paid: list[float] = []

    @tool
    def pay(amount: float) -> str:
        """Pay an amount."""
        paid.append(amount)
        return "paid"

    backend = ScriptedBackend([Rule(r"pay", steps=[[Call("pay", {"amount": "999"})]])], fallback="ok")
    client = (await serve(Adapter(backend, tools=[pay]))).client

    reply = await client.thread().say("pay")

    (result,) = reply.results().values()
    assert paid == []
    assert result["content"].startswith("Invalid arguments for pay")
