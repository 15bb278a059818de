"""A stateful machine over the HTTP edge: principals talk, approve, replay and read on two replicas that crash.

Rules act through real HTTP requests (SSE answers) on an `Adapter` served by `create_app`; the invariants of
`invariant_checks` are checked against the real store after every step.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Coroutine
from datetime import timedelta
from typing import Any

from agui import apply_events, run_input, tool_answer, user
from hypothesis import event as tally
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from invariant_checks import (
    Journal,
    Observed,
    check_answer,
    check_executions,
    check_growth,
    check_one_call_one_answer,
    check_reads,
    wire,
)
from invariant_world import LEASE, POLICIES, PRINCIPALS, THREADS, TOOLS, Clock, Ledger, Replica, start_replica

from adapter.stores import StoredThread, TurnStore

WHO = st.sampled_from(PRINCIPALS)
ROLE = st.sampled_from(["owner", "approver", "stranger"])
THREAD = st.sampled_from(THREADS)
REPLICA = st.sampled_from([0, 1])
MADE_UP = 9
PICK = st.integers(0, MADE_UP)
"""Which interrupt a rule answers, counted from the latest one shown; MADE_UP: one nobody was shown."""
ANSWER = st.sampled_from(["approve", "deny", "edit", "cancel", "toolmessage"])


class Machine(RuleBasedStateMachine):
    """Subclasses say which store: `open_store` opens one more store object on the example's database."""

    def open_database(self) -> Callable[[], TurnStore]:
        raise NotImplementedError

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.replicas: list[Replica] = []
        self.retired: list[Replica] = []
        self.frozen: list[asyncio.Future[Any]] = []
        self.journal = Journal()
        self.ledger = Ledger()
        self.clock = Clock()
        self.numbers = itertools.count(10_000)
        self.generations = itertools.count()
        self.histories: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self.interrupts: list[tuple[str, dict[str, Any]]] = []
        self.names: dict[str, str] = {}
        self.resumes: list[tuple[str, str, dict[str, Any]]] = []

    def run(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        return self.loop.run_until_complete(coroutine)

    @initialize(policy=st.sampled_from(sorted(POLICIES)), history=st.sampled_from(["client", "server"]))
    def start(self, policy: str, history: str) -> None:
        self.policy_name, self.history = policy, history
        self.policy = POLICIES[policy]
        self.open_store = self.run(self.opener())
        self.observer = self.open_store()
        self.replicas = [self.replica() for _ in range(2)]

    async def opener(self) -> Callable[[], TurnStore]:
        return self.open_database()

    def replica(self) -> Replica:
        return start_replica(
            self.open_store, self.ledger, self.clock, self.policy_name, self.history, next(self.generations)
        )

    def kill(self, index: int) -> None:
        """The replica's process died: its store answers nothing more; a fresh process takes its place."""
        dead = self.replicas[index]
        dead.store.dead = True
        self.retired.append(dead)
        self.replicas[index] = self.replica()

    @property
    def dead(self) -> set[int]:
        return {replica.generation for replica in self.retired}

    def marker(self, what: str) -> str:
        return f"{what} {next(self.numbers)}"

    async def post(self, index: int, who: str, thread_id: str, body: dict[str, Any]) -> dict[str, Any] | None:
        """POST as `who` on a replica; record and check the answer; the last event, for a stream."""
        replica = self.replicas[index]
        resumed = bool(body.get("resume"))
        reply = await replica.clients[who].post(body, clean=False)
        self.journal.note_answer(who, thread_id, reply.body)
        if replica.store.dead:
            return None  # its connection was cut: the client got no answer
        check_answer(reply.status, reply.headers, reply.body, resumed=resumed)
        if reply.status != 200:
            return None
        events = reply.events
        for event in events:
            if event["type"] == "TOOL_CALL_START":
                self.names[event["toolCallId"]] = event["toolCallName"]
        last = events[-1]
        tally(f"{'resume' if resumed else 'run'}: {last['type']} {last.get('code') or ''}")
        if last["type"] == "RUN_FINISHED":
            key = (who, thread_id)
            self.histories[key] = apply_events(body["messages"] or self.histories.get(key, []), events)
            for interrupt in (last.get("outcome") or {}).get("interrupts", []):
                self.interrupts.append((thread_id, interrupt))
        return last

    def history_of(self, who: str, thread_id: str) -> list[dict[str, Any]]:
        return list(self.histories.get((who, thread_id), []))

    async def say_(self, who: str, thread_id: str, what: str, index: int, fresh: bool) -> None:
        text = self.marker({"hello": "hello", "pay": "pay", "go": "go to page"}[what])
        message = user(text)
        self.journal.sent[(who, thread_id)].add(message["id"])
        self.journal.texts[who].add(text)
        history = [] if fresh else self.history_of(who, thread_id)
        await self.post(index, who, thread_id, run_input(thread_id, [*history, message], tools=TOOLS))

    def as_role(self, role: str, thread_id: str) -> str:
        """The principal who plays `role` on the thread: its owner, one the policy lets approve, or neither."""
        owner = self.journal.owners.get(thread_id) or "alice"
        if role == "owner":
            return owner
        approvers = [p for p in PRINCIPALS if self.policy(p, owner, "approve")]
        if role == "approver":
            return next((p for p in approvers if p != owner), owner)
        return next((p for p in PRINCIPALS if p not in approvers), "bob")

    def entry(self, pick: int, answer: str) -> tuple[str, dict[str, Any] | None, dict[str, Any] | None]:
        """The interrupt picked (or a made-up one), its thread, the resume entry, or a ToolMessage answer."""
        if not self.interrupts or pick == MADE_UP:
            return THREADS[0], {"interruptId": "int_made_up", "status": "resolved", "payload": {"approved": True}}, None
        thread_id, interrupt = self.interrupts[-1 - pick % len(self.interrupts)]  # the latest first
        call_id = interrupt.get("toolCallId", "")
        if answer == "toolmessage":
            forged = tool_answer(call_id, self.marker("paid"))
            self.journal.forged.add(forged["id"])
            return thread_id, None, forged
        if answer == "cancel":
            return thread_id, {"interruptId": interrupt["id"], "status": "cancelled"}, None
        payload: dict[str, Any] = {"approved": answer != "deny"}
        if answer == "edit":
            payload["editedArgs"] = {"amount": self.marker("").strip()}
        if self.names.get(call_id) != "pay":
            payload = {"navigated": answer}
        return thread_id, {"interruptId": interrupt["id"], "status": "resolved", "payload": payload}, None

    async def resume_(
        self, role: str, pick: int, answer: str, elsewhere: str | None, index: int, keep: bool
    ) -> asyncio.Future[Any]:
        thread_id, entry, message = self.entry(pick, answer)
        who = self.as_role(role, thread_id)
        thread_id = elsewhere or thread_id
        if message is not None:
            self.journal.texts[who].add(str(message["content"]))
        history = self.history_of(who, thread_id) if keep else []
        if message is not None:
            body = run_input(thread_id, [*history, message], tools=TOOLS)
        else:
            assert entry is not None  # `entry` gives a ToolMessage or a resume entry
            body = run_input(thread_id, history, tools=TOOLS, resume=[entry])
            self.resumes.append((who, thread_id, body))
        return asyncio.ensure_future(self.post(index, who, thread_id, body))

    @rule(who=WHO, thread_id=THREAD, what=st.sampled_from(["hello", "pay", "go"]), index=REPLICA, fresh=st.booleans())
    def say(self, who: str, thread_id: str, what: str, index: int, fresh: bool) -> None:
        self.run(self.say_(who, thread_id, what, index, fresh))

    @rule(first=WHO, second=WHO, thread_id=THREAD, what=st.sampled_from(["hello", "pay", "go"]), fresh=st.booleans())
    def race(self, first: str, second: str, thread_id: str, what: str, fresh: bool) -> None:
        """Two requests on one thread at once, one on each replica (a thread's creation among them)."""

        async def both() -> None:
            await asyncio.gather(
                self.say_(first, thread_id, what, 0, fresh), self.say_(second, thread_id, "hello", 1, fresh)
            )

        self.run(both())

    @rule(role=ROLE, pick=PICK, answer=ANSWER, elsewhere=st.none() | THREAD, index=REPLICA, keep=st.booleans())
    def resume(self, role: str, pick: int, answer: str, elsewhere: str | None, index: int, keep: bool) -> None:
        self.run(self.run_resume(role, pick, answer, elsewhere, index, keep))

    async def run_resume(self, *args: Any) -> None:
        await (await self.resume_(*args))

    @rule(pick=PICK, who=st.none() | WHO, index=REPLICA)
    def replay(self, pick: int, who: str | None, index: int) -> None:
        if not self.resumes:
            return
        sender, thread_id, body = self.resumes[pick % len(self.resumes)]
        again = {**body, "runId": f"{body['runId']}-again{next(self.numbers)}"}
        self.run(self.post(index, who or sender, thread_id, again))

    @rule(who=WHO, thread_id=THREAD, index=REPLICA)
    def read(self, who: str, thread_id: str, index: int) -> None:
        response = self.run(self.replicas[index].clients[who].get(f"/threads/{thread_id}"))
        self.journal.note_answer(who, thread_id, response.content)
        assert response.status_code in (200, 404), response.status_code
        if response.status_code == 404:
            unknown = self.run(self.replicas[index].clients[who].get("/threads/no-such-thread"))
            assert response.json() == unknown.json()

    @rule(role=ROLE, pick=PICK, index=REPLICA, keep=st.booleans())
    def crash_mid_tool(self, role: str, pick: int, index: int, keep: bool) -> None:
        """Approve on a replica that dies inside the tool, once it started; its request never answers."""
        self.run(self.freeze(role, pick, index, keep))

    async def freeze(self, role: str, pick: int, index: int, keep: bool) -> None:
        generation = self.replicas[index].generation
        self.ledger.freezing.add(generation)
        self.ledger.started.clear()
        request = await self.resume_(role, pick, "approve", None, index, keep)
        started = asyncio.ensure_future(self.ledger.started.wait())
        await asyncio.wait({request, started}, return_when=asyncio.FIRST_COMPLETED)
        if request.done():
            started.cancel()
            self.ledger.freezing.discard(generation)
            request.result()
            return
        self.frozen.append(request)
        tally("a replica died mid-tool")
        self.kill(index)

    @rule(
        saves=st.integers(1, 2),
        commit_first=st.booleans(),
        role=ROLE,
        pick=PICK,
        answer=ANSWER,
        thread_id=THREAD,
        index=REPLICA,
    )
    def crash_mid_save(
        self, saves: int, commit_first: bool, role: str, pick: int, answer: str, thread_id: str, index: int
    ) -> None:
        """A replica dies at its next (or second) save, before or just after the write; a say or a resume."""
        store = self.replicas[index].store
        store.die_at_save(saves, commit_first=commit_first)
        if pick % 2:
            self.run(self.run_resume(role, pick // 2, answer, None, index, True))
        else:
            self.run(self.say_(self.as_role(role, thread_id), thread_id, "pay", index, False))
        if store.dead:
            tally("a replica died mid-save")
            self.kill(index)
        store.saves_left = None

    @rule()
    def lapse(self) -> None:
        """Every claim's lease runs out."""
        self.clock.now += LEASE + timedelta(seconds=1)

    @invariant()
    def holds(self) -> None:
        if not self.replicas:
            return
        threads: dict[str, StoredThread | None] = {t: self.run(self.observer.load(t)) for t in THREADS}
        for thread_id, stored in threads.items():
            check_growth(self.journal, thread_id, stored)
            check_one_call_one_answer(thread_id, wire(stored))
        check_reads(self.journal, threads, self.policy)
        observed = Observed(threads, client_kept=self.history == "client")
        check_executions(self.journal, self.ledger.executions, self.dead, observed, self.policy)

    def teardown(self) -> None:
        self.run(self.close())
        self.loop.close()

    async def close(self) -> None:
        self.ledger.thaw.set()
        await asyncio.gather(*self.frozen, return_exceptions=True)
        for replica in [*self.replicas, *self.retired]:
            await replica.close()
        if self.replicas:
            await self.observer.close()
