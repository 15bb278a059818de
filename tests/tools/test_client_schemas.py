"""Every schema a client sends is checked when it is declared, and none can stall the server."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import pytest
from agui import frontend_tool, resolved

from adapter.backends import ScriptedBackend

if TYPE_CHECKING:
    from conftest import Connect, MakeAdapter, Serve

EVIL = "^(a+)+$"


def navigate(result_schema: Any) -> dict[str, Any]:
    """The scenarios' `navigate` client tool, declaring what its answer must look like."""
    return {**frontend_tool("navigate", path={"type": "string"}), "metadata": {"resultSchema": result_schema}}


@pytest.mark.parametrize(
    ("result_schema", "pointer", "rule"),
    [
        pytest.param({"type": "string", "pattern": EVIL}, "/pattern", "pattern-redos", id="catastrophic-pattern"),
        pytest.param({"type": "string", "pattern": "(?=a)a"}, "/pattern", "pattern-invalid", id="lookahead"),
        pytest.param({"$ref": "https://evil.example/s.json"}, "/$ref", "ref-remote", id="remote-ref"),
        pytest.param({"$ref": "#/$defs/missing"}, "/$ref", "ref-unresolvable", id="dangling-ref"),
        pytest.param(
            {"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}, "/$defs/a/$ref", "ref-loop", id="loop"
        ),
        pytest.param({"type": 5}, "/type", "metaschema", id="type-5"),
        pytest.param("string", "", "root-type", id="not-a-schema"),
    ],
)
async def test_a_hostile_result_schema_is_refused_before_the_run_starts(
    connect: Connect, backend: ScriptedBackend, result_schema: Any, pointer: str, rule: str
) -> None:
    client = await connect()
    thread = client.thread(tools=[navigate(result_schema)])

    reply = await thread.say("go to settings")

    refusal = reply.refusal(422)
    assert refusal["code"] == "INVALID_TOOL_SCHEMA"
    details = refusal["details"]
    assert {"schema": "/tools/0/metadata/resultSchema", "pointer": pointer, "rule": rule} in [
        {key: detail[key] for key in ("schema", "pointer", "rule")} for detail in details
    ]
    assert len(backend.requests) == 0


async def test_a_sound_result_schema_checks_the_answer(connect: Connect) -> None:
    client = await connect(frontend_outcome="interrupt")
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    thread = client.thread(tools=[navigate(schema)])
    (interrupt,) = (await thread.say("go to settings")).interrupts

    wrong = await thread.resume(resolved(interrupt["id"], {"ok": "yes"}))
    right = await thread.resume(resolved(interrupt["id"], {"ok": True}))

    assert wrong.error["code"] == "RESUME_PAYLOAD_INVALID"
    assert [detail["pointer"] for detail in wrong.error["metadata"]["details"]] == ["/ok"]
    assert right.outcome == {"type": "success"}


async def test_a_catastrophic_pattern_cannot_stall_the_server_even_unchecked(
    serve: Serve, make_adapter: MakeAdapter
) -> None:
    """With the schema policy switched off, the pattern is matched by RE2: linear, the loop keeps serving."""
    served = await serve(make_adapter(client_tool_policy=None, frontend_outcome="interrupt"))
    thread = served.client.thread(tools=[navigate({"type": "string", "pattern": EVIL})])
    (interrupt,) = (await thread.say("go to settings")).interrupts

    answered, health = await asyncio.gather(
        thread.resume(resolved(interrupt["id"], "a" * 4096 + "!")), served.client.get("/health")
    )

    assert answered.error["code"] == "RESUME_PAYLOAD_INVALID"
    assert health.status_code == 200
