"""Property-based fuzzing of the HTTP edge: any body gets a 2xx stream or a coded 4xx, never a 5xx.

The app is the demo agent (server tools, an approval, client tools, forms) on a memory store, driven
in-process. Bodies are run inputs built from the protocol's shapes with hostile values planted in
them, plain JSON, and raw bytes (tests/strategies.py); resumes answer the interrupts the fuzzed threads really
have open.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from agui import TERMINAL, parse_sse
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from strategies import STRESSED, TEXTS, nested, requests

from adapter import Adapter, create_app
from adapter.backends import ScriptedBackend
from examples.demo_agent import HELP, RULES, forms, tools

pytestmark = pytest.mark.slow

_BOUND = 60.0  # seconds one request may take on a loaded machine before it counts as a hang


class Edge:
    """The demo agent's sub-app, served in-process on one event loop."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        adapter = Adapter(ScriptedBackend(RULES, fallback=HELP), tools=tools, forms=forms)
        transport = httpx.ASGITransport(app=create_app(adapter), raise_app_exceptions=False)
        self.client = httpx.AsyncClient(transport=transport, base_url="http://edge")

    def send(self, content_type: str, body: bytes) -> httpx.Response:
        headers = {"content-type": content_type} if content_type else {}
        return self.loop.run_until_complete(
            asyncio.wait_for(self.client.post("/", content=body, headers=headers), _BOUND)
        )

    def interrupts(self, thread: str) -> list[Any]:
        found = self.loop.run_until_complete(asyncio.wait_for(self.client.get(f"/threads/{thread}"), _BOUND))
        assert found.status_code in (200, 404), found.text
        interrupts: list[Any] = found.json()["interrupts"] if found.status_code == 200 else []
        return interrupts

    def close(self) -> None:
        self.loop.run_until_complete(self.client.aclose())
        self.loop.close()


@pytest.fixture(scope="module")
def edge() -> Iterator[Edge]:
    served = Edge()
    yield served
    served.close()


def check(response: httpx.Response) -> None:
    assert response.status_code < 500, response.text[:500]
    assert "Traceback" not in response.text, response.text[:500]
    assert 'File "' not in response.text, response.text[:500]
    if response.status_code >= 400:
        error = response.json()["error"]
        assert isinstance(error["code"], str), response.text[:500]
        assert error["code"], response.text[:500]
        return
    assert response.status_code == 200
    events, _, problems = parse_sse(response.content)
    assert problems == []
    terminal = [index for index, event in enumerate(events) if event["type"] in TERMINAL]
    assert terminal == [len(events) - 1], [event["type"] for event in events]


# Sized to what it finds: each distinct answer (a status with its error code, or a stream's ending) first showed
# within 1,460 calls in four measured runs (the CI profile's sequence by 770; three random seeds by 920, 1,150 and
# 1,460). A budget of 1,000 examples (about 1,180 calls) finds them all in three of the four and all but one in the
# fourth, in half the time of the 2,000 it ran before; the stressed run (AGUI_STRESS=1) keeps the deeper 2,000.
@settings(
    max_examples=2000 if STRESSED else 1000,
    suppress_health_check=[
        *settings().suppress_health_check,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
    ],
)
@given(opening=TEXTS, data=st.data())
def test_any_body_gets_a_stream_or_a_coded_4xx(edge: Edge, opening: str, data: st.DataObject) -> None:
    """A fresh thread is opened with one plain message; then fuzzed requests (twice: a replay) follow."""
    thread = f"t_{uuid.uuid4().hex}"
    check(
        edge.send(
            "application/json",
            json.dumps(
                {"threadId": thread, "runId": "r0", "messages": [{"id": "m0", "role": "user", "content": opening}]}
            ).encode(),
        )
    )
    interrupts = edge.interrupts(thread)
    event(f"{len(interrupts)} interrupts open")
    content_type, body = data.draw(requests(thread, interrupts))

    for _ in range(data.draw(st.integers(1, 2))):  # once, or twice as a replay
        response = edge.send(content_type, body)
        check(response)
        event(f"status {response.status_code}")
        if response.status_code == 200:
            event(f"ends with {parse_sse(response.content)[0][-1]['type']}")


@pytest.mark.parametrize(
    "body",
    [
        pytest.param({"threadId": "t", "runId": "r", "messages": nested(300)}, id="deep-arrays-in-an-invalid-field"),
        pytest.param({"threadId": nested(300), "runId": "r", "messages": []}, id="deep-arrays-as-thread-id"),
        pytest.param({"threadId": "t", "runId": "r", "messages": [], "protocolVersion": "1." + "9" * 5000}, id="v"),
        pytest.param({"threadId": "t", "runId": "r", "messages": [], "protocolVersion": "9" * 5000 + ".0"}, id="v2"),
    ],
)
def test_the_bodies_that_once_gave_500(edge: Edge, body: Any) -> None:
    response = edge.send("application/json", json.dumps(body).encode())

    check(response)
