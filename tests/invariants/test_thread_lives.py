"""A thread's life is its identity (issue 40), as a stateful property over two adapters on one store.

Alice and Bob talk, pay (with an approval), hold a run mid-tool, delete the thread and create it again under the
same id, back it up and restore the copy, and stop runs, on two adapters (replicas, each with its own cache of
parsed threads, read by its head alone) of one store. Every message is tagged with the life it was said in
(`L<life>-<n>`). After every step: every message, answer and approval record in the thread came from its own
life; no one reads a run of another life; the model was sent exactly what the store held; a run of a life that
ended stores nothing and ends `THREAD_DELETED` (or `THREAD_CONFLICT`); every run in flight can be stopped.
On the memory store, SQLite and PostgreSQL. `AGUI_INVARIANT_EXAMPLES` and `AGUI_INVARIANT_STEPS` scale it.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import itertools
import json
import os
import re
import shutil
import sqlite3
import tempfile
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest
from ag_ui.core import RunAgentInput, UserMessage
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from pg import fresh_schema_dsn

from adapter import Adapter, Forbidden, ToolContext, tool
from adapter._thread._cache import ParsedThreads  # private on purpose: each replica reads long threads by their head
from adapter.backends import Call, Progress, Rule, ScriptedBackend
from adapter.stores import MemoryStore, PostgresStore, SQLiteStore, TurnStore

EXAMPLES = int(os.environ.get("AGUI_INVARIANT_EXAMPLES", "150")) // 5
STEPS = int(os.environ.get("AGUI_INVARIANT_STEPS", "30"))
THREAD = "t"
PEOPLE = st.sampled_from(["alice", "bob"])
REPLICA = st.sampled_from([0, 1])
TAG = re.compile(r"L(\d+)-\d+")


@dataclasses.dataclass
class Held:
    """A run whose tool waits for the test, started in `life`."""

    life: int
    run_id: str
    replica: int
    task: asyncio.Future[list[Any]]
    stopped: bool = False


class Tools:
    """`pay` asks for an approval; `hold` waits until released. Each records what it ran, by tag."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        self.holding: dict[str, asyncio.Event] = {}
        self.started: dict[str, asyncio.Event] = {}

        @tool(requires_approval=True)
        async def pay(tag: str, ctx: ToolContext) -> str:
            """Pay."""
            self.ran.append(tag)
            return f"paid {tag}"

        @tool
        async def hold(tag: str, ctx: ToolContext) -> str:
            """Hold."""
            self.started.setdefault(tag, asyncio.Event()).set()
            await self.holding.setdefault(tag, asyncio.Event()).wait()
            self.ran.append(tag)
            return f"held {tag}"

        self.all = [pay, hold]


def said(progress: Progress) -> str:
    return f"answer {progress.match[1]}"


RULES = [
    Rule(r"say (L\d+-\d+)", reply=said),
    Rule(r"pay (L\d+-\d+)", steps=[[Call("pay", {"tag": "{1}"})]], reply=said),
    Rule(r"hold (L\d+-\d+)", steps=[[Call("hold", {"tag": "{1}"})]], reply=said),
]


