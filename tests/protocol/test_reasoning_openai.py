"""A reasoning model behind `OpenAIChatBackend`: its reasoning streams, is stored, and goes back where it is taken.

The model server is scripted as vLLM streams a reasoning model (DeepSeek-R1, Qwen3): `delta.reasoning_content`
(or `delta.reasoning`, the newer vLLM's, OpenRouter's and Ollama's name) before `delta.content`, with nulls in
the field a chunk does not use.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx
from ag_ui.core import RunAgentInput
from agui import collect, run_events, run_input, user
from hypothesis import given
from hypothesis import strategies as st
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from adapter import Adapter, tool
from adapter.backends import OpenAIChatBackend

if TYPE_CHECKING:
    from conftest import Serve

Reply = list[tuple[str, str]]
"""One step's stream: ("reasoning", piece), ("content", piece) or ("call", "name:arguments"), in order."""


@dataclass
class ModelServer:
    """A chat-completions server that streams each request's reply as vLLM does, and keeps every request body."""

    replies: list[Reply]
    reasoning_field: str = "reasoning_content"
    requests: list[dict[str, Any]] = field(default_factory=list)

    @property
    def app(self) -> Starlette:
        return Starlette(routes=[Route("/v1/chat/completions", self.complete, methods=["POST"])])

    async def complete(self, request: Request) -> StreamingResponse:
        self.requests.append(await request.json())
        reply = self.replies.pop(0)

        async def chunks() -> AsyncIterator[bytes]:
            for chunk in vllm_chunks(reply, self.reasoning_field):
                yield f"data: {json.dumps(chunk)}\n\n".encode()
            yield b"data: [DONE]\n\n"

        return StreamingResponse(chunks(), media_type="text/event-stream")


def vllm_chunks(reply: Reply, reasoning_field: str) -> list[dict[str, Any]]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "qwen3", "choices": [choice]}

    chunks = [chunk({"role": "assistant", "content": ""})]
    calls = 0
    for kind, piece in reply:
        if kind == "reasoning":
            chunks.append(chunk({reasoning_field: piece, "content": None}))
        elif kind == "content":
            chunks.append(chunk({"content": piece, reasoning_field: None}))
        else:
            name, arguments = piece.split(":", 1)
            call = {"index": calls, "id": f"chatcmpl-tool-{calls}", "type": "function"}
            chunks.append(chunk({"tool_calls": [{**call, "function": {"name": name, "arguments": arguments}}]}))
            calls += 1
    chunks.append(chunk({}, "tool_calls" if calls else "stop"))
    chunks.append(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "model": "qwen3",
            "choices": [],
            "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
        }
    )
    return chunks


THINKING: Reply = [("reasoning", "The user "), ("reasoning", "greets me."), ("content", "Hello"), ("content", "!")]


def reasoning_of(events: list[dict[str, Any]]) -> str:
    return "".join(e["delta"] for e in events if e["type"] == "REASONING_MESSAGE_CONTENT")


async def test_reasoning_streams_is_stored_and_comes_back_on_the_next_turn(serve: Serve) -> None:
    server = ModelServer([THINKING, [("content", "Fine.")]])
    served = await serve(server.app)
    adapter = Adapter(OpenAIChatBackend(f"{served.url}/v1", "qwen3", api_key="", reasoning_field="reasoning_content"))

    first = await run_events(adapter, run_input("t1", [user("hi")]))
    await run_events(adapter, run_input("t1", [user("how are you?")]))

    assert [e["type"] for e in first[1:7]] == [
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_END",
        "REASONING_END",
    ]
    assert reasoning_of(first) == "The user greets me."
    thread = await adapter.thread("t1")
    assert thread is not None
    reasoning, answer = thread["messages"][1:3]
    assert reasoning == {"id": first[1]["messageId"], "role": "reasoning", "content": "The user greets me."}
    assert answer["role"] == "assistant"
    assert answer["content"] == "Hello!"
    assert server.requests[1]["messages"] == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "Hello!", "reasoning_content": "The user greets me."},
        {"role": "user", "content": "how are you?"},
    ]


