"""A chat-completions model played from fixtures, the way the AG-UI Dojo's mock model (aimock) plays it.

Each fixture matches a request (the last user message contains some text, and the last message is,
or is not, a tool result) and answers with streamed text or streamed tool calls, arguments cut into
small pieces as a real model streams them. The first matching fixture wins; a request nothing
matches fails the test with what it carried. Served to `OpenAIChatBackend` through respx.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import respx
from agui import Client

from adapter.stores import MemoryStore
from examples.dojo_features import build_app, openai_backend

BASE_URL = "https://dojo-model.test/v1"
PIECE = 12
"""Characters per streamed piece of text or of a call's arguments."""


@dataclass(frozen=True)
class Call:
    """A tool call the model makes; `arguments` is serialised and streamed in pieces."""

    name: str
    arguments: dict[str, Any]
    id: str = ""


@dataclass(frozen=True)
class Fixture:
    """When the last user message contains `user` (and the last message is a tool result iff
    `after_tool`; with `after_call`, the result of a call to that tool), answer with `text` and `calls`;
    `text` may be computed from the request."""

    user: str
    text: str | Callable[[dict[str, Any]], str] = ""
    calls: Sequence[Call] = ()
    after_tool: bool = False
    after_call: str | None = None

    def matches(self, body: dict[str, Any]) -> bool:
        messages = body["messages"]
        users = [m for m in messages if m["role"] == "user"]
        last_is_tool = bool(messages) and messages[-1]["role"] == "tool"
        if self.after_call is not None and (not last_is_tool or answered_tool(messages) != self.after_call):
            return False
        return bool(users) and self.user in str(users[-1]["content"]) and last_is_tool == self.after_tool


def answered_tool(messages: Sequence[dict[str, Any]]) -> str | None:
    """The name of the tool whose call the last (tool) message answers."""
    calls = {c["id"]: c["function"]["name"] for m in messages for c in m.get("tool_calls") or ()}
    return calls.get(messages[-1].get("tool_call_id", ""))


def _chunk(delta: dict[str, Any], finish_reason: str | None = None) -> str:
    choice = {"index": 0, "delta": delta, "finish_reason": finish_reason}
    return "data: " + json.dumps({"id": "chatcmpl-dojo", "model": "dojo-mock", "choices": [choice]}) + "\n\n"


def _pieces(text: str) -> list[str]:
    return [text[i : i + PIECE] for i in range(0, len(text), PIECE)]


def stream_body(text: str, calls: Sequence[Call]) -> str:
    """The SSE body of one completion: text pieces, then each call's id and name, then its argument pieces."""
    frames = [_chunk({"role": "assistant", "content": piece}) for piece in _pieces(text)]
    for index, call in enumerate(calls):
        head = {"index": index, "id": call.id or f"call_{call.name}_{index}", "type": "function"}
        frames.append(_chunk({"tool_calls": [{**head, "function": {"name": call.name, "arguments": ""}}]}))
        for piece in _pieces(json.dumps(call.arguments)):
            frames.append(_chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
    frames.append(_chunk({}, "tool_calls" if calls else "stop"))
    return "".join([*frames, "data: [DONE]\n\n"])


@dataclass
class DojoModel:
    """The mock model: fixtures in, completions out, every request body kept for the test to read."""

    fixtures: Sequence[Fixture]
    requests: list[dict[str, Any]] = field(default_factory=list)

    def answer(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.requests.append(body)
        fixture = next((f for f in self.fixtures if f.matches(body)), None)
        if fixture is None:
            last = body["messages"][-1] if body["messages"] else None
            return httpx.Response(500, json={"error": {"message": f"no fixture matches; last message {last}"}})
        text = fixture.text(body) if callable(fixture.text) else fixture.text
        headers = {"content-type": "text/event-stream"}
        return httpx.Response(200, headers=headers, content=stream_body(text, fixture.calls).encode())

    def client(self) -> httpx.AsyncClient:
        """An HTTP client whose requests to BASE_URL this model answers."""
        router = respx.MockRouter(base_url=BASE_URL, assert_all_called=False)
        router.post("/chat/completions").mock(side_effect=self.answer)
        return httpx.AsyncClient(transport=httpx.MockTransport(router.async_handler))

    def tool_names(self, index: int = -1) -> list[str]:
        """The names of the tools a request offered the model."""
        return [each["function"]["name"] for each in self.requests[index].get("tools", [])]


class Dojo:
    """Serves `examples.dojo_features` over real HTTP (through the suite's `serve`) in front of a mock model."""

    def __init__(self, serve: Callable[..., Any], model: DojoModel) -> None:
        self.serve = serve
        self.model = model
        self.clients: list[httpx.AsyncClient] = []

    async def connect(self, feature: str, **options: Any) -> Client:
        """A client for one feature's path of a freshly served app; options go to `build_app`."""
        client = self.model.client()
        self.clients.append(client)
        backend = openai_backend(BASE_URL, "dojo-mock", api_key="", client=client)
        options.setdefault("store", MemoryStore())
        served = await self.serve(build_app(backend, **options))
        return Client(served.http, f"{served.url}/{feature}")

    async def aclose(self) -> None:
        """Close the mock model's clients."""
        for client in self.clients:
            await client.aclose()


def tool_message(body: dict[str, Any]) -> dict[str, Any]:
    """The last tool message a request carried."""
    messages: list[dict[str, Any]] = body["messages"]
    return [m for m in messages if m["role"] == "tool"][-1]


def call_arguments(events: Sequence[dict[str, Any]], tool_call_id: str) -> Any:
    """A call's arguments, put together from its TOOL_CALL_ARGS events."""
    deltas = [e["delta"] for e in events if e["type"] == "TOOL_CALL_ARGS" and e["toolCallId"] == tool_call_id]
    return json.loads("".join(deltas))
