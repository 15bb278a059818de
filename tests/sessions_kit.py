"""What the session tests (tests/sessions) share: SSE frames with their ids, read as they arrive; a backend whose
answer waits where the test says; reading a run's stream partly, then leaving, and reattaching to it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from pg import fresh_schema_dsn

# private on purpose: the tests read the store's journals by their name
from adapter._sessions._journal import journal_name
from adapter.backends import BackendItem, ModelRequest, TextDelta
from adapter.stores import PostgresStore, SQLiteStore, TurnStore

BOUND = 60.0  # seconds a held run, or a test waiting for one, may wait on a loaded machine


@dataclass(frozen=True)
class Sent:
    """One SSE event as a client got it: its `id:` (None without one) and its data."""

    id: int | None
    event: dict[str, Any]


@dataclass
class FrameReader:
    """SSE bytes to `Sent` events as they arrive: `id:` and `data:` lines (one data line per event), comments aside."""

    rest: bytes = b""
    comments: int = 0
    strange: list[str] = field(default_factory=list)

    def feed(self, chunk: bytes) -> list[Sent]:
        self.rest += chunk
        *frames, self.rest = self.rest.split(b"\n\n")
        sent = []
        for frame in frames:
            event_id, data = None, None
            for line in frame.decode().split("\n"):
                if line.startswith(":"):
                    self.comments += 1
                elif line.startswith("id: "):
                    event_id = int(line[4:])
                elif line.startswith("data: "):
                    data = json.loads(line[6:])
                else:
                    self.strange.append(line)
            if data is not None:
                sent.append(Sent(event_id, data))
        return sent


def frames_of(body: bytes) -> list[Sent]:
    """Every event of a whole SSE body, with its id."""
    reader = FrameReader()
    sent = reader.feed(body)
    assert reader.rest == b"", (reader.rest, reader.strange)
    assert reader.strange == [], (reader.rest, reader.strange)
    return sent


class Held:
    """A backend whose answer to "hold W H" is W words, streamed one delta each; after the first H it waits
    until the test releases its thread (`release`), the server running on a loop of its own."""

    def __init__(self) -> None:
        self._gates: dict[str, threading.Event] = {}
        self._lock = threading.Lock()
        self.streams = 0

    def gate(self, thread_id: str) -> threading.Event:
        with self._lock:
            return self._gates.setdefault(thread_id, threading.Event())

    def release(self, thread_id: str) -> None:
        self.gate(thread_id).set()

    def release_all(self) -> None:
        with self._lock:
            for gate in self._gates.values():
                gate.set()

    async def stream(self, request: ModelRequest) -> AsyncIterator[BackendItem]:
        self.streams += 1
        last = str(request.messages[-1].content) if request.messages else ""
        words, hold = (int(n) for n in last.split()[1:3]) if last.startswith("hold") else (3, 3)
        for index in range(words):
            if index == hold:
                await asyncio.to_thread(self.gate(request.thread_id).wait, BOUND)
            yield TextDelta(f"w{index} ")


def answer(words: int) -> str:
    """The text `Held` streams for `words` words."""
    return "".join(f"w{index} " for index in range(words))


async def read_some(http: httpx.AsyncClient, url: str, body: Mapping[str, Any], count: int) -> list[Sent]:
    """POST a run and read its first `count` events, then leave (the connection is closed)."""
    reader, seen = FrameReader(), []
    async with http.stream("POST", url, json=body) as response:
        assert response.status_code == 200, await response.aread()
        async for chunk in response.aiter_bytes():
            seen += reader.feed(chunk)
            if len(seen) >= count:
                break
    return seen[:count]


async def read_until_cut(http: httpx.AsyncClient, url: str, body: Mapping[str, Any], sent: list[Sent]) -> None:
    """POST `body` and keep what arrives in `sent`, until the stream ends or the server goes away."""
    reader = FrameReader()
    with contextlib.suppress(httpx.TransportError):
        async with http.stream("POST", url, json=body) as response:
            async for chunk in response.aiter_bytes():
                sent += reader.feed(chunk)


async def reattach(
    http: httpx.AsyncClient,
    base: str,
    thread_id: str,
    run_id: str,
    *,
    after: int | None = None,
    last_event_id: int | None = None,
    when_open: Any = None,
) -> tuple[int, list[Sent]]:
    """GET the run's events (after `after` or `Last-Event-ID`), whole: the status and the events.

    `when_open` is called once the response's headers came: the server is tailing the run by then.
    """
    params = {} if after is None else {"after": str(after)}
    headers = {} if last_event_id is None else {"last-event-id": str(last_event_id)}
    reader, sent = FrameReader(), []
    url = f"{base}/threads/{thread_id}/runs/{run_id}/events"
    async with http.stream("GET", url, params=params, headers=headers) as response:
        if when_open is not None:
            when_open()
        async for chunk in response.aiter_bytes():
            sent += reader.feed(chunk)
        status = response.status_code
    assert reader.strange == [], reader.strange
    return status, sent


def texts(sent: list[Sent]) -> str:
    """The assistant text the events carry."""
    return "".join(s.event["delta"] for s in sent if s.event["type"] == "TEXT_MESSAGE_CONTENT")


def body_of(thread_id: str, run_id: str, text: str, **extra: Any) -> dict[str, Any]:
    """A run input with one user message, as the wire carries it."""
    return {
        "threadId": thread_id,
        "runId": run_id,
        "messages": [{"id": f"user-{run_id}", "role": "user", "content": text}],
        "tools": [],
        "context": [],
        "protocolVersion": "1.0",
        **extra,
    }


def sqlite_pair(tmp_path: Path) -> tuple[TurnStore, TurnStore]:
    """Two replicas' stores on one SQLite file."""
    return SQLiteStore(tmp_path / "shared.db"), SQLiteStore(tmp_path / "shared.db")


def postgres_pair(tmp_path: Path) -> tuple[TurnStore, TurnStore]:
    """Two replicas' stores on one PostgreSQL schema (AGUI_TEST_POSTGRES_DSN)."""
    dsn = fresh_schema_dsn()
    return PostgresStore(dsn), PostgresStore(dsn)


PAIRS = [
    pytest.param(sqlite_pair, id="sqlite"),
    pytest.param(postgres_pair, id="postgres", marks=pytest.mark.postgres),
]
"""The shared stores two replicas run on, for `pytest.fixture(params=PAIRS)`."""


async def journal_of(store: TurnStore, thread_id: str, run_id: str, attempt: int = 1) -> str:
    """The store's name of the run's journal (an attempt of it) in the life its thread has now."""
    stored = await store.load(thread_id, since=None)
    return journal_name(run_id, stored.head.incarnation if stored is not None else None, attempt)