class ThreadLives(RuleBasedStateMachine):
    """Subclasses say which store: `open_database`, and how a copy of the thread is taken and put back."""

    def open_database(self) -> Callable[[], TurnStore]:
        raise NotImplementedError

    async def backup(self, store: TurnStore) -> Any:
        raise NotImplementedError

    async def restore(self, store: TurnStore, saved: Any) -> None:
        raise NotImplementedError

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.numbers = itertools.count(1)
        self.life = 0
        self.exists = False
        self.owner: str | None = None
        self.waiting: dict[str, Any] | None = None
        self.held: list[Held] = []
        self.ended_lives_runs: list[str] = []
        self.backups: list[tuple[int, str | None, Any]] = []
        self.said: tuple[int, str] | None = None
        """The life and tag of the last input said, to send again under its run id."""
        self.started = False

    def run(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        return self.loop.run_until_complete(coroutine)

    @initialize()
    def start(self) -> None:
        self.tools = Tools()
        self.backend = ScriptedBackend(RULES)
        opener = self.open_database()
        self.stores = [opener(), opener()]
        self.adapters = []
        for store in self.stores:
            adapter = Adapter(self.backend, tools=self.tools.all, store=store)
            adapter.config = dataclasses.replace(adapter.config, parsed=ParsedThreads(head_first=0))
            self.adapters.append(adapter)
        self.started = True

    def teardown(self) -> None:
        if self.started:
            for held in self.held:
                self.tools.holding.setdefault(self._tag_of(held), asyncio.Event()).set()
            self.run(self._settle())
            for adapter in self.adapters:
                self.run(adapter.aclose())
        self.loop.close()

    async def _settle(self) -> None:
        for held in self.held:
            await asyncio.wait({held.task}, timeout=30)

    def _tag_of(self, held: Held) -> str:
        return held.run_id.removeprefix("run-")

    def tag(self, life: int) -> str:
        return f"L{life}-{next(self.numbers)}"

    def opening(self, text: str, tag: str) -> RunAgentInput:
        message = UserMessage(id=f"u-{tag}", content=text)
        return RunAgentInput(thread_id=THREAD, run_id=f"run-{tag}", messages=[message], tools=[], context=[])

    async def events(self, replica: int, run_input: RunAgentInput, principal: str) -> list[dict[str, Any]]:
        stream = self.adapters[replica].run(run_input, principal=principal)
        return [json.loads(event.model_dump_json(by_alias=True, exclude_none=True)) async for event in stream]

    async def stored_texts(self) -> list[str]:
        stored = await self.stores[0].load(THREAD)
        return [] if stored is None else [message.json for message in stored.messages]

    # The rules.

    @rule(replica=REPLICA, principal=PEOPLE)
    def say(self, replica: int, principal: str) -> None:
        creates = not self.exists
        life = self.life + 1 if creates else self.life
        tag = self.tag(life)
        before = self.run(self.stored_texts())
        asked = len(self.backend.requests)
        try:
            events = self.run(self.events(replica, self.opening(f"say {tag}", tag), principal))
        except Forbidden:
            assert self.exists
            assert principal != self.owner
            return
        last = events[-1]
        if self.waiting is not None:
            assert (last["type"], last.get("code")) == ("RUN_ERROR", "RESUME_REQUIRED"), last
            return
        assert last["type"] == "RUN_FINISHED", last
        if creates:
            self.exists, self.life, self.owner = True, life, principal
        self.said = (life, tag)
        # The model was sent exactly what the store held, then the new message.
        seen = self.backend.requests[asked].messages
        # (As a set: runs that overlapped are stored one after the other, and the conversation rules put each
        # call's answer after its call for the model.)
        shown = [json.loads(text) for text in before]
        assert sorted(message.id for message in seen[:-1]) == sorted(m["id"] for m in shown if m["role"] != "activity")
        assert seen[-1].content == f"say {tag}"

    @precondition(lambda self: self.exists and self.waiting is None and self.said and self.said[0] == self.life)
    @rule(replica=REPLICA)
    def say_again(self, replica: int) -> None:
        """A client sends an input again under its run id: another attempt, journaled, the one its route serves."""
        assert self.owner is not None
        assert self.said is not None
        tag = self.said[1]
        events = self.run(self.events(replica, self.opening(f"say {tag}", tag), self.owner))
        assert events[-1]["type"] == "RUN_FINISHED", events[-1]

        async def journaled(adapter: Adapter) -> list[dict[str, Any]] | None:
            read = await adapter.run_events(THREAD, f"run-{tag}", principal=self.owner)
            return None if read is None else [json.loads(event.json) async for event in read]

        for adapter in self.adapters:
            assert self.run(journaled(adapter)) == events

    @precondition(lambda self: self.exists and self.waiting is None)
    @rule(replica=REPLICA)
    def pay(self, replica: int) -> None:
        assert self.owner is not None
        tag = self.tag(self.life)
        events = self.run(self.events(replica, self.opening(f"pay {tag}", tag), self.owner))
        (interrupt,) = events[-1]["outcome"]["interrupts"]
        self.waiting = {"interruptId": interrupt["id"], "status": "resolved", "payload": {"approved": True}}

    @precondition(lambda self: self.waiting is not None)
    @rule(replica=REPLICA)
    def approve(self, replica: int) -> None:
        assert self.owner is not None
        assert self.waiting is not None
        ran = len(self.tools.ran)
        run_id = f"run-{self.tag(self.life)}"
        stream = self.adapters[replica].resume(THREAD, [self.waiting], run_id=run_id, principal=self.owner)

        async def answered() -> list[Any]:
            return [event async for event in stream]

        events = self.run(answered())
        assert events[-1].type == "RUN_FINISHED", events[-1]
        assert len(self.tools.ran) == ran + 1
        self.waiting = None

    @precondition(lambda self: self.exists and self.waiting is None and len(self.held) < 3)
    @rule(replica=REPLICA)
    def hold(self, replica: int) -> None:
        assert self.owner is not None
        tag = self.tag(self.life)
        started = self.tools.started.setdefault(tag, asyncio.Event())
        task = asyncio.ensure_future(self.events(replica, self.opening(f"hold {tag}", tag), self.owner), loop=self.loop)
        waiting = asyncio.ensure_future(started.wait(), loop=self.loop)
        self.run(asyncio.wait({task, waiting}, timeout=30, return_when=asyncio.FIRST_COMPLETED))
        waiting.cancel()
        assert started.is_set(), task
        self.held.append(Held(self.life, f"run-{tag}", replica, task))

    @precondition(lambda self: any(held.life == self.life and self.exists and not held.stopped for held in self.held))
    @rule(replica=REPLICA)
    def stop(self, replica: int) -> None:
        held = next(h for h in self.held if h.life == self.life and not h.stopped)
        assert self.run(self.adapters[replica].stop_run(THREAD, held.run_id, principal=self.owner)) is True
        held.stopped = True

    @precondition(lambda self: self.exists)
    @rule(replica=REPLICA)
    def delete(self, replica: int) -> None:
        assert self.run(self.adapters[replica].delete_thread(THREAD, principal=self.owner))
        self.exists, self.waiting = False, None
        self.ended_lives_runs += [held.run_id for held in self.held if held.life == self.life]

    @precondition(lambda self: bool(self.held))
    @rule()
    def release(self) -> None:
        for held in self.held:
            self.tools.holding.setdefault(self._tag_of(held), asyncio.Event()).set()
        for held in self.held:
            events = self.run(asyncio.wait_for(held.task, 30))
            last = events[-1]
            if held.life == self.life and self.exists:
                assert last["type"] == "RUN_FINISHED" or last.get("code") == "THREAD_CONFLICT", last
            else:  # its life ended: it stored nothing more, and said why
                assert last["type"] == "RUN_ERROR", last
                assert last["code"] in ("THREAD_DELETED", "THREAD_CONFLICT"), last
        self.held = []

    @precondition(lambda self: self.exists and self.waiting is None)
    @rule()
    def take_backup(self) -> None:
        self.backups.append((self.life, self.owner, self.run(self.backup(self.stores[0]))))

    @precondition(lambda self: bool(self.backups) and self.waiting is None and not self.held)
    @rule(data=st.data())
    def restore_backup(self, data: st.DataObject) -> None:
        life, owner, saved = data.draw(st.sampled_from(self.backups))
        self.run(self.restore(self.stores[0], saved))
        self.exists, self.life, self.owner = True, life, owner

    # What holds after every step.

    @invariant()
    def every_message_is_of_the_threads_own_life(self) -> None:
        if not self.started:
            return
        texts = self.run(self.stored_texts())
        if not self.exists:
            assert texts == []
            return
        lives = {int(found) for text in texts for found in TAG.findall(text)}
        assert lives <= {self.life}, (self.life, texts)

    @invariant()
    def no_one_reads_or_stops_a_run_of_an_ended_life(self) -> None:
        if not self.started or not self.exists:
            return
        for run_id in self.ended_lives_runs[-3:]:
            for adapter in self.adapters:
                assert self.run(adapter.run_events(THREAD, run_id, principal=self.owner)) is None
                assert self.run(adapter.stop_run(THREAD, run_id, principal=self.owner)) is None


def bounded(examples: int) -> settings:
    return settings(
        max_examples=max(3, examples),
        stateful_step_count=STEPS,
        deadline=None,
        suppress_health_check=[*settings().suppress_health_check, HealthCheck.filter_too_much],
    )


class OnMemory(ThreadLives):
    def open_database(self) -> Callable[[], TurnStore]:
        store = MemoryStore()
        return lambda: store

    async def backup(self, store: TurnStore) -> Any:
        assert isinstance(store, MemoryStore)
        return copy.deepcopy(store._threads[THREAD])

    async def restore(self, store: TurnStore, saved: Any) -> None:
        assert isinstance(store, MemoryStore)
        store._threads[THREAD] = copy.deepcopy(saved)


class OnSQLite(ThreadLives):
    def open_database(self) -> Callable[[], TurnStore]:
        self.folder = Path(tempfile.mkdtemp(prefix="agui-lives-"))
        return lambda: SQLiteStore(self.folder / "turns.db")

    async def backup(self, store: TurnStore) -> Any:
        with sqlite3.connect(self.folder / "turns.db") as connection:
            return [
                (table, connection.execute(f"SELECT * FROM {table} WHERE thread_id = ?", (THREAD,)).fetchall())
                for table in ("agui_threads", "agui_messages")
            ]

    async def restore(self, store: TurnStore, saved: Any) -> None:
        with sqlite3.connect(self.folder / "turns.db", isolation_level=None) as connection:
            connection.execute("BEGIN IMMEDIATE")
            for table, rows in saved:
                connection.execute(f"DELETE FROM {table} WHERE thread_id = ?", (THREAD,))
                for row in rows:
                    connection.execute(f"INSERT INTO {table} VALUES ({', '.join('?' * len(row))})", row)
            connection.execute("COMMIT")

    def teardown(self) -> None:
        super().teardown()
        shutil.rmtree(self.folder, ignore_errors=True)


class OnPostgres(ThreadLives):
    def open_database(self) -> Callable[[], TurnStore]:
        self.dsn = fresh_schema_dsn()
        return lambda: PostgresStore(self.dsn, min_size=1, max_size=4)

    async def backup(self, store: TurnStore) -> Any:
        import psycopg

        async with await psycopg.AsyncConnection.connect(self.dsn) as connection:
            saved = []
            for table in ("agui_threads", "agui_messages"):
                cursor = await connection.execute(f"SELECT * FROM {table} WHERE thread_id = %s", (THREAD,))
                saved.append((table, await cursor.fetchall()))
            return saved

    async def restore(self, store: TurnStore, saved: Any) -> None:
        import psycopg

        async with await psycopg.AsyncConnection.connect(self.dsn) as connection, connection.transaction():
            for table, rows in saved:
                await connection.execute(f"DELETE FROM {table} WHERE thread_id = %s", (THREAD,))
                for row in rows:
                    marks = ", ".join(["%s"] * len(row))
                    await connection.execute(f"INSERT INTO {table} VALUES ({marks})", row)


TestMemory = OnMemory.TestCase
TestMemory.settings = bounded(EXAMPLES)
TestSQLite = OnSQLite.TestCase
TestSQLite.settings = bounded(EXAMPLES)


@pytest.mark.postgres
class TestPostgres(OnPostgres.TestCase):  # type: ignore[misc, valid-type]
    settings = bounded(EXAMPLES // 3)
