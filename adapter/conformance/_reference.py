"""The reference agent: a scripted agent on this adapter that records what a client sends and grades it.

`POST /` runs (the thread's scenario picks which adapter serves it), `GET /scenarios` lists the
scenarios, `GET /report` grades every thread so far, `DELETE /report` forgets them (only when the app
allows it). Other routes (`/capabilities`, `/threads/{id}`) are the default adapter's.

The agent is meant to be left running: a body over `max_body_bytes` is refused as it arrives, the
recording keeps at most `max_threads` threads, `max_inputs` inputs a thread and `max_bytes` bytes of
inputs and answers, and the adapters' store (`KeptThreads`) at most 200 threads and 64 MiB, each
forgetting the oldest first: what it holds stays bounded whatever its clients send.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from adapter._adapter import Adapter
from adapter._edge._http import create_app
from adapter._errors import CONTENT_TOO_LARGE
from adapter._run._config import Limits
from adapter.client import parse_sse
from adapter.conformance._grader import Received, grade
from adapter.conformance._held import held
from adapter.conformance._kept_threads import KeptThreads
from adapter.conformance._scenarios import (
    BY_ID,
    EXPIRES_AFTER,
    ORDER_FORM,
    SCENARIOS,
    SERVER_TOOLS,
    ReferenceBackend,
    pick,
)
from adapter.stores import TurnStore

PARSED_CHARS: Final = 1_000_000
"""Stored text each of the reference agent's four adapters keeps parsed (`adapter._thread._cache`): with the messages
parsed from it, about 11 bytes a character for ordinary messages, 2 for one long text."""
HELD_BOUND: Final = 64 * 1024 * 1024 + 64 * 1024 * 1024 + 4 * 11 * PARSED_CHARS
"""What the reference agent keeps at most, whatever its clients send (the requests in flight aside): its store
(`KeptThreads.max_bytes`), its recording (`Recording.max_bytes`), both counted as held, and its adapters' parsed
threads. About 170 MiB."""


@dataclass
class Recording:
    """The threads the agent served: each one's scenario and the inputs it received, bounded.

    At most `max_threads` threads are kept, `max_inputs` inputs a thread, and `max_bytes` bytes of inputs and
    answers in all, measured as held (`held`: the parsed input and events, several times their JSON text); past a
    bound the oldest thread (or the thread's oldest input) is forgotten first, and past `max_bytes` the thread
    being recorded keeps at least its latest input.
    """

    scenarios: dict[str, str] = field(default_factory=dict)
    threads: dict[str, list[Received]] = field(default_factory=dict)
    max_threads: int = 200
    max_inputs: int = 40
    max_bytes: int = 64 * 1024 * 1024
    size: int = 0
    """Bytes the inputs and answers kept take in memory (`held`)."""

    def report(self) -> dict[str, object]:
        """The graded report."""
        return grade((self.scenarios[thread], received) for thread, received in self.threads.items())

    def add(self, thread: str, scenario: str) -> None:
        """Start recording a thread, forgetting the oldest ones past `max_threads`."""
        self.scenarios[thread] = scenario
        while len(self.scenarios) > self.max_threads:
            self._forget_thread(next(iter(self.scenarios)))

    def take(self, thread: str, received: Received) -> None:
        """Record one input, forgetting the thread's oldest past `max_inputs`."""
        inputs = self.threads.setdefault(thread, [])
        inputs.append(received)
        self.size += received.size
        while len(inputs) > self.max_inputs:
            self.size -= inputs.pop(0).size
        self._keep_bytes(thread)

    def grow(self, thread: str, received: Received, size: int) -> None:
        """Count `size` more bytes for a recorded input (its answer, once sent); forget the oldest past `max_bytes`."""
        if any(each is received for each in self.threads.get(thread, [])):
            received.size += size
            self.size += size
            self._keep_bytes(thread)

    def clear(self) -> None:
        """Forget every thread."""
        self.scenarios.clear()
        self.threads.clear()
        self.size = 0

    def _keep_bytes(self, thread: str) -> None:
        """Past `max_bytes`: forget the oldest other threads, then `thread`'s oldest inputs, never its latest."""
        for other in [each for each in self.scenarios if each != thread]:
            if self.size <= self.max_bytes:
                return
            self._forget_thread(other)
        inputs = self.threads.get(thread, [])
        while self.size > self.max_bytes and len(inputs) > 1:
            self.size -= inputs.pop(0).size

    def _forget_thread(self, thread: str) -> None:
        del self.scenarios[thread]
        self.size -= sum(received.size for received in self.threads.pop(thread, []))


class _Recorder:
    """The run route: records the input, routes it to the scenario's adapter, records what streams back."""

    def __init__(self, recording: Recording, apps: dict[str, ASGIApp], max_body_bytes: int) -> None:
        self.recording = recording
        self.apps = apps
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = await _read(scope, receive, self.max_body_bytes)
        if body is None:
            error = {"code": CONTENT_TOO_LARGE, "message": f"The body exceeds {self.max_body_bytes} bytes."}
            await JSONResponse({"error": error}, status_code=413)(scope, receive, send)
            return
        try:
            parsed = json.loads(body)
        except ValueError:
            parsed = None
        received = self._record(parsed) if isinstance(parsed, dict) else None
        thread = str(parsed.get("threadId")) if isinstance(parsed, dict) else None
        scenario = self.recording.scenarios.get(thread) if received and thread else None
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
            elif message["type"] == "http.response.body" and received is not None:
                chunks.append(message.get("body", b""))
            await send(message)

        await app(scope, replay, tee)
        if received is not None and thread is not None:
            answer = b"".join(chunks)
            received.events = parse_sse(answer).events if received.status == 200 else []
            self.recording.grow(thread, received, held(received.events))

    def _record(self, body: dict[str, object]) -> Received | None:
        thread = str(body.get("threadId"))
        if thread not in self.recording.scenarios:
            scenario = pick(body)
            if scenario is None:
                return None
            self.recording.add(thread, scenario)
        received = Received(body, datetime.now(UTC), size=held(body))
        self.recording.take(thread, received)
        return received


async def _read(scope: Scope, receive: Receive, limit: int) -> bytes | None:
    """The body, or None as soon as it is known to exceed `limit` bytes (declared or counted as it arrives)."""
    declared = dict(scope.get("headers") or []).get(b"content-length", b"")
    if declared.isdigit() and int(declared) > limit:
        return None
    body = bytearray()
    while True:
        message = await receive()
        body += message.get("body", b"")
        if len(body) > limit:
            return None
        if not message.get("more_body", False):
            return bytes(body)


def _adapters(backend: ReferenceBackend, store: TurnStore) -> dict[str, ASGIApp]:
    """The adapters the scenarios are served by, by name; they share one store (a thread plays one scenario)."""

    def adapter(**options: Any) -> ASGIApp:
        # its scenarios grade clients that resume a client tool's interrupt, but for "pending"
        options = {"frontend_outcome": "interrupt", **options}
        made = Adapter(backend, store=store, tools=SERVER_TOOLS, forms=[ORDER_FORM], **options)
        made.config.parsed.max_chars = PARSED_CHARS  # four adapters: the engine's default would keep 4 x 45 MiB
        return create_app(made)

    return {
        "default": adapter(),
        "pending": adapter(frontend_outcome="pending"),
        "expiring": adapter(limits=Limits(interrupt_ttl=timedelta(seconds=EXPIRES_AFTER))),
        "cancelling": adapter(limits=Limits(max_steps=1)),
    }


def create_reference_app(
    recording: Recording | None = None,
    *,
    allow_reset: bool = False,
    max_body_bytes: int = 1_048_576,
    store: TurnStore | None = None,
) -> Starlette:
    """The reference agent as an ASGI app: run it with uvicorn, or `python -m adapter.conformance serve`.

    Args:
        recording: Where the threads are recorded; a fresh, bounded `Recording` by default.
        allow_reset: Let `DELETE /report` forget every thread (otherwise it gets 405).
        max_body_bytes: Largest run body read; a larger one gets 413 as soon as it is known to be larger.
        store: Where its adapters keep the threads they run, every thread (those that play no scenario too);
            a fresh, bounded `KeptThreads` by default.
    """
    recording = recording if recording is not None else Recording()
    apps = _adapters(ReferenceBackend(recording.scenarios), store if store is not None else KeptThreads())

    async def scenarios(request: Request) -> Response:
        return JSONResponse({"scenarios": [scenario.as_json() for scenario in SCENARIOS]})

    async def report(request: Request) -> Response:
        if request.method == "DELETE":
            if not allow_reset:
                return JSONResponse({"error": "DELETE /report needs --allow-reset"}, status_code=405)
            recording.clear()
        return JSONResponse(recording.report())

    return Starlette(
        routes=[
            Route("/", _Recorder(recording, apps, max_body_bytes), methods=["POST"]),
            Route("/scenarios", scenarios),
            Route("/report", report, methods=["GET", "DELETE"]),
            Mount("/", apps["default"]),
        ]
    )
