"""The reference agent: a scripted agent on this adapter that records what a client sends and grades it.

`POST /` runs (the thread's scenario picks which adapter serves it), `GET /scenarios` lists the
scenarios, `GET /report` grades every thread so far, `DELETE /report` forgets them. Other routes
(`/capabilities`, `/threads/{id}`) are the default adapter's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from adapter import Adapter, create_app
from adapter.conformance._client import parse_sse
from adapter.conformance._grader import Received, grade
from adapter.conformance._scenarios import (
    BY_ID,
    EXPIRES_AFTER,
    ORDER_FORM,
    SCENARIOS,
    SERVER_TOOLS,
    ReferenceBackend,
    pick,
)


@dataclass
class Recording:
    """Every thread the agent served: its scenario and the inputs it received."""

    scenarios: dict[str, str] = field(default_factory=dict)
    threads: dict[str, list[Received]] = field(default_factory=dict)

    def report(self) -> dict[str, object]:
        """The graded report."""
        return grade((self.scenarios[thread], received) for thread, received in self.threads.items())


class _Recorder:
    """The run route: records the input, routes it to the scenario's adapter, records what streams back."""

    def __init__(self, recording: Recording, apps: dict[str, ASGIApp]) -> None:
        self.recording = recording
        self.apps = apps

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = await _read(receive)
        try:
            parsed = json.loads(body)
        except ValueError:
            parsed = None
        received = self._record(parsed) if isinstance(parsed, dict) else None
        scenario = self.recording.scenarios.get(str(parsed.get("threadId"))) if received and parsed else None
        app = self.apps[BY_ID[scenario].adapter if scenario else "default"]
        chunks: list[bytes] = []

        delivered = False

        async def replay() -> Message:
            nonlocal delivered
            if delivered:
                return await receive()  # after the body, only a disconnect can come
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}

        async def tee(message: Message) -> None:
            if message["type"] == "http.response.start" and received is not None:
                received.status = message["status"]
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))
            await send(message)

        await app(scope, replay, tee)
        if received is not None:
            received.events = parse_sse(b"".join(chunks))[0] if received.status == 200 else []

    def _record(self, body: dict[str, object]) -> Received | None:
        thread = str(body.get("threadId"))
        if thread not in self.recording.scenarios:
            scenario = pick(body)
            if scenario is None:
                return None
            self.recording.scenarios[thread] = scenario
        received = Received(body, datetime.now(UTC))
        self.recording.threads.setdefault(thread, []).append(received)
        return received


async def _read(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def create_reference_app(recording: Recording | None = None) -> Starlette:
    """The reference agent as an ASGI app: run it with uvicorn, or `python -m adapter.conformance serve`."""
    recording = recording if recording is not None else Recording()
    backend = ReferenceBackend(recording.scenarios)

    def adapter(**options: Any) -> ASGIApp:
        return create_app(Adapter(backend, tools=SERVER_TOOLS, forms=[ORDER_FORM], **options))

    apps = {
        "default": adapter(),
        "pending": adapter(frontend_outcome="pending"),
        "expiring": adapter(interrupt_ttl=timedelta(seconds=EXPIRES_AFTER)),
        "cancelling": adapter(max_steps=1),
    }

    async def scenarios(request: Request) -> Response:
        return JSONResponse({"scenarios": [scenario.as_json() for scenario in SCENARIOS]})

    async def report(request: Request) -> Response:
        if request.method == "DELETE":
            recording.scenarios.clear()
            recording.threads.clear()
        return JSONResponse(recording.report())

    return Starlette(
        routes=[
            Route("/", _Recorder(recording, apps), methods=["POST"]),
            Route("/scenarios", scenarios),
            Route("/report", report, methods=["GET", "DELETE"]),
            Mount("/", apps["default"]),
        ]
    )
