from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from typing import Any, Protocol

import httpx
import pytest
import respx
from ag_ui.core import AssistantMessage, Context, FunctionCall, Message, ResumeEntry, Tool, ToolMessage, UserMessage
from ag_ui.core import ToolCall as WireToolCall
from agui import NAVIGATE, nulls_in, resolved, run_events, run_input, user
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from adapter import Adapter, ConfigurationError, tool
from adapter.backends import (
    AGUIUpstream,
    BackendError,
    BackendInterrupt,
    BackendItem,
    DeferredToolCall,
    LateToolResult,
    ModelRequest,
    Passthrough,
    TextDelta,
    ToolCall,
    Usage,
)

URL = "https://agent.test/run"
SECRET = "tok-SECRET-0123456789"
SSE = {"content-type": "text/event-stream"}
ORDER_SCHEMA = {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}


def event(kind: str, **fields: Any) -> dict[str, Any]:
    return {"type": kind, **fields}


STARTED = event("RUN_STARTED", threadId="up-thread", runId="up-run")


def finished(**fields: Any) -> dict[str, Any]:
    return event("RUN_FINISHED", threadId="up-thread", runId="up-run", **fields)


def text(*deltas: str, message_id: str = "up-msg") -> list[dict[str, Any]]:
    content = [event("TEXT_MESSAGE_CONTENT", messageId=message_id, delta=delta) for delta in deltas]
    return [
        event("TEXT_MESSAGE_START", messageId=message_id, role="assistant"),
        *content,
        event("TEXT_MESSAGE_END", messageId=message_id),
    ]


def call(call_id: str, name: str, arguments: str = "{}") -> list[dict[str, Any]]:
    return [
        event("TOOL_CALL_START", toolCallId=call_id, toolCallName=name, parentMessageId="up-msg"),
        event("TOOL_CALL_ARGS", toolCallId=call_id, delta=arguments),
        event("TOOL_CALL_END", toolCallId=call_id),
    ]


def result(call_id: str, content: str) -> dict[str, Any]:
    return event("TOOL_CALL_RESULT", messageId=f"up-result-{call_id}", toolCallId=call_id, content=content, role="tool")


def sse(*frames: dict[str, Any] | list[dict[str, Any]] | str) -> bytes:
    """An SSE body: each dict as one `data:` event, each list as its events, each string as raw text."""
    out: list[str] = []
    for frame in frames:
        if isinstance(frame, str):
            out.append(frame)
        else:
            out += [f"data: {json.dumps(each)}\n\n" for each in (frame if isinstance(frame, list) else [frame])]
    return "".join(out).encode()


def ok(*frames: dict[str, Any] | list[dict[str, Any]] | str) -> httpx.Response:
    return httpx.Response(200, headers=SSE, content=sse(*frames))


def cut_after(*frames: dict[str, Any] | list[dict[str, Any]] | str, error: Exception) -> httpx.Response:
    """A stream that sends `frames`, then fails with `error`, as a dropped connection does."""

    async def body() -> AsyncIterator[bytes]:
        yield sse(*frames)
        raise error

    return httpx.Response(200, headers=SSE, content=body())


class MakeUpstream(Protocol):
    def __call__(self, **options: Any) -> AGUIUpstream: ...


@pytest.fixture
def router() -> respx.MockRouter:
    return respx.MockRouter(assert_all_called=False)


@pytest.fixture
async def make_upstream(router: respx.MockRouter) -> AsyncIterator[MakeUpstream]:
    """An AGUIUpstream whose client goes through the router; options go to the constructor."""
    clients: list[httpx.AsyncClient] = []

    def make(**options: Any) -> AGUIUpstream:
        client = httpx.AsyncClient(transport=httpx.MockTransport(router.async_handler))
        clients.append(client)
        options.setdefault("headers", {"authorization": f"Bearer {SECRET}"})
        return AGUIUpstream(URL, client=client, **options)

    yield make
    for client in clients:
        await client.aclose()


def upstream_runs(router: respx.MockRouter, *responses: httpx.Response | Exception) -> respx.Route:
    return router.post(URL).mock(side_effect=list(responses))


def bodies(route: respx.Route) -> list[dict[str, Any]]:
    return [json.loads(each.request.content) for each in route.calls]


def request(*, tools: Sequence[Tool] = (), resume: Sequence[ResumeEntry] = ()) -> ModelRequest:
    return ModelRequest(
        messages=[UserMessage(id="u1", content="hi")], tools=list(tools), thread_id="t1", run_id="r1", resume=resume
    )


async def items(backend: AGUIUpstream, model_request: ModelRequest | None = None) -> list[BackendItem]:
    return [item async for item in backend.stream(model_request or request())]


async def run(adapter: Adapter, body: dict[str, Any], *, resumed: bool = False) -> list[dict[str, Any]]:
    """One run through the engine; its stream must pass the baseline checks."""
    return await run_events(adapter, body, resumed=resumed)


def types(events: Sequence[dict[str, Any]]) -> list[str]:
    return [each["type"] for each in events]


@tool
def lookup_order(order_id: str) -> dict[str, Any]:
    """Look an order up."""
    return {"order": order_id, "status": "shipped"}


# Forwarding


