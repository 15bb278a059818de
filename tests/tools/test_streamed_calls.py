"""Tool calls whose arguments a backend streams in pieces (`ToolCallChunk`) before handing over the whole call."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from ag_ui.core import AssistantMessage
from agui import new_id, run_input, user

from adapter import Adapter, tool
from adapter.backends import BackendItem, ExecutedToolCall, ModelRequest, TextDelta, ToolCall, ToolCallChunk

if TYPE_CHECKING:
    from conftest import Serve


@tool
def lookup_order(order_id: str) -> str:
    """Look an order up."""
    return f"{order_id} shipped"


class Streams:
    """Streams a call's arguments in pieces; `then` says how the step goes on after the pieces."""

    def __init__(self, then: str) -> None:
        self.then = then
        self.requests: list[ModelRequest] = []

    async def stream(self, request: ModelRequest) -> AsyncIterator[BackendItem]:
        self.requests.append(request)
        if len(self.requests) > 1:
            yield TextDelta("Done.")
            return
        yield TextDelta("Looking. ")
        for piece in ('{"order', '_id": ', '"A17"}'):
            yield ToolCallChunk("call_1", "lookup_order", piece)
        if self.then == "fail":
            raise ConnectionError("the model server went away")
        if self.then == "executed":
            yield ExecutedToolCall("call_1", "lookup_order", '{"order_id": "A17"}', "A17 shipped (by the backend)")
            return
        yield ToolCall("call_1", "lookup_order", '{"order_id": "A17"}')


async def test_a_streamed_call_opens_once_streams_each_piece_and_runs(serve: Serve) -> None:
    backend = Streams("whole")
    served = await serve(Adapter(backend, tools=[lookup_order]))

    reply = await served.client.post(run_input(new_id("thread"), [user("where is A17?")]))

    call = reply.with_call("call_1")
    assert [event["type"] for event in call] == [
        "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_ARGS", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT",
    ]  # fmt: skip
    assert call[0]["parentMessageId"] == reply.of("TEXT_MESSAGE_START")[0]["messageId"]
    assert reply.index("TEXT_MESSAGE_END") < reply.index("TOOL_CALL_START")
    assert call[-1]["content"] == "A17 shipped"
    (assistant,) = [m for m in backend.requests[1].messages if isinstance(m, AssistantMessage)]
    assert assistant.tool_calls is not None
    assert assistant.tool_calls[0].function.arguments == '{"order_id": "A17"}'


async def test_a_backend_that_fails_mid_call_has_the_call_closed(serve: Serve) -> None:
    served = await serve(Adapter(Streams("fail"), tools=[lookup_order]))

    reply = await served.client.post(run_input(new_id("thread"), [user("where is A17?")]))

    assert reply.types[-2:] == ["TOOL_CALL_END", "RUN_ERROR"]
    assert reply.error["code"] == "BACKEND_ERROR"


async def test_a_streamed_call_the_backend_ran_itself_ends_with_its_result(serve: Serve) -> None:
    served = await serve(Adapter(Streams("executed"), tools=[lookup_order]))

    reply = await served.client.post(run_input(new_id("thread"), [user("where is A17?")]))

    assert [event["type"] for event in reply.with_call("call_1")][-2:] == ["TOOL_CALL_END", "TOOL_CALL_RESULT"]
    assert reply.results()["call_1"]["content"] == "A17 shipped (by the backend)"
    assert len(reply.of("TOOL_CALL_START")) == 1