async def test_reasoning_is_kept_but_not_sent_back_unless_the_server_takes_it(serve: Serve) -> None:
    server = ModelServer([THINKING, [("content", "Fine.")]], reasoning_field="reasoning")
    served = await serve(server.app)
    adapter = Adapter(OpenAIChatBackend(f"{served.url}/v1", "qwen3", api_key=""))

    first = await run_events(adapter, run_input("t1", [user("hi")]))
    await run_events(adapter, run_input("t1", [user("how are you?")]))

    assert reasoning_of(first) == "The user greets me."
    thread = await adapter.thread("t1")
    assert thread is not None
    assert [m["role"] for m in thread["messages"]] == ["user", "reasoning", "assistant", "user", "assistant"]
    assert server.requests[1]["messages"] == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "Hello!"},
        {"role": "user", "content": "how are you?"},
    ]


async def test_reasoning_before_a_tool_call_goes_back_with_the_call_in_the_same_turn(serve: Serve) -> None:
    @tool
    def lookup_order(order_id: str) -> str:
        """Look an order up."""
        return f"{order_id} shipped"

    server = ModelServer(
        [
            [("reasoning", "I should look it up."), ("call", 'lookup_order:{"order_id": "A17"}')],
            [("reasoning", "It shipped."), ("content", "A17 has shipped.")],
        ]
    )
    served = await serve(server.app)
    backend = OpenAIChatBackend(f"{served.url}/v1", "qwen3", api_key="", reasoning_field="reasoning_content")
    adapter = Adapter(backend, tools=[lookup_order])

    events = await run_events(adapter, run_input("t1", [user("where is A17?")]))

    assert reasoning_of(events) == "I should look it up.It shipped."
    assistant_with_call = server.requests[1]["messages"][1]
    assert assistant_with_call["reasoning_content"] == "I should look it up."
    assert assistant_with_call["tool_calls"][0]["function"]["name"] == "lookup_order"
    thread = await adapter.thread("t1")
    assert thread is not None
    assert [m["role"] for m in thread["messages"]] == [
        "user",
        "reasoning",
        "assistant",
        "tool",
        "reasoning",
        "assistant",
    ]


pieces = st.lists(st.text(min_size=1, max_size=6), min_size=1, max_size=5)


@given(thoughts=pieces, words=pieces, both=st.booleans())
def test_whatever_the_chunking_the_reasoning_streamed_stored_and_sent_back_is_the_models(
    thoughts: list[str], words: list[str], both: bool
) -> None:
    """`both`: the server repeats each piece under both names, as some vLLM versions do; it is one reasoning."""
    reply: Reply = [*(("reasoning", piece) for piece in thoughts), *(("content", piece) for piece in words)]
    server = ModelServer([reply, [("content", "ok")]])

    async def handler(request: httpx.Request) -> httpx.Response:
        server.requests.append(json.loads(request.content))
        chunks = vllm_chunks(server.replies.pop(0), "reasoning_content")
        for chunk in chunks:
            delta = chunk["choices"][0]["delta"] if chunk["choices"] else {}
            if both and delta.get("reasoning_content"):
                delta["reasoning"] = delta["reasoning_content"]
        body = "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in chunks) + "data: [DONE]\n\n"
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body.encode())

    async def scenario() -> None:
        async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
            backend = OpenAIChatBackend(
                "http://model.test/v1", "qwen3", api_key="", client=client, reasoning_field="reasoning_content"
            )
            adapter = Adapter(backend)
            first = await collect(adapter.run(RunAgentInput.model_validate(run_input("t1", [user("hi")]))))
            await collect(adapter.run(RunAgentInput.model_validate(run_input("t1", [user("again")]))))
            thread = await adapter.thread("t1")

        assert reasoning_of(first) == "".join(thoughts)
        assert thread is not None
        assert thread["messages"][1] == {
            "id": thread["messages"][1]["id"],
            "role": "reasoning",
            "content": "".join(thoughts),
        }
        assert server.requests[1]["messages"][1] == {
            "role": "assistant",
            "content": "".join(words),
            "reasoning_content": "".join(thoughts),
        }

    asyncio.run(scenario())