async def test_the_request_is_forwarded_field_by_field(router: respx.MockRouter, make_upstream: MakeUpstream) -> None:
    route = upstream_runs(router, ok(STARTED, finished()), ok(STARTED, finished()))
    navigate = Tool.model_validate(NAVIGATE)
    entry = ResumeEntry(interrupt_id="up-int-1", status="resolved", payload={"ok": None}, metadata={"sig": "abc"})
    model_request = ModelRequest(
        messages=[UserMessage(id="u1", content="hi")],
        tools=[navigate],
        context=[Context(description="locale", value="fr-CH")],
        state={"cart": [], "note": None},
        thread_id="t1",
        run_id="r1",
        resume=[entry],
        forwarded_props={"tenant": "acme", "flags": [1, None]},
    )
    backend = make_upstream(headers={"authorization": f"Bearer {SECRET}", "x-tenant": "acme"})

    await items(backend, model_request)
    await items(backend, model_request)

    first, second = bodies(route)
    assert first == {
        "threadId": "t1",
        "runId": first["runId"],
        "parentRunId": "r1",
        "protocolVersion": "1.0",
        "messages": [{"id": "u1", "role": "user", "content": "hi"}],
        "tools": [NAVIGATE],
        "context": [{"description": "locale", "value": "fr-CH"}],
        "state": {"cart": [], "note": None},
        "resume": [
            {"interruptId": "up-int-1", "status": "resolved", "payload": {"ok": None}, "metadata": {"sig": "abc"}}
        ],
        "forwardedProps": {"tenant": "acme", "flags": [1, None]},
    }
    assert first["runId"].startswith("r1.")
    assert second["runId"].startswith("r1.")
    assert first["runId"] != second["runId"]
    sent = route.calls[0].request
    assert sent.headers["accept"] == "text/event-stream"
    assert sent.headers["content-type"] == "application/json"
    assert sent.headers["authorization"] == f"Bearer {SECRET}"
    assert sent.headers["x-tenant"] == "acme"


async def test_empty_resume_and_state_are_not_sent(router: respx.MockRouter, make_upstream: MakeUpstream) -> None:
    route = upstream_runs(router, ok(STARTED, finished()))

    await items(make_upstream())

    (body,) = bodies(route)
    assert set(body) == {
        "threadId",
        "runId",
        "parentRunId",
        "protocolVersion",
        "messages",
        "tools",
        "context",
        "forwardedProps",
    }
    assert body["forwardedProps"] == {}  # AG-UI 0.1 agents require the field: 422 without it
    assert nulls_in(body) == []


RUN_FIELDS: dict[str, Any] = {
    "forwardedProps": {"tenant": "acme", "page": {"id": 7, "draft": None}},
    "state": {"cart": ["A100"], "note": None},
    "context": [{"description": "locale", "value": "fr-CH"}],
    "parentRunId": "client-parent",
}


@pytest.mark.parametrize("field", sorted(RUN_FIELDS))
async def test_the_clients_run_fields_reach_the_upstream_on_every_step(
    router: respx.MockRouter, make_upstream: MakeUpstream, field: str
) -> None:
    route = upstream_runs(
        router,
        ok(STARTED, call("up-1", "lookup_order", '{"order_id": "A1"}'), finished()),
        ok(STARTED, text("Shipped."), finished()),
    )
    adapter = Adapter(make_upstream(), tools=[lookup_order])
    body = run_input("t1", [user("where is A1?")], **{field: RUN_FIELDS[field]})

    await run(adapter, body)

    first, second = bodies(route)  # the step before the server tool ran, and the one after
    for sent in (first, second):
        assert sent["protocolVersion"] == "1.0"
        assert sent["parentRunId"] == body["runId"]  # the upstream run is a child of ours, not of our parent
        assert sent["runId"].startswith(f"{body['runId']}.")
        if field == "parentRunId":
            assert "client-parent" not in json.dumps(sent)
        else:
            assert sent[field] == RUN_FIELDS[field]


@pytest.mark.parametrize("sent", [{}, {"forwardedProps": None}])
async def test_a_client_without_forwarded_props_sends_the_upstream_an_empty_object(
    router: respx.MockRouter, make_upstream: MakeUpstream, sent: dict[str, Any]
) -> None:
    route = upstream_runs(router, ok(STARTED, text("Hi"), finished()))

    await run(Adapter(make_upstream()), run_input("t1", [user("hi")], **sent))

    (body,) = bodies(route)
    assert body["forwardedProps"] == {}
    assert "state" not in body


async def test_the_upstream_sees_server_and_client_tools_as_client_tools(
    router: respx.MockRouter, make_upstream: MakeUpstream
) -> None:
    route = upstream_runs(router, ok(STARTED, text("Hi"), finished()))
    adapter = Adapter(make_upstream(), tools=[lookup_order])

    await run(adapter, run_input("t1", [user("hi")], tools=[NAVIGATE]))

    (body,) = bodies(route)
    assert body["tools"] == [
        {
            "name": "lookup_order",
            "description": "Look an order up.",
            "parameters": {**ORDER_SCHEMA, "additionalProperties": False},
        },
        NAVIGATE,
    ]


# Streaming back


