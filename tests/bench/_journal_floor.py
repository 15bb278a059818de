"""The durable-journal floor: the bare floor's endpoint plus the least store work a server with the adapter's
guarantees must do (issue 43), on SQLite the way `SQLiteStore` does it.

The endpoint parses the `RunAgentInput` and replays the adapter's captured events through the SDK's encoder, as
`_server.py`'s baseline does; each event's JSON is made once and serves both the SSE frame and the journal. The
store is a SQLite file in WAL mode with `synchronous=NORMAL`, one writer thread owning the connection, each
transaction awaited as that executor's future. Per run:

- a new run: the thread's creation and the journal's first batch (`RUN_STARTED`) in one transaction, committed
  before the response starts; then a batch at most every 50 ms; the last batch (with `RUN_FINISHED`) in one
  transaction with the run's messages and, when the run ended in an interrupt, its pending interrupts. A short run
  is 2 hops.
- a resume: one `BEGIN IMMEDIATE` that reads the thread's pending interrupts, checks the resume answers exactly
  those (a compare-and-set under the write lock), writes the answers and the journal's first batch; then batches,
  and the last one with the run's messages and outcome. The frontend-tool round trip is 4 hops.

What it does not do is the adapter's own work, which the ratios against it measure: no load of the thread before a
run, no claim before a side effect, no policy, no schema validation, no model view.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from ag_ui.core import Event, RunAgentInput
from pydantic import TypeAdapter
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

BATCH_SECONDS = 0.05
"""A journal batch is written at most this often while a run streams: the adapter's cadence before its group commit,
kept because the floor has no follower on another replica, the one reader a sooner batch serves (docs/benchmarks.md,
"Followers, round two")."""

_EVENT: TypeAdapter[Any] = TypeAdapter(Event)
_SCHEMA = """
CREATE TABLE IF NOT EXISTS threads (id TEXT PRIMARY KEY, created_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS journals (
    thread_id TEXT NOT NULL, run_id TEXT NOT NULL, first_seq INTEGER NOT NULL, last_seq INTEGER NOT NULL,
    body TEXT NOT NULL, PRIMARY KEY (thread_id, run_id, first_seq));
CREATE TABLE IF NOT EXISTS messages (
    thread_id TEXT NOT NULL, id TEXT NOT NULL, body TEXT NOT NULL, PRIMARY KEY (thread_id, id));
CREATE TABLE IF NOT EXISTS interrupts (
    thread_id TEXT NOT NULL, id TEXT NOT NULL, answer TEXT, PRIMARY KEY (thread_id, id));
"""
T = TypeVar("T")


class Refused(Exception):
    """The resume does not answer the thread's pending interrupts."""


class JournalStore:
    """One SQLite connection owned by one writer thread; every transaction is one hop to it."""

    def __init__(self, path: str) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="floor-sqlite")
        self._connection = self._executor.submit(self._open, path).result()

    @staticmethod
    def _open(path: str) -> sqlite3.Connection:
        connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute("PRAGMA synchronous = NORMAL")
        connection.executescript(_SCHEMA)
        return connection

    async def _hop(self, *statements: tuple[str, tuple[Any, ...]], check: Any = None) -> None:
        """One `BEGIN IMMEDIATE` transaction on the writer thread: `check(connection)` first, then `statements`."""
        await asyncio.wrap_future(self._executor.submit(self._transaction, statements, check))

    def _transaction(self, statements: tuple[tuple[str, tuple[Any, ...]], ...], check: Any) -> None:
        connection = self._connection
        connection.execute("BEGIN IMMEDIATE")
        try:
            if check is not None:
                check(connection)
            for sql, parameters in statements:
                connection.execute(sql, parameters)
            connection.execute("COMMIT")
        except BaseException:
            connection.execute("ROLLBACK")
            raise

    async def start_run(self, thread_id: str, run_id: str, batch: list[str]) -> None:
        """A new run: the thread created with the journal's first batch."""
        await self._hop(
            ("INSERT OR IGNORE INTO threads (id, created_at) VALUES (?, ?)", (thread_id, time.time())),
            _append(thread_id, run_id, 1, batch),
        )

    async def start_resume(self, thread_id: str, run_id: str, answers: dict[str, str], batch: list[str]) -> None:
        """A resume: its answers compared with the pending interrupts and written, with the first batch."""

        def pending_are_answered(connection: sqlite3.Connection) -> None:
            rows = connection.execute(
                "SELECT id FROM interrupts WHERE thread_id = ? AND answer IS NULL", (thread_id,)
            ).fetchall()
            if {row[0] for row in rows} != set(answers):
                raise Refused(thread_id)

        answered = [
            ("UPDATE interrupts SET answer = ? WHERE thread_id = ? AND id = ?", (answer, thread_id, interrupt_id))
            for interrupt_id, answer in answers.items()
        ]
        await self._hop(*answered, _append(thread_id, run_id, 1, batch), check=pending_are_answered)

    async def append(self, thread_id: str, run_id: str, first_seq: int, batch: list[str]) -> None:
        await self._hop(_append(thread_id, run_id, first_seq, batch))

    async def end_run(
        self,
        thread_id: str,
        run_id: str,
        first_seq: int,
        batch: list[str],
        messages: list[tuple[str, str]],
        interrupts: list[str],
    ) -> None:
        """The last batch, the run's messages and the interrupts it left pending, in one transaction."""
        await self._hop(
            _append(thread_id, run_id, first_seq, batch),
            *(
                ("INSERT OR REPLACE INTO messages (thread_id, id, body) VALUES (?, ?, ?)", (thread_id, mid, body))
                for mid, body in messages
            ),
            *(("INSERT INTO interrupts (thread_id, id) VALUES (?, ?)", (thread_id, iid)) for iid in interrupts),
        )

    def close(self) -> None:
        self._executor.submit(self._connection.close).result()
        self._executor.shutdown()


