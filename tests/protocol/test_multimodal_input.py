"""Multimodal input: a 0.x `binary` part becomes its typed 1.0 part; every typed part reaches the backends that take it.

`AGUIUpstream` forwards every part as it came; `OpenAIChatBackend` sends images (by URL or inline) and WAV or MP3
audio (inline), and skips the rest with a warning.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from ag_ui.core import AudioPart, DocumentPart, ImagePart, RunAgentInput, TextPart, UserMessage, VideoPart
from agui import run_input
from hypothesis import given
from hypothesis import strategies as st
from protocol_models import Recorder, instances, texts, upstream, wire

from adapter import Adapter
from adapter._edge._input import parse_run_input  # private on purpose: the edge's own parse, without a server
from adapter.backends import AGUIUpstream, OpenAIChatBackend

if TYPE_CHECKING:
    from conftest import Serve

MEDIA_TYPES = ["image/png", "image/jpeg", "audio/wav", "audio/mpeg", "video/mp4", "application/pdf", "text/plain"]


def expected(binary: dict[str, Any]) -> dict[str, Any] | None:
    """The typed part a binary part stands for, as `@ag-ui/client`'s `convertBinaryToNewFormat` makes it."""
    mime_type, data, url = binary["mimeType"], binary.get("data"), binary.get("url")
    if url and url.startswith("data:") and not data:
        header, data = url.split(",", 1)
        mime_type = header.removeprefix("data:").split(";")[0] or mime_type
    if data:
        source = {"type": "data", "value": data, "mimeType": mime_type}
    elif url:
        source = {"type": "url", "value": url, "mimeType": mime_type}
    else:
        return None
    family = mime_type.split("/")[0]
    part: dict[str, Any] = {"type": family if family in ("image", "audio", "video") else "document", "source": source}
    if binary.get("filename"):
        part["metadata"] = {"filename": binary["filename"]}
    return part


binaries = st.fixed_dictionaries(
    {"type": st.just("binary"), "mimeType": st.sampled_from(MEDIA_TYPES)},
    optional={
        "data": st.sampled_from(["iVBORw0KGgo=", "UklGRg=="]),
        "url": st.sampled_from(["https://cdn.test/a.bin", "data:image/gif;base64,R0lGOD=="]),
        "id": st.just("file-1"),
        "filename": texts.filter(bool),
    },
)


def body_with(parts: list[Any]) -> bytes:
    return json.dumps(run_input("t1", [{"id": "u1", "role": "user", "content": parts}])).encode()


def user_parts(body: bytes) -> list[dict[str, Any]]:
    """The parts of the first message of `body` (a user message), as the edge parses them, as wire JSON."""
    (message,) = parse_run_input(body).input.messages
    assert isinstance(message, UserMessage)
    assert not isinstance(message.content, str)
    return [wire(part) for part in message.content]


@given(st.lists(binaries, min_size=1, max_size=3))
def test_a_binary_part_becomes_the_typed_part_it_stands_for(parts: list[dict[str, Any]]) -> None:
    content = user_parts(body_with([{"type": "text", "text": "see"}, *parts]))

    typed = [part for part in map(expected, parts) if part is not None]
    assert content == [{"type": "text", "text": "see"}, *typed]


def test_a_binary_part_beside_its_typed_copy_is_one_attachment() -> None:
    binary = {"type": "binary", "mimeType": "image/png", "data": "iVBORw0KGgo="}
    typed = {"type": "image", "source": {"type": "data", "value": "iVBORw0KGgo=", "mimeType": "image/png"}}

    assert user_parts(body_with([typed, binary])) == [typed]


def test_a_binary_part_with_only_an_id_is_dropped_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="adapter._compat"):
        checked = parse_run_input(body_with([{"type": "binary", "mimeType": "image/png", "id": "f1"}]))

    assert checked.input.messages[0].content == []
    assert "dropping a binary part with no data or url from message 'u1'" in caplog.messages


parts = st.one_of([instances(kind) for kind in (TextPart, ImagePart, AudioPart, VideoPart, DocumentPart)])


@given(st.lists(parts, min_size=1, max_size=4))
def test_an_upstream_gets_every_part_as_it_came(sent: list[Any]) -> None:
    recorded = Recorder(upstream([[]]))

    async def scenario() -> None:
        backend = AGUIUpstream(recorded)
        try:
            body = run_input("t1", [{"id": "u1", "role": "user", "content": [wire(part) for part in sent]}])
            async for _ in Adapter(backend).run(RunAgentInput.model_validate(body)):
                pass
        finally:
            await backend.aclose()

    asyncio.run(scenario())

    (asked,) = recorded.request(0)["messages"]
    assert asked["content"] == [wire(part) for part in sent]


async def test_a_legacy_clients_image_and_audio_reach_the_chat_model(serve: Serve) -> None:
    bodies: list[dict[str, Any]] = []

    async def model(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        done = {"choices": [{"index": 0, "delta": {"content": "A cat."}, "finish_reason": "stop"}]}
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, text=f"data: {json.dumps(done)}\n\n")

    client = httpx.AsyncClient(transport=httpx.MockTransport(model))
    served = await serve(Adapter(OpenAIChatBackend("http://model.test/v1", "gpt-4o", api_key="", client=client)))
    legacy = [
        {"type": "text", "text": "What is this?"},
        {"type": "binary", "mimeType": "image/png", "data": "iVBORw0KGgo="},
        {"type": "binary", "mimeType": "audio/wav", "data": "UklGRg==", "filename": "note.wav"},
        {"type": "binary", "mimeType": "image/jpeg", "url": "https://cdn.test/cat.jpg"},
    ]
    body = run_input("t1", [{"id": "u1", "role": "user", "content": legacy}])
    del body["protocolVersion"]

    reply = await served.client.post(body)
    await client.aclose()

    assert reply.of("TEXT_MESSAGE_CONTENT")[0]["delta"] == "A cat."
    assert bodies[0]["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
                {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
                {"type": "image_url", "image_url": {"url": "https://cdn.test/cat.jpg"}},
            ],
        }
    ]