async def test_text_and_passthrough_events_keep_their_order(
    router: respx.MockRouter, make_upstream: MakeUpstream
) -> None:
    upstream_runs(
        router,
        ok(
            STARTED,
            event("STEP_STARTED", stepName="plan"),
            event("STATE_SNAPSHOT", snapshot={"n": 1}),
            event("REASONING_START", messageId="up-r1"),
            event("REASONING_MESSAGE_START", messageId="up-r1", role="reasoning"),
            event("REASONING_MESSAGE_CONTENT", messageId="up-r1", delta="thinking"),
            event("REASONING_MESSAGE_END", messageId="up-r1"),
            event("REASONING_END", messageId="up-r1"),
            event("STEP_FINISHED", stepName="plan"),
            text("Hel", "lo"),
            event("STATE_DELTA", delta=[{"op": "replace", "path": "/n", "value": 2}]),
            event("ACTIVITY_SNAPSHOT", messageId="up-a1", activityType="progress", content={"pct": 50}),
            event("CUSTOM", name="ping", value={"x": 1}),
            event("RAW", event={"vendor": "thing"}),
            event("MESSAGES_SNAPSHOT", messages=[{"id": "u9", "role": "user", "content": "rewritten"}]),
            finished(),
        ),
    )

    events = await run(Adapter(make_upstream()), run_input("t1", [user("hi")]))

    assert types(events) == [
        "RUN_STARTED",
        "STEP_STARTED",
        "STATE_SNAPSHOT",
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_END",
        "REASONING_END",
        "STEP_FINISHED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_CONTENT",
        "STATE_DELTA",
        "ACTIVITY_SNAPSHOT",
        "CUSTOM",
        "RAW",
        "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ]
    assert events[1] == {"type": "STEP_STARTED", "stepName": "plan"}
    assert events[12]["delta"] == [{"op": "replace", "path": "/n", "value": 2}]
    assert events[0]["runId"] == events[-1]["runId"] != "up-run"
    assert {each["messageId"] for each in events if each["type"].startswith("TEXT_MESSAGE")} == {"up-msg"}
    assert "".join(each["delta"] for each in events if each["type"] == "TEXT_MESSAGE_CONTENT") == "Hello"


async def test_text_chunks_and_other_roles(router: respx.MockRouter, make_upstream: MakeUpstream) -> None:
    upstream_runs(
        router,
        ok(
            STARTED,
            event("TEXT_MESSAGE_CHUNK", messageId="up-c", role="assistant", delta="One "),
            event("TEXT_MESSAGE_CHUNK", delta="two"),
            event("TEXT_MESSAGE_START", messageId="up-dev", role="developer"),
            event("TEXT_MESSAGE_CONTENT", messageId="up-dev", delta="hidden"),
            event("TEXT_MESSAGE_END", messageId="up-dev"),
            event("TEXT_MESSAGE_CONTENT", messageId="up-unannounced", delta=" three"),
            finished(),
        ),
    )

    assert await items(make_upstream()) == [TextDelta("One "), TextDelta("two"), TextDelta(" three")]


async def test_keepalives_comments_and_other_sse_fields_are_skipped(
    router: respx.MockRouter, make_upstream: MakeUpstream
) -> None:
    body = (
        ": keep-alive\n\n"
        "retry: 1000\nid: 7\nevent: message\n"
        f"data: {json.dumps(STARTED)}\n\n"
        "\n\n: ping\n"
        'data: {"type": "TEXT_MESSAGE_CONTENT",\ndata:  "messageId": "m", "delta": "Hi"}\n\n'
        f"data: {json.dumps(finished())}"
    )
    upstream_runs(router, httpx.Response(200, headers={"content-type": "text/event-stream; charset=utf-8"}, text=body))

    assert await items(make_upstream()) == [TextDelta("Hi")]


async def test_the_upstreams_own_call_and_result_join_the_conversation(
    router: respx.MockRouter, make_upstream: MakeUpstream
) -> None:
    route = upstream_runs(
        router,
        ok(
            STARTED,
            text("Checking."),
            call("up-own-1", "search_docs", '{"q": "refunds"}'),
            result("up-own-1", "Refunds take 3 days."),
            call("call-lookup", "lookup_order", '{"order_id": "A17"}'),
            finished(outcome={"type": "success", "pendingToolCallIds": ["call-lookup"]}),
        ),
        ok(STARTED, text("It shipped."), finished()),
    )
    adapter = Adapter(make_upstream(), tools=[lookup_order])

    events = await run(adapter, run_input("t1", [user("where is A17?")]))

    own = [each for each in events if each.get("toolCallId") == "up-own-1"]
    assert types(own) == ["TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT"]
    assert own[-1]["content"] == "Refunds take 3 days."
    assert events[-1]["outcome"] == {"type": "success"}
    second = bodies(route)[1]["messages"]
    assert [(m["role"], m.get("toolCallId")) for m in second] == [
        ("user", None),
        ("assistant", None),
        ("tool", "up-own-1"),
        ("tool", "call-lookup"),
    ]
    assert [c["id"] for c in second[1]["toolCalls"]] == ["up-own-1", "call-lookup"]
    assert second[1]["content"] == "Checking."
    assert second[2]["content"] == "Refunds take 3 days."
    assert json.loads(second[3]["content"]) == {"order": "A17", "status": "shipped"}


async def test_an_own_call_without_a_result_stays_open(router: respx.MockRouter, make_upstream: MakeUpstream) -> None:
    upstream_runs(router, ok(STARTED, call("up-own-1", "search_docs", '{"q": 1}'), text("Done."), finished()))

    assert await items(make_upstream()) == [DeferredToolCall("up-own-1", "search_docs", '{"q": 1}'), TextDelta("Done.")]


def refund_called(*after: Message) -> ModelRequest:
    """A request whose thread holds the call r1 to `refund`, then `after`."""
    called = AssistantMessage(
        id="a1", tool_calls=[WireToolCall(id="r1", function=FunctionCall(name="refund", arguments="{}"))]
    )
    messages = [UserMessage(id="u1", content="refund"), called, *after]
    return ModelRequest(messages=messages, tools=[], thread_id="t1", run_id="r")


async def test_a_call_of_the_current_turn_streamed_again_is_a_restatement_and_its_result_counts(
    router: respx.MockRouter, make_upstream: MakeUpstream
) -> None:
    upstream_runs(router, ok(STARTED, call("r1", "refund", "{}"), result("r1", "refunded"), finished()))
    model_request = refund_called(ToolMessage(id="t1", tool_call_id="r1", content="yes"))

    assert await items(make_upstream(), model_request) == [LateToolResult("r1", "refunded")]


async def test_a_call_of_an_earlier_turn_under_the_same_id_is_a_new_call_for_the_engine_to_refuse(
    router: respx.MockRouter, make_upstream: MakeUpstream
) -> None:
    upstream_runs(router, ok(STARTED, call("r1", "refund", "{}"), finished()))
    answered = ToolMessage(id="t1", tool_call_id="r1", content="yes")
    model_request = refund_called(answered, UserMessage(id="u2", content="again"))

    assert await items(make_upstream(), model_request) == [DeferredToolCall("r1", "refund", "{}")]


async def test_a_result_before_its_calls_end_is_kept(router: respx.MockRouter, make_upstream: MakeUpstream) -> None:
    start, args, end = call("up-own-1", "search_docs", '{"q": 1}')
    upstream_runs(router, ok(STARTED, start, args, result("up-own-1", "found"), end, finished()))

    assert await items(make_upstream()) == [
        DeferredToolCall("up-own-1", "search_docs", '{"q": 1}'),
        LateToolResult("up-own-1", "found"),
    ]


async def test_tool_call_chunks_are_assembled(router: respx.MockRouter, make_upstream: MakeUpstream) -> None:
    upstream_runs(
        router,
        ok(
            STARTED,
            event("TOOL_CALL_CHUNK", toolCallId="c1", toolCallName="navigate", delta='{"pa'),
            event("TOOL_CALL_CHUNK", delta='th": "/a"}'),
            event("TOOL_CALL_CHUNK", toolCallId="c2", toolCallName="navigate", delta='{"path": "/b"}'),
            event("TOOL_CALL_CHUNK", toolCallId="c3", toolCallName="search_docs", delta="{}"),
            result("c3", "nothing"),
            finished(),
        ),
    )

    assert await items(make_upstream(), request(tools=[Tool.model_validate(NAVIGATE)])) == [
        ToolCall("c1", "navigate", '{"path": "/a"}'),
        ToolCall("c2", "navigate", '{"path": "/b"}'),
        DeferredToolCall("c3", "search_docs", "{}"),
        LateToolResult("c3", "nothing"),
    ]


async def test_a_result_with_content_parts_keeps_its_parts(
    router: respx.MockRouter, make_upstream: MakeUpstream
) -> None:
    parts = [{"type": "text", "text": "a chart"}]
    upstream_runs(router, ok(STARTED, call("c1", "chart"), {**result("c1", ""), "content": parts}, finished()))

    _, executed = await items(make_upstream())

    assert isinstance(executed, LateToolResult)
    assert not isinstance(executed.content, str)
    assert [part.model_dump(by_alias=True) for part in executed.content] == parts


async def test_usage_is_reported_only_with_both_counts(router: respx.MockRouter, make_upstream: MakeUpstream) -> None:
    usage = [
        {"provider": "openai", "model": "gpt-x", "inputTokens": 12, "outputTokens": 5, "totalTokens": 17},
        {"provider": "openai", "model": "gpt-y", "inputTokens": 3},
    ]
    upstream_runs(router, ok(STARTED, text("Hi"), finished(usage=usage)))

    assert await items(make_upstream()) == [TextDelta("Hi"), Usage(12, 5, "openai", "gpt-x")]


async def test_subagent_and_encrypted_reasoning_events_pass_through(
    router: respx.MockRouter, make_upstream: MakeUpstream
) -> None:
    passed = [
        event("SUBAGENT_STARTED", subagentRunId="sub-1", name="helper"),
        event("TEXT_MESSAGE_CONTENT", messageId="s", delta="from the helper", subagentRunId="sub-1"),
        event("SUBAGENT_FINISHED", subagentRunId="sub-1"),
        event("REASONING_ENCRYPTED_VALUE", subtype="message", entityId="up-msg", encryptedValue="opaque"),
    ]
    upstream_runs(router, ok(STARTED, *passed, text("Hi"), finished()))

    *forwarded, said = await items(make_upstream())

    assert said == TextDelta("Hi")
    assert [item.event.model_dump(by_alias=True) for item in forwarded if isinstance(item, Passthrough)] == passed


async def test_passthrough_items_carry_the_validated_event(
    router: respx.MockRouter, make_upstream: MakeUpstream
) -> None:
    upstream_runs(router, ok(STARTED, event("STATE_SNAPSHOT", snapshot={"a": [1]}, timestamp=5), finished()))

    (item,) = await items(make_upstream())

    assert isinstance(item, Passthrough)
    assert item.event.model_dump(mode="json", by_alias=True, exclude_none=True) == {
        "type": "STATE_SNAPSHOT",
        "timestamp": 5,
        "snapshot": {"a": [1]},
    }


# The upstream's own interrupts


CONFIRM = {
    "id": "up-int-1",
    "reason": "confirmation",
    "message": "Really delete the draft?",
    "responseSchema": {"type": "object", "properties": {"yes": {"type": "boolean"}}, "required": ["yes"]},
    "metadata": {"node": "confirm"},
}


async def test_an_upstream_interrupt_passes_through_and_its_answer_goes_back_unchanged(
    router: respx.MockRouter, make_upstream: MakeUpstream
) -> None:
    route = upstream_runs(
        router,
        ok(STARTED, text("One moment."), finished(outcome={"type": "interrupt", "interrupts": [CONFIRM]})),
        ok(STARTED, text("Deleted."), finished()),
    )
    adapter = Adapter(make_upstream())

    first = await run(adapter, run_input("t1", [user("delete the draft")]))
    entry = {**resolved("up-int-1", {"yes": True, "extra": [1, None]}), "metadata": {"sig": "s-1"}}
    second = await run(adapter, run_input("t1", [], resume=[entry]), resumed=True)

    assert first[-1]["outcome"] == {"type": "interrupt", "interrupts": [CONFIRM]}
    upstream_first, upstream_second = bodies(route)
    assert "resume" not in upstream_first
    assert upstream_second["resume"] == [entry]
    assert [m["role"] for m in upstream_second["messages"]] == ["user", "assistant"]
    assert second[-1]["outcome"] == {"type": "success"}
    assert "Deleted." in [each.get("delta") for each in second]


async def test_an_upstream_interrupt_is_forwarded_once(router: respx.MockRouter, make_upstream: MakeUpstream) -> None:
    route = upstream_runs(
        router,
        ok(STARTED, finished(outcome={"type": "interrupt", "interrupts": [CONFIRM]})),
        ok(STARTED, call("call-lookup", "lookup_order", '{"order_id": "A1"}'), finished()),
        ok(STARTED, text("Done."), finished()),
    )
    adapter = Adapter(make_upstream(), tools=[lookup_order])

    await run(adapter, run_input("t1", [user("go")]))
    await run(adapter, run_input("t1", [], resume=[resolved("up-int-1", {"yes": True})]), resumed=True)

    assert ["resume" in body for body in bodies(route)] == [False, True, False]


async def test_an_interrupt_outcome_is_a_backend_interrupt(
    router: respx.MockRouter, make_upstream: MakeUpstream
) -> None:
    upstream_runs(router, ok(STARTED, finished(outcome={"type": "interrupt", "interrupts": [CONFIRM]})))

    (item,) = await items(make_upstream())

    assert isinstance(item, BackendInterrupt)
    assert [i.model_dump(mode="json", by_alias=True, exclude_none=True) for i in item.interrupts] == [CONFIRM]


async def test_every_own_call_left_open_at_an_interrupt_stays_open(
    router: respx.MockRouter, make_upstream: MakeUpstream
) -> None:
    approval = {"id": "up-int-2", "reason": "tool_call", "toolCallId": "up-own-1"}
    upstream_runs(
        router,
        ok(
            STARTED,
            call("up-own-1", "delete_file", '{"path": "/x"}'),
            call("up-own-2", "search_docs"),
            finished(outcome={"type": "interrupt", "interrupts": [approval]}),
        ),
    )

    first, second, interrupt = await items(make_upstream())

    assert first == DeferredToolCall("up-own-1", "delete_file", '{"path": "/x"}')
    assert second == DeferredToolCall("up-own-2", "search_docs", "{}")  # the interrupt names no call: still open
    assert isinstance(interrupt, BackendInterrupt)
    assert [i.tool_call_id for i in interrupt.interrupts] == ["up-own-1"]


async def test_state_the_upstream_changed_survives_a_suspension(
    router: respx.MockRouter, make_upstream: MakeUpstream
) -> None:
    route = upstream_runs(
        router,
        ok(STARTED, event("STATE_SNAPSHOT", snapshot={"n": 2}), call("c1", "navigate"), finished()),
        ok(STARTED, finished()),
    )
    adapter = Adapter(make_upstream(), frontend_outcome="interrupt")

    first = await run(adapter, run_input("t1", [user("hi")], tools=[NAVIGATE], state={"n": 1}))
    interrupt_id = first[-1]["outcome"]["interrupts"][0]["id"]
    await run(adapter, run_input("t1", [], tools=[NAVIGATE], resume=[resolved(interrupt_id, {})]), resumed=True)

    assert [each["snapshot"] for each in first if each["type"] == "STATE_SNAPSHOT"][-1] == {"n": 2}
    assert bodies(route)[1]["state"] == {"n": 2}


# Failures


def raising(error: type[httpx.RequestError]) -> Callable[[httpx.Request], httpx.Response]:
    def handler(request: httpx.Request) -> httpx.Response:
        raise error("failed", request=request)

    return handler


TRACE = "Traceback (most recent call last):\n  File \"/srv/agent.py\", line 3\nKeyError: 'x'"


@pytest.mark.parametrize(
    ("response", "message"),
    [
        pytest.param(httpx.Response(500, text=TRACE), "The upstream agent failed (HTTP 500).", id="500"),
        pytest.param(
            httpx.Response(401, json={"detail": f"bad token {SECRET}"}),
            "The upstream agent refused the credentials (HTTP 401).",
            id="401",
        ),
        pytest.param(
            httpx.Response(422, json={"detail": [{"loc": ["body", "messages"], "msg": "field required"}]}),
            "The upstream agent rejected the request (HTTP 422).",
            id="422",
        ),
        pytest.param(
            httpx.Response(200, json={"messages": []}),
            "The upstream agent did not answer with an event stream.",
            id="json-body",
        ),
        pytest.param(
            httpx.Response(200, text="<html>login</html>", headers={"content-type": "text/html"}),
            "The upstream agent did not answer with an event stream.",
            id="html-body",
        ),
        pytest.param(
            ok(STARTED, "data: {not json\n\n"), "The upstream agent sent an event that is not JSON.", id="invalid-json"
        ),
        pytest.param(
            ok(STARTED, event("TOOL_CALL_START", toolCallId="c1")),
            "The upstream agent sent an invalid TOOL_CALL_START event.",
            id="invalid-event",
        ),
        pytest.param(
            ok(STARTED, event("NO_SUCH_EVENT")), "The upstream agent sent an invalid NO_SUCH_EVENT event.", id="unknown"
        ),
        pytest.param(
            ok(STARTED, {"type": "<script>" * 20}), "The upstream agent sent an invalid event.", id="odd-type"
        ),
        pytest.param(ok(STARTED, text("Hi")), "ended without RUN_FINISHED or RUN_ERROR", id="no-terminal-event"),
        pytest.param(ok(), "ended without RUN_FINISHED or RUN_ERROR", id="empty-stream"),
        pytest.param(
            ok(STARTED, event("RUN_ERROR", message=f"{SECRET} Bearer {SECRET}\n{TRACE}", code="BOOM")),
            "The upstream agent failed: *** ***",
            id="run-error",
        ),
        pytest.param(
            ok(STARTED, event("RUN_ERROR", message="")), "The upstream agent failed: no details", id="run-error-empty"
        ),
        pytest.param(
            ok(STARTED, finished(outcome={"type": "cancelled"})),
            "The upstream agent cancelled its run.",
            id="cancelled-outcome",
        ),
        pytest.param(
            ok(STARTED, event("TOOL_CALL_ARGS", toolCallId="ghost", delta="{}")),
            "arguments for a call it never started",
            id="args-for-unknown-call",
        ),
        pytest.param(
            ok(STARTED, event("TOOL_CALL_END", toolCallId="ghost")),
            "ended a tool call it never started",
            id="end-ghost",
        ),
        pytest.param(
            ok(STARTED, event("TOOL_CALL_START", toolCallId="c1", toolCallName="x"), finished()),
            "finished its run with a tool call still open",
            id="call-left-open",
        ),
        pytest.param(
            ok(STARTED, event("TOOL_CALL_CHUNK", delta="{}")), "a tool-call chunk that names no call", id="chunk-no-id"
        ),
        pytest.param(
            ok(STARTED, event("TOOL_CALL_CHUNK", toolCallId="c1", delta="{}")),
            "started a tool call without a name",
            id="chunk-no-name",
        ),
        pytest.param(raising(httpx.ConnectError), "The connection to the upstream agent failed.", id="connect-error"),
        pytest.param(raising(httpx.ConnectTimeout), "The upstream agent did not answer in time.", id="connect-timeout"),
        pytest.param(raising(httpx.ReadTimeout), "The upstream agent did not answer in time.", id="read-timeout"),
        pytest.param(
            cut_after(STARTED, error=httpx.RemoteProtocolError("peer closed")),
            "The connection to the upstream agent failed.",
            id="connection-dropped",
        ),
        pytest.param(
            cut_after(STARTED, error=httpx.ReadTimeout("slow")),
            "The upstream agent did not answer in time.",
            id="read-timeout-mid-stream",
        ),
    ],
)
async def test_every_failure_is_an_upstream_error_with_a_safe_message(
    router: respx.MockRouter,
    make_upstream: MakeUpstream,
    caplog: pytest.LogCaptureFixture,
    response: httpx.Response | Callable[[httpx.Request], httpx.Response],
    message: str,
) -> None:
    router.post(URL).mock(side_effect=response) if callable(response) else upstream_runs(router, response)

    with caplog.at_level(logging.DEBUG):
        events = await run(Adapter(make_upstream()), run_input("t1", [user("hi")]))

    error = events[-1]
    assert (error["type"], error["code"]) == ("RUN_ERROR", "UPSTREAM_ERROR")
    assert message in error["message"]
    assert SECRET not in error["message"]
    assert "Traceback" not in error["message"]
    assert SECRET not in caplog.text


@pytest.mark.parametrize(
    "error",
    [
        pytest.param(httpx.RemoteProtocolError("peer closed"), id="connection-dropped"),
        pytest.param(httpx.ReadError("reset"), id="read-error"),
        pytest.param(httpx.ReadTimeout("slow"), id="read-timeout"),
    ],
)
async def test_a_stream_broken_mid_text_closes_the_text_first(
    router: respx.MockRouter, make_upstream: MakeUpstream, error: Exception
) -> None:
    upstream_runs(router, cut_after(STARTED, text("Hel")[:2], error=error))

    events = await run(Adapter(make_upstream()), run_input("t1", [user("hi")]))

    assert types(events) == [
        "RUN_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_ERROR",
    ]
    assert events[-1]["code"] == "UPSTREAM_ERROR"


async def test_a_step_a_passthrough_left_open_is_finished_before_the_error(
    router: respx.MockRouter, make_upstream: MakeUpstream
) -> None:
    upstream_runs(
        router,
        cut_after(
            STARTED,
            event("STEP_STARTED", stepName="search"),
            event("REASONING_START", messageId="up-r1"),
            text("Hel")[:2],
            error=httpx.RemoteProtocolError("peer closed"),
        ),
    )

    events = await run(Adapter(make_upstream()), run_input("t1", [user("hi")]))

    assert types(events) == [
        "RUN_STARTED",
        "STEP_STARTED",
        "REASONING_START",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "REASONING_END",
        "STEP_FINISHED",
        "RUN_ERROR",
    ]
    assert events[-2] == {"type": "STEP_FINISHED", "stepName": "search"}


async def test_a_failure_is_raised_as_a_backend_error(router: respx.MockRouter, make_upstream: MakeUpstream) -> None:
    upstream_runs(router, httpx.Response(502))

    with pytest.raises(BackendError) as caught:
        await items(make_upstream())

    assert (caught.value.code, caught.value.message) == ("UPSTREAM_ERROR", "The upstream agent failed (HTTP 502).")


# Construction and lifecycle


def test_an_injected_client_needs_a_url_target() -> None:
    app = Starlette()

    with pytest.raises(ConfigurationError, match="URL target"):
        AGUIUpstream(app, client=httpx.AsyncClient())


@pytest.mark.parametrize("target", ["ftp://agent.test/run", "agent.test/run", "http://"])
def test_the_target_must_be_an_http_url(target: str) -> None:
    with pytest.raises(ConfigurationError):
        AGUIUpstream(target)


async def test_repr_shows_no_credentials_or_query() -> None:
    async with AGUIUpstream("https://user:pass@agent.test:8443/run?key=secret") as backend:
        assert repr(backend) == "AGUIUpstream(url='https://agent.test:8443/run')"
    app = Starlette()
    async with AGUIUpstream(app) as in_process:
        assert repr(in_process) == f"AGUIUpstream(app={app!r})"


async def test_aclose_closes_only_a_client_the_backend_made() -> None:
    injected = httpx.AsyncClient()
    borrowed = AGUIUpstream(URL, client=injected)
    async with AGUIUpstream(URL) as owned:
        assert not owned.client.is_closed

    await borrowed.aclose()

    assert owned.client.is_closed
    assert borrowed.client is injected
    assert not injected.is_closed
    await injected.aclose()


async def test_a_per_request_timeout_is_sent(router: respx.MockRouter, make_upstream: MakeUpstream) -> None:
    route = upstream_runs(router, ok(STARTED, finished()))

    await items(make_upstream(timeout=httpx.Timeout(7.0, connect=2.0)))

    assert route.calls[0].request.extensions["timeout"] == {"connect": 2.0, "read": 7.0, "write": 7.0, "pool": 7.0}


# In-process upstream apps: streaming, timeouts, disconnects


class Gate:
    """An in-process upstream that sends some text, then waits for the test before it finishes."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.stopped = asyncio.Event()
        self.app = Starlette(routes=[Route("/", self.run, methods=["POST"])])

    async def run(self, request: Request) -> Response:
        await request.body()
        return StreamingResponse(self.events(), media_type="text/event-stream")

    async def events(self) -> AsyncIterator[bytes]:
        try:
            yield sse(STARTED, text("Hel")[:2])
            await self.release.wait()
            yield sse(event("TEXT_MESSAGE_CONTENT", messageId="up-msg", delta="lo"), finished())
        finally:
            self.stopped.set()


async def test_an_in_process_upstream_streams_as_it_goes() -> None:
    gate = Gate()
    async with AGUIUpstream(gate.app) as backend:
        step = backend.stream(request())
        assert isinstance(step, AsyncGenerator)

        first = await asyncio.wait_for(anext(step), 5)
        gate.release.set()
        rest = [item async for item in step]

    assert [first, *rest] == [TextDelta("Hel"), TextDelta("lo")]


async def test_closing_the_step_early_stops_the_in_process_upstream() -> None:
    gate = Gate()
    async with AGUIUpstream(gate.app) as backend:
        step = backend.stream(request())
        assert isinstance(step, AsyncGenerator)

        assert await asyncio.wait_for(anext(step), 5) == TextDelta("Hel")
        await step.aclose()

        await asyncio.wait_for(gate.stopped.wait(), 5)
    assert not gate.release.is_set()


async def test_cancelling_the_consumer_stops_the_in_process_upstream() -> None:
    gate = Gate()
    received: list[BackendItem] = []

    async def consume(backend: AGUIUpstream) -> None:
        async for item in backend.stream(request()):
            received.append(item)

    async with AGUIUpstream(gate.app) as backend:
        task = asyncio.create_task(consume(backend))
        while not received:
            await asyncio.sleep(0.01)
        task.cancel()

        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.wait_for(gate.stopped.wait(), 5)
    assert received == [TextDelta("Hel")]


async def test_a_silent_in_process_upstream_times_out() -> None:
    gate = Gate()

    async with AGUIUpstream(gate.app, timeout=0.2) as backend:
        with pytest.raises(BackendError) as caught:
            await items(backend)

    assert (caught.value.code, caught.value.message) == ("UPSTREAM_ERROR", "The upstream agent did not answer in time.")
    await asyncio.wait_for(gate.stopped.wait(), 5)


async def test_a_slow_starting_in_process_upstream_times_out() -> None:
    started = asyncio.Event()

    async def run(request: Request) -> Response:
        started.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async with AGUIUpstream(Starlette(routes=[Route("/", run, methods=["POST"])]), timeout=0.2) as backend:
        with pytest.raises(BackendError, match="did not answer in time"):
            await items(backend)

    assert started.is_set()


async def test_an_in_process_upstream_that_raises_is_an_upstream_error(caplog: pytest.LogCaptureFixture) -> None:
    async def run(request: Request) -> Response:
        raise RuntimeError(f"database password is {SECRET}")

    async with AGUIUpstream(Starlette(routes=[Route("/", run, methods=["POST"])])) as backend:
        with caplog.at_level(logging.ERROR), pytest.raises(BackendError) as caught:
            await items(backend)

    assert caught.value.message == "The upstream agent failed (HTTP 500)."
    assert "the in-process app failed" in caplog.text


async def test_an_in_process_upstream_that_breaks_mid_stream_is_an_upstream_error() -> None:
    async def events() -> AsyncIterator[bytes]:
        yield sse(STARTED, text("Hel")[:2])
        raise RuntimeError("lost the model")

    async def run(request: Request) -> Response:
        return StreamingResponse(events(), media_type="text/event-stream")

    received: list[BackendItem] = []
    async with AGUIUpstream(Starlette(routes=[Route("/", run, methods=["POST"])])) as backend:
        with pytest.raises(BackendError, match="The connection to the upstream agent failed."):
            async for item in backend.stream(request()):
                received.append(item)

    assert received == [TextDelta("Hel")]


async def test_an_in_process_app_that_sends_no_response_is_an_upstream_error() -> None:
    async def silent(scope: Any, receive: Any, send: Any) -> None:
        await receive()

    async with AGUIUpstream(silent) as backend:
        with pytest.raises(BackendError, match="The connection to the upstream agent failed."):
            await items(backend)


async def test_an_in_process_upstream_that_sends_on_after_the_terminal_event_is_stopped_quietly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    after = 0

    async def events() -> AsyncIterator[bytes]:
        nonlocal after
        yield sse(STARTED, text("Hi"), finished())
        for _ in range(1000):
            yield b": after the end, nobody reads this\n\n"
            after += 1

    async def run(request: Request) -> Response:
        return StreamingResponse(events(), media_type="text/event-stream")

    with caplog.at_level(logging.WARNING):
        async with AGUIUpstream(Starlette(routes=[Route("/", run, methods=["POST"])])) as backend:
            assert await items(backend) == [TextDelta("Hi")]

    assert after < 1000, "the app saw the reader leave, as a server's app does, and stopped"
    assert caplog.records == []


async def test_the_in_process_upstream_receives_the_request() -> None:
    seen: list[dict[str, Any]] = []

    async def run(request: Request) -> Response:
        seen.append({"body": json.loads(await request.body()), "accept": request.headers["accept"]})
        return Response(sse(STARTED, finished()), media_type="text/event-stream")

    async with AGUIUpstream(Starlette(routes=[Route("/", run, methods=["POST"])])) as backend:
        assert await items(backend) == []

    assert seen[0]["accept"] == "text/event-stream"
    assert seen[0]["body"]["messages"] == [{"id": "u1", "role": "user", "content": "hi"}]


async def test_the_upstreams_message_ids_are_kept_unless_the_thread_already_uses_them(
    router: respx.MockRouter, make_upstream: MakeUpstream
) -> None:
    upstream_runs(
        router,
        ok(STARTED, call("up-own-1", "search_docs", '{"q": 1}'), result("up-own-1", "found"), finished()),
        ok(STARTED, text("Done."), finished()),
    )
    adapter = Adapter(make_upstream())

    await run(adapter, run_input("t1", [user("search")]))
    stored = await adapter.thread("t1")
    assert stored is not None
    second = await run(adapter, run_input("t1", [*stored["messages"], user("more")]))

    (assistant, answer) = [m for m in stored["messages"] if m["role"] != "user"]
    assert (assistant["id"], answer["id"]) == ("up-msg", "up-result-up-own-1")
    (started,) = [e["messageId"] for e in second if e["type"] == "TEXT_MESSAGE_START"]
    assert started != "up-msg"  # the upstream named a message the thread already has: we mint one
