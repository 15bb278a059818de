"""State changes cost what they say over HTTP: a predicted document in linear bytes, a tool's copy bomb refused."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from agui import new_id, run_input, user
from client_state import follow

from adapter import Adapter, Limits, PredictState, ToolContext, tool
from adapter.backends import BackendItem, ModelRequest, TextDelta, ToolCall, ToolCallChunk

if TYPE_CHECKING:
    from conftest import Serve

DOCUMENT = "It was a bright cold day in April, and the clocks were striking thirteen. " * 1400  # about 100 KB


@tool
def write_document(document: str) -> str:
    """Write the document."""
    return f"{len(document)} characters written"


@tool
def copy_bomb(ctx: ToolContext) -> str:
    """Doubles the state's list 21 times in one patch."""
    try:
        ctx.patch_state([{"op": "copy", "from": "/a", "path": "/a/-"}] * 21)
    except ValueError as exc:
        return f"refused: {exc}"
    return "built it"


class Writes:
    """Streams one call's arguments in small pieces, as a model writes them; then says it is done."""

    def __init__(self, name: str, arguments: str) -> None:
        self.name, self.arguments, self.steps = name, arguments, 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[BackendItem]:
        self.steps += 1
        if self.steps > 1:
            yield TextDelta("Done.")
            return
        for start in range(0, len(self.arguments), 16):
            yield ToolCallChunk("call_1", self.name, self.arguments[start : start + 16])
        yield ToolCall("call_1", self.name, self.arguments)


def delta_bytes(body: bytes) -> int:
    """The bytes of the body's STATE_DELTA frames, as they went over the wire."""
    return sum(len(frame) + 2 for frame in body.split(b"\n\n") if b'"type":"STATE_DELTA"' in frame)


async def test_a_predicted_document_streams_in_bytes_linear_in_its_size(serve: Serve) -> None:
    arguments = json.dumps({"document": DOCUMENT})
    entry = PredictState("write_document", "document", "document")
    served = await serve(Adapter(Writes("write_document", arguments), tools=[write_document], predict_state=[entry]))

    reply = await served.client.post(run_input(new_id("thread"), [user("write it")], state={}))

    assert reply.outcome == {"type": "success"}
    assert delta_bytes(reply.body) <= 3 * len(arguments)  # was 25.6 MB in 501 deltas for 100 KB
    assert follow({}, reply.events) == {"document": DOCUMENT}


async def test_a_tools_copy_bomb_is_refused_to_the_tool_and_the_run_goes_on(serve: Serve) -> None:
    served = await serve(
        Adapter(Writes("copy_bomb", "{}"), tools=[copy_bomb], limits=Limits(max_state_bytes=256 * 1024))
    )
    state: dict[str, Any] = {"a": ["tiny"] * 10}

    reply = await served.client.post(run_input(new_id("thread"), [user("blow it up")], state=state))

    assert reply.outcome == {"type": "success"}
    (result,) = reply.of("TOOL_CALL_RESULT")
    assert "refused: the patched state would exceed 262144 bytes" in result["content"]
    assert reply.of("STATE_DELTA") == []
    assert follow(state, reply.events) == state
