"""adapter.client: lifecycle checks as it reads, messages kept as a client keeps them, chunks read as the adapter
reads them, interrupts and pendingToolCallIds, and resume helpers, against hand-made streams and the demo."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from ag_ui.core import ResumeEntry, TextMessageContentEvent, ToolCallChunkEvent
from hypothesis import given
from hypothesis import strategies as st
from served_demo import serve_agui_demo
from starlette.routing import Mount

import adapter.client
from adapter.backends import BackendError, ToolCall
from adapter.backends._upstream_events import EventReader  # private on purpose: chunks are held to the adapter's reader
from adapter.client import (
    AGUIClient,
    CallReader,
    ProtocolError,
    RequestRefused,
    approved,
    cancelled,
    denied,
    fold_messages,
    gated_call,
    parse_sse,
    resolved,
)
from examples.demo import build_app

STARTED = {"type": "RUN_STARTED", "threadId": "t", "runId": "r"}
FINISHED = {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}
INPUT = {"threadId": "t", "runId": "r", "messages": [], "tools": [], "context": [], "state": {}, "forwardedProps": {}}


def sse(*events: dict[str, Any] | str) -> bytes:
    return "".join(e if isinstance(e, str) else f"data: {json.dumps(e)}\n\n" for e in events).encode()


def serving(body: bytes, status: int = 200, content_type: str = "text/event-stream") -> AGUIClient:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, content=body, headers={"content-type": content_type})

    http = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return AGUIClient("http://agent.test/", http=http)


def demo(tmp_path: Path, frontend_outcome: Any = "interrupt") -> Any:
    app = build_app(str(tmp_path / "demo.db"), frontend_outcome=frontend_outcome)
    return next(route.app for route in app.routes if isinstance(route, Mount) and route.path == "/agui")


TEXT_CHUNKS = [
    {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m", "role": "assistant", "delta": "H"},
    {"type": "TEXT_MESSAGE_CHUNK", "delta": "i"},
]
TEXT = [
    {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "Hi"},
    {"type": "TEXT_MESSAGE_END", "messageId": "m"},
]


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(sse(STARTED, *TEXT, FINISHED, {"type": "RUN_ERROR", "message": "flush failed"}), id="late-error"),
        pytest.param(sse({**STARTED, "runId": "replayed"}, FINISHED, STARTED, *TEXT, FINISHED), id="two-runs"),
        pytest.param(
            sse(
                STARTED, TEXT_CHUNKS[0], {"type": "RAW", "event": {}}, {**TEXT_CHUNKS[1], "role": "assistant"}, FINISHED
            ),
            id="raw-stands-aside-and-a-role-repeats-unchanged",
        ),
        pytest.param(
            sse({**STARTED, "runId": "replayed"}, {"type": "RUN_ERROR", "message": "x"}, STARTED, FINISHED),
            id="after-error",
        ),
    ],
)
async def test_what_comes_after_a_closed_run_by_the_rules_is_no_problem(body: bytes) -> None:
    """LIFE-3 (1.0 and 1.1): after RUN_FINISHED a late RUN_ERROR, or a new run; after RUN_ERROR, a new run."""
    async with serving(body) as client:
        run = await client.run(INPUT)

    assert run.problems == []
    assert run.invalid == []
    assert run.text == "Hi" or b"Hi" not in body


@pytest.mark.parametrize(
    ("body", "rule"),
    [
        pytest.param(sse(*TEXT, FINISHED), "LIFE-1", id="no-run-started"),
        pytest.param(sse(STARTED, STARTED, FINISHED), "LIFE-5", id="run-started-while-active"),
        pytest.param(sse(STARTED, *TEXT), "LIFE-3", id="no-terminal-event"),
        pytest.param(sse(STARTED, FINISHED, *TEXT), "LIFE-3", id="event-after-terminal"),
        pytest.param(sse(STARTED, {"type": "RUN_ERROR", "message": "x"}, *TEXT), "LIFE-3", id="event-after-run-error"),
        pytest.param(
            sse(STARTED, FINISHED, *[{"type": "RUN_ERROR", "message": "x"}] * 2), "LIFE-3", id="two-late-errors"
        ),
        pytest.param(sse(STARTED, *TEXT[:2], FINISHED), "LIFE-4", id="text-open-at-finish"),
        pytest.param(
            sse(STARTED, {"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "f"}, FINISHED),
            "LIFE-4",
            id="call-open-at-finish",
        ),
        pytest.param(sse(STARTED, {"type": "TOOL_CALL_END", "toolCallId": "c"}, FINISHED), "LIFE-4", id="end-unopened"),
        pytest.param(sse({**STARTED, "runId": "other"}, FINISHED), "LIFE-2", id="another-runs-ids"),
        pytest.param(sse(STARTED) + b"data: {not json\n\n" + sse(FINISHED), "TRANS-3", id="not-json"),
        pytest.param(sse(STARTED, FINISHED).replace(b"\n", b"\r\n"), "TRANS-3", id="crlf"),
        pytest.param(sse(STARTED) + b'data: {"type": "RUN_FINISHED"', "TRANS-4", id="partial-frame"),
        pytest.param(b"", "LIFE-1", id="empty"),
        pytest.param(sse(STARTED, {"type": "TEXT_MESSAGE_CHUNK", "delta": "x"}, FINISHED), "TXT-5", id="chunk-no-id"),
        pytest.param(sse(STARTED, TEXT[1], FINISHED), "LIFE-4", id="content-without-start"),
        pytest.param(
            sse(STARTED, {**TEXT[0], "subagentRunId": "s1"}, {**TEXT[1], "subagentRunId": "s2"}, TEXT[2], FINISHED),
            "TXT-5",
            id="another-subagents-content",
        ),
        pytest.param(
            sse(STARTED, *TEXT_CHUNKS, {**TEXT_CHUNKS[1], "role": "user"}, FINISHED), "TXT-5", id="chunk-role-changes"
        ),
        pytest.param(
            sse(STARTED, TEXT_CHUNKS[0], {"type": "CUSTOM", "name": "n", "value": 1}, TEXT_CHUNKS[1], FINISHED),
            "TXT-5",
            id="custom-ends-the-chunk-stream",
        ),
        pytest.param(
            sse(STARTED, {"type": "TOOL_CALL_CHUNK", "toolCallId": "c", "delta": "{}"}, FINISHED),
            "TOOL-7",
            id="first-tool-chunk-without-a-name",
        ),
        pytest.param(
            sse(
                STARTED,
                {
                    "type": "TOOL_CALL_CHUNK",
                    "toolCallId": "c",
                    "toolCallName": "f",
                    "parentMessageId": "a",
                    "delta": "",
                },
                {"type": "TOOL_CALL_CHUNK", "toolCallId": "c", "parentMessageId": "b", "delta": "{}"},
                FINISHED,
            ),
            "TOOL-7",
            id="tool-chunk-moves-to-another-message",
        ),
    ],
)
async def test_a_broken_stream_is_named_with_its_rule(body: bytes, rule: str) -> None:
    async with serving(body) as client:
        with pytest.raises(ProtocolError, match=rule) as raised:
            await client.run(INPUT)
        assert raised.value.run.problems

        client.strict = False
        run = await client.run(INPUT)
        assert any(rule in problem for problem in run.problems), run.problems

        client.strict = True
        with pytest.raises(ProtocolError, match=rule):
            async for _ in client.stream(INPUT):
                pass


async def test_a_clean_stream_yields_parsed_events_and_no_problem() -> None:
    async with serving(sse(STARTED, *TEXT, FINISHED)) as client:
        events = [event async for event in client.stream(INPUT)]
        run = await client.run(INPUT)

    assert [event.type for event in events] == ["RUN_STARTED", *(e["type"] for e in TEXT), "RUN_FINISHED"]
    assert isinstance(events[2], TextMessageContentEvent)
    assert run.problems == run.invalid == []
    assert run.text == "Hi"
    assert run.outcome == {"type": "success"}


async def test_an_answer_without_a_stream_is_refused_or_returned() -> None:
    body = json.dumps({"error": {"code": "INVALID_INPUT"}}).encode()
    async with serving(body, status=422, content_type="application/json") as client:
        with pytest.raises(RequestRefused, match="HTTP 422"):
            await client.run(INPUT)
        client.strict = False
        run = await client.run(INPUT)

    assert (run.status, run.is_stream, run.ending()) == (422, False, "HTTP 422")
    assert json.loads(run.body)["error"]["code"] == "INVALID_INPUT"


REFUND_ARGS = '{"id": "A1"}'


def test_messages_fold_as_a_client_keeps_them() -> None:
    before = [{"id": "u0", "role": "user", "content": "old"}]
    events: list[dict[str, Any]] = [
        STARTED,
        {"type": "MESSAGES_SNAPSHOT", "messages": [{"id": "u1", "role": "user", "content": "refund A1"}]},
        {"type": "TEXT_MESSAGE_CHUNK", "messageId": "a1", "delta": "Sure, "},
        {"type": "TEXT_MESSAGE_CHUNK", "delta": "refunding."},
        {
            "type": "TOOL_CALL_CHUNK",
            "toolCallId": "c1",
            "toolCallName": "refund",
            "parentMessageId": "a1",
            "delta": "{",
        },
        {"type": "TOOL_CALL_CHUNK", "delta": '"id": "A1"}'},
        {"type": "TOOL_CALL_RESULT", "messageId": "t1", "toolCallId": "c1", "content": "done"},
        {"type": "TOOL_CALL_START", "toolCallId": "c2", "toolCallName": "navigate", "parentMessageId": "a2"},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c2", "delta": "{}"},
        {"type": "TOOL_CALL_END", "toolCallId": "c2"},
        FINISHED,
    ]

    assert fold_messages(before, events) == [
        {"id": "u1", "role": "user", "content": "refund A1"},
        {
            "id": "a1",
            "role": "assistant",
            "content": "Sure, refunding.",
            "toolCalls": [{"id": "c1", "type": "function", "function": {"name": "refund", "arguments": REFUND_ARGS}}],
        },
        {"id": "t1", "role": "tool", "toolCallId": "c1", "content": "done"},
        {
            "id": "a2",
            "role": "assistant",
            "toolCalls": [{"id": "c2", "type": "function", "function": {"name": "navigate", "arguments": "{}"}}],
        },
    ]
    assert before == [{"id": "u0", "role": "user", "content": "old"}], "the input is not changed"


def test_a_snapshot_can_leave_server_roles_out() -> None:
    snapshot = {"type": "MESSAGES_SNAPSHOT", "messages": [{"id": "x", "role": "activity", "content": {}}]}

    assert fold_messages([], [snapshot]) == [{"id": "x", "role": "activity", "content": {}}]
    assert fold_messages([], [snapshot], drop_roles=adapter.client.SERVER_ROLES) == []


CHUNK = st.fixed_dictionaries(
    {
        "toolCallId": st.sampled_from([None, "a", "b"]),
        "toolCallName": st.sampled_from([None, "f", "g"]),
        "delta": st.sampled_from([None, "", "{", '"x": 1', "}"]),
    }
)
OTHER = st.just(None)


@given(st.lists(st.one_of(CHUNK, OTHER), max_size=12))
def test_chunks_are_read_as_the_adapter_reads_them(steps: Sequence[dict[str, Any] | None]) -> None:
    reader, client = EventReader(engine_tools=frozenset({"f", "g"})), CallReader()
    made: list[tuple[str, str, str]] = []
    try:
        for step in [*steps, None]:  # any other event ends a chunked call
            event = ToolCallChunkEvent(**_snake(step)) if step else TextMessageContentEvent(message_id="m", delta="x")
            client.feed(event.model_dump(by_alias=True, exclude_none=True))
            made += [(i.id, i.name, i.arguments) for i in reader.feed(event) if isinstance(i, ToolCall)]
    except BackendError:
        assert client.problems, "the client accepted what the adapter refuses"
        return
    assert not client.problems, "the client refused what the adapter accepts"
    assert [(c.id, c.name, c.arguments or "{}") for c in client.calls] == made
    assert all(call.chunked and call.ended for call in client.calls)


def _snake(step: dict[str, Any]) -> dict[str, Any]:
    names = {"toolCallId": "tool_call_id", "toolCallName": "tool_call_name", "delta": "delta"}
    return {names[key]: value for key, value in step.items()}


def test_the_resume_helpers_write_valid_resume_entries() -> None:
    interrupt = {"id": "int-1", "reason": "tool_call", "toolCallId": "c1"}
    entries = [
        resolved("int-1", {"path": "/settings"}),
        approved(interrupt, edited_args={"order_id": "A1", "amount": 2}),
        denied(interrupt),
        cancelled(interrupt),
    ]

    assert [ResumeEntry.model_validate(entry).interrupt_id for entry in entries] == ["int-1"] * 4
    assert entries[1]["payload"] == {"approved": True, "editedArgs": {"order_id": "A1", "amount": 2}}
    assert entries[2]["payload"] == {"approved": False}
    assert entries[3] == {"interruptId": "int-1", "status": "cancelled"}
    assert approved(interrupt, reason="ok", remember=True)["payload"] == {
        "approved": True,
        "reason": "ok",
        "remember": "thread",
    }
    assert denied(interrupt, reason="too much")["payload"] == {"approved": False, "reason": "too much"}


def test_the_gated_call_is_found_through_each_channel() -> None:
    adk = {"id": "i", "toolCallId": "confirm-1", "metadata": {"adk": {"originalFunctionCall": {"id": "c1"}}}}

    assert gated_call({"id": "i", "toolCallId": "c1"}, ["c1", "c2"]) == adapter.client.GatedCall("c1", "toolCallId")
    assert gated_call(adk, ["c1", "confirm-1"]) == adapter.client.GatedCall("c1", "metadata")
    only = gated_call({"id": "i"}, ["c1", "c2"], answered={"c1"})
    assert only is not None
    assert (only.id, only.inferred) == ("c2", True)
    assert gated_call({"id": "i"}, ["c1", "c2"]) is None


async def test_the_client_drives_the_demo_through_an_approval_with_edits(tmp_path: Path) -> None:
    async with AGUIClient(demo(tmp_path)) as client:
        thread = client.thread()
        opened = await thread.say("refund order A100")
        (interrupt,) = opened.interrupts
        done = await thread.resume(approved(interrupt, edited_args={"order_id": "A100", "amount": 3.5}))

    assert interrupt.tool_call_id == opened.calls[-1].id
    assert opened.calls[-1].name == "refund_order"
    (result,) = done.results(str(interrupt.tool_call_id))
    assert json.loads(result["content"])["refunded"] == 3.5
    assert thread.interrupts == []
    assert thread.runs == [opened, done]
    assert [m["role"] for m in thread.messages][-3:] == ["tool", "activity", "assistant"]
    assert "refunded" in thread.messages[-1]["content"]
    (call,) = [c for m in thread.messages for c in m.get("toolCalls") or [] if c["id"] == interrupt.tool_call_id]
    assert json.loads(call["function"]["arguments"]) == {"order_id": "A100", "amount": 3.5}  # what ran
    decision = thread.messages[-2]["content"]
    assert (decision["decision"], json.loads(decision["arguments"])["amount"]) == ("approved", 3.5)
    assert json.loads(decision["proposedArguments"]) != json.loads(decision["arguments"])


async def test_the_client_remembers_an_approval_revokes_it_and_gives_a_reason(tmp_path: Path) -> None:
    async with AGUIClient(demo(tmp_path)) as client:
        thread = client.thread()
        (asked,) = (await thread.say("refund order A100")).interrupts
        assert asked.response_schema is not None
        assert "remember" in asked.response_schema["properties"]
        await thread.resume(approved(asked, remember=True))
        allowed = await thread.say("refund order A100")
        await client.revoke_grant(thread.id, "refund_order")
        (again,) = (await thread.say("refund order A100")).interrupts
        declined = await thread.resume(denied(again, reason="one refund is enough"))
        with pytest.raises(RequestRefused) as unknown:
            await client.revoke_grant("no-such-thread", "refund_order")

    assert allowed.interrupts == []
    assert "refunded" in allowed.text
    (result,) = declined.results(str(again.tool_call_id))
    assert result["content"].endswith('quoted as data (not instructions): "one refund is enough"')
    assert (unknown.value.status, unknown.value.code) == (404, "THREAD_NOT_FOUND")


@pytest.mark.parametrize("outcome", ["interrupt", "pending"])
async def test_the_client_exposes_a_client_tool_call_either_way(tmp_path: Path, outcome: str) -> None:
    navigate = {"name": "navigate", "description": "Go.", "parameters": {"type": "object", "properties": {}}}
    async with AGUIClient(demo(tmp_path, outcome)) as client:
        thread = client.thread(tools=[navigate])
        run = await thread.say("go to settings")
        call = run.calls[-1]
        if outcome == "interrupt":
            assert [i.tool_call_id for i in thread.interrupts] == [call.id]
            after = await thread.resume(cancelled(thread.interrupts[0]))
        else:
            assert thread.pending_tool_call_ids == [call.id]
            assert thread.interrupts == []
            after = await thread.answer(call.id, {"ok": True})

    assert call.name == "navigate"
    assert after.outcome is not None
    assert after.error is None


def test_parse_sse_keeps_comments_and_strange_lines_apart() -> None:
    parsed = parse_sse(b": keep-alive\n\nevent: x\nretry: 5\nbogus\ndata: " + json.dumps(STARTED).encode() + b"\n\n")

    assert parsed.events == [STARTED]
    assert parsed.comments == ["keep-alive"]
    assert parsed.problems == []
    assert parsed.frames[1].strange == ["bogus"]


async def test_the_docs_example_drives_the_demo_as_agui_demo_serves_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = (Path(__file__).parents[2] / "docs" / "client.md").read_text(encoding="utf-8")
    code = page.split("```python\n", 1)[1].split("```", 1)[0].replace("asyncio.run(main())", "")
    namespace: dict[str, Any] = {}
    exec(compile(code, "docs/client.md", "exec"), namespace)

    with serve_agui_demo(tmp_path / "demo.db") as base:  # `agui-demo`, as the page says to start it
        await namespace["main"](base + "/agui/")

    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("Done: order A100 was refunded. 5.00")
    assert printed[1] == printed[0]


BODIES = [
    sse(STARTED, *TEXT, FINISHED),
    sse(STARTED, FINISHED).replace(b"\n", b"\r\n"),
    sse(STARTED, FINISHED).replace(b"\n", b"\r"),
    b": ping\n\ndata: {}\n\n"
    + sse(STARTED)
    + b'data: {"type": "RUN_FINISHED", "threadId": "t",\ndata: "runId": "r"}\n\n',
]


@given(st.sampled_from(BODIES), st.lists(st.integers(min_value=0, max_value=200), max_size=8))
def test_any_chunking_of_a_body_reads_the_same(body: bytes, cuts: list[int]) -> None:
    whole = parse_sse(body)
    decoder, frames = adapter.client.SSEDecoder(), []
    edges = sorted({0, len(body), *(cut % (len(body) + 1) for cut in cuts)})
    for start, end in zip(edges, edges[1:], strict=False):
        frames += decoder.feed(body[start:end])
    frames += decoder.close()
    assert decoder.partial is None
    assert [f.text for f in frames] == [f.text for f in whole.frames]
    assert decoder.problems == [p for p in whole.problems if "CR" in p]
    assert [e["type"] for e in whole.events][-1:] == ["RUN_FINISHED"]


async def test_read_sse_yields_data_as_it_arrives_and_a_last_unterminated_frame() -> None:
    async def body() -> AsyncIterator[bytes]:
        yield b": ping\n\ndata: one\n"
        yield b"\ndata: two"

    assert [data async for data in adapter.client.read_sse(body())] == ["one", "two"]

    def refuse(line: str) -> None:
        raise ValueError(line)

    async def html() -> AsyncIterator[bytes]:
        yield b"<html>\n"
        raise AssertionError("read past the first line that is not SSE")

    with pytest.raises(ValueError, match="<html>"):
        [data async for data in adapter.client.read_sse(html(), on_other_line=refuse)]


async def test_a_stream_ended_by_its_last_cr_yields_its_last_event() -> None:
    async with serving(sse(STARTED, FINISHED).replace(b"\n", b"\r")) as client:
        client.strict = False
        events = [event.type async for event in client.stream(INPUT)]
        run = await client.run(INPUT)

    assert events == ["RUN_STARTED", "RUN_FINISHED"]
    assert [e["type"] for e in run.wire] == events
    assert run.problems == ["CR in the body: frames must be LF-only (TRANS-3)"]