def _append(thread_id: str, run_id: str, first_seq: int, batch: list[str]) -> tuple[str, tuple[Any, ...]]:
    return (
        "INSERT INTO journals (thread_id, run_id, first_seq, last_seq, body) VALUES (?, ?, ?, ?, ?)",
        (thread_id, run_id, first_seq, first_seq + len(batch) - 1, "\n".join(batch)),
    )


def run_messages(run_input: RunAgentInput, events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The messages a run adds to its thread, as (id, JSON): the input's last one, then the assistant's."""
    messages: list[tuple[str, str]] = []
    if run_input.messages:
        last = run_input.messages[-1]
        messages.append((last.id, last.model_dump_json(by_alias=True, exclude_none=True)))
    made: dict[str, dict[str, Any]] = {}
    for event in events:
        kind = event["type"]
        if kind == "TEXT_MESSAGE_START":
            made[event["messageId"]] = {"id": event["messageId"], "role": "assistant", "content": ""}
        elif kind == "TEXT_MESSAGE_CONTENT":
            made[event["messageId"]]["content"] += event["delta"]
        elif kind == "TOOL_CALL_START":
            parent = made.setdefault(event["parentMessageId"], {"id": event["parentMessageId"], "role": "assistant"})
            call = {"id": event["toolCallId"], "type": "function", "function": {"name": event["toolCallName"]}}
            parent.setdefault("toolCalls", []).append(call)
        elif kind == "TOOL_CALL_RESULT":
            result = {"id": event["messageId"], "role": "tool", "toolCallId": event["toolCallId"]}
            made[event["messageId"]] = {**result, "content": event["content"]}
    return messages + [(mid, json.dumps(message)) for mid, message in made.items()]


def journal_floor_app(db_path: str, events_path: str, kind_of: Any) -> tuple[Starlette, Callable[[], Awaitable[None]]]:
    """The floor's endpoint at `/`, and what closes its store: `kind_of(request, run_input)` names the captured
    event list to replay."""
    captured: dict[str, list[dict[str, Any]]] = json.loads(Path(events_path).read_text())
    store = JournalStore(db_path)

    async def run(request: Request) -> Response:
        run_input = RunAgentInput.model_validate_json(await request.body())
        events = captured[kind_of(request, run_input)]
        frames = [_EVENT.validate_python(event).model_dump_json(by_alias=True) for event in events]
        thread_id, run_id = run_input.thread_id, run_input.run_id
        if run_input.resume:
            answers = {entry.interrupt_id: json.dumps(entry.payload) for entry in run_input.resume}
            try:
                await store.start_resume(thread_id, run_id, answers, frames[:1])
            except Refused:
                return Response(status_code=409)
        else:
            await store.start_run(thread_id, run_id, frames[:1])
        finished = events[-1].get("outcome") or {}
        interrupts = [i["id"] for i in finished.get("interrupts", [])] if finished.get("type") == "interrupt" else []
        messages = run_messages(run_input, events)
        headers = {"cache-control": "no-store", "x-accel-buffering": "no"}
        body = _stream(store, thread_id, run_id, frames, messages, interrupts)
        return StreamingResponse(body, media_type="text/event-stream", headers=headers)

    async def close() -> None:
        store.close()

    return Starlette(routes=[Route("/", run, methods=["POST"])]), close


async def _stream(
    store: JournalStore,
    thread_id: str,
    run_id: str,
    frames: list[str],
    messages: list[tuple[str, str]],
    interrupts: list[str],
) -> AsyncIterator[str]:
    """The frames after the first (already journaled), a batch every `BATCH_SECONDS`, the last with the end."""
    yield f"data: {frames[0]}\n\n"
    batch: list[str] = []
    seq, flushed = 2, time.monotonic()
    for frame in frames[1:-1]:
        batch.append(frame)
        yield f"data: {frame}\n\n"
        if time.monotonic() - flushed >= BATCH_SECONDS:
            await store.append(thread_id, run_id, seq, batch)
            seq, batch, flushed = seq + len(batch), [], time.monotonic()
    batch.append(frames[-1])
    await store.end_run(thread_id, run_id, seq, batch, messages, interrupts)
    yield f"data: {frames[-1]}\n\n"
