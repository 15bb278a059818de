"""A stateful machine over the HTTP edge and a hostile upstream: one record of what happened (issue 27).

An `Adapter` over `AGUIUpstream`, served by `create_app`, keeps its threads in a real store. The upstream
(`record_world.Upstream`) reuses call ids within a run and from earlier turns, restates calls of the current
turn, sends results for calls it never deferred, leaves its own calls open, with or without its own
interrupt. Clients continue with their whole history or only their new messages, answer open calls and
interrupts, rewrite the stored history (an answer replaced under its id or a new one, dropped, the tail cut,
a user message edited) and repeat a message id in one input; under either history mode, with or without a
view that reads only the tail. After every step: each call of the record is one call with at most one
answer, the record lost and changed nothing, no answer was invented, the model saw what the server said
as stored, and every answer was one clean stream or a coded 4xx.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Callable, Coroutine
from typing import Any

import httpx
from agui import NAVIGATE, Client, apply_events, new_id, run_input, tool_answer, user
from hypothesis import event as tally
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from invariant_checks import (
    Authors,
    check_answer,
    check_kept,
    check_not_invented,
    check_one_call_one_answer,
    check_server_said,
    wire,
)
from record_world import ENDINGS, OWN, SHAPES, Bank, Plan, TailView, Upstream

from adapter import Adapter, create_app
from adapter.backends import AGUIUpstream
from adapter.stores import TurnStore

THREADS = ("t0", "t1")
THREAD = st.sampled_from(THREADS)
PLAN = st.tuples(
    st.lists(st.sampled_from(SHAPES), min_size=1, max_size=3),
    st.sampled_from(ENDINGS[:1]) | st.sampled_from(ENDINGS),  # mostly success: a waiting thread refuses new runs
    st.integers(0, 7),
)
BASE = st.sampled_from(["kept", "stored", "new"])
"""What history a client sends: the one it kept from the streams, the stored one, or only its new messages."""
REWRITES = st.sampled_from(["same_id", "new_id", "drop_add", "drop_answer", "shorten", "edit_user", "drop_user"])
DECISION = st.sampled_from(["yes", "no", "cancel"])


class RecordMachine(RuleBasedStateMachine):
    """Subclasses say which store: `open_database` returns how to open one more store object on it."""

    def open_database(self) -> Callable[[], TurnStore]:
        raise NotImplementedError

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.numbers = itertools.count(1)
        self.upstream = Upstream()
        self.bank = Bank()
        self.authors = Authors(own={OWN})
        self.kept: dict[str, list[tuple[str, str]]] = {}
        """The record of each thread as the last check read it: (id, message JSON)."""
        self.histories: dict[str, list[dict[str, Any]]] = {}
        """Each thread's messages as its client keeps them, from the streams it received."""
        self.waiting: dict[str, tuple[list[str], list[dict[str, Any]]]] = {}
        """Each thread's open calls and interrupts, as its last finished run left them."""
        self.started = False

    def run(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        return self.loop.run_until_complete(coroutine)

    @initialize(
        history=st.sampled_from(["client", "server"]),
        tail=st.none() | st.integers(1, 4),
        outcome=st.sampled_from(["pending", "interrupt"]),
    )
    def start(self, history: str, tail: int | None, outcome: str) -> None:
        self.history = history
        tally(f"history={history} tail={tail} frontend_outcome={outcome}")
        self.open_store = self.run(self.opener())
        self.store = self.open_store()
        self.observer = self.open_store()
        upstream_http = httpx.AsyncClient(transport=httpx.ASGITransport(self.upstream.app))
        self.adapter = Adapter(
            AGUIUpstream("http://upstream/", client=upstream_http),
            tools=self.bank.tools(),
            store=self.store,
            history=history,  # type: ignore[arg-type]
            history_view=TailView(tail) if tail is not None else None,
            frontend_outcome=outcome,  # type: ignore[arg-type]
        )
        self.upstream_http = upstream_http
        self.http = httpx.AsyncClient(transport=httpx.ASGITransport(create_app(self.adapter)), base_url="http://a")
        self.client = Client(self.http, "http://a")
        self.started = True

    async def opener(self) -> Callable[[], TurnStore]:
        return self.open_database()

    def marker(self, what: str) -> str:
        return f"{what} {next(self.numbers)}"

    async def stored(self, thread_id: str) -> list[dict[str, Any]]:
        return wire(await self.observer.load(thread_id))

    async def post(
        self, thread_id: str, messages: list[dict[str, Any]], plan: tuple[list[str], str, int], **extra: Any
    ) -> dict[str, Any] | None:
        """POST one input with the upstream's plan for it; check the answer and what the upstream did."""
        before = await self.stored(thread_id)
        shapes, ending, pick = plan
        thread_calls = [
            (call["id"], call["function"]["name"])
            for message in before
            if message["role"] == "assistant"
            for call in message.get("toolCalls") or []
        ]
        answered = frozenset(message["toolCallId"] for message in before if message["role"] == "tool")
        stored = frozenset(message["id"] for message in before)
        self.upstream.plan = Plan(shapes, ending, pick, thread_calls, answered, stored)
        self.upstream.served.clear()
        body = run_input(thread_id, messages, tools=[NAVIGATE], **extra)
        resumed = bool(extra.get("resume"))
        reply = await self.client.post(body, resumed=resumed, clean=False)
        self.upstream.plan = None
        check_answer(reply.status, reply.headers, reply.body, resumed=resumed)
        after = await self.stored(thread_id)
        for served in self.upstream.served:
            check_server_said(thread_id, served.messages, after)
        if reply.status != 200:
            tally(f"refused {json.loads(reply.body)['error']['code']}")
            return {"type": "HTTP", "code": json.loads(reply.body)["error"]["code"]}
        last = reply.events[-1]
        first = self.upstream.served[0] if self.upstream.served else None
        if first is not None and not first.judged:
            tally(f"upstream reused a message id: {last['type']} {last.get('code') or ''}")
        elif first is not None:
            tally(f"upstream {'hostile' if first.hostile else 'benign'}: {last['type']} {last.get('code') or ''}")
            if first.hostile:
                assert (last["type"], last.get("code")) == ("RUN_ERROR", "BACKEND_ERROR"), (first.shapes, last)
                if not resumed:
                    assert after == before, f"a refused run stored {len(after) - len(before)} messages"
            else:
                assert last.get("code") != "BACKEND_ERROR", (first.shapes, last)
        else:
            tally(f"no upstream run: {last['type']} {last.get('code') or ''}")
        if last["type"] == "RUN_FINISHED":
            self.histories[thread_id] = apply_events(messages or self.histories.get(thread_id, []), reply.events)
            outcome = last.get("outcome") or {}
            self.waiting[thread_id] = (list(outcome.get("pendingToolCallIds") or []), outcome.get("interrupts") or [])
        return last

    async def base(self, thread_id: str, base: str) -> list[dict[str, Any]]:
        if base == "kept":
            return list(self.histories.get(thread_id, []))
        if base == "stored":
            return await self.stored(thread_id)
        return []

    def answer(self, call_id: str) -> dict[str, Any]:
        message = tool_answer(call_id, self.marker("client answer"))
        self.authors.client.add(message["content"])
        return message

    @rule(thread_id=THREAD, base=BASE, plan=PLAN)
    def say(self, thread_id: str, base: str, plan: tuple[list[str], str, int]) -> None:
        """A user message, after the client's kept or stored history, or alone."""

        async def say() -> None:
            history = await self.base(thread_id, base)
            await self.post(thread_id, [*history, user(self.marker("hello"))], plan)

        self.run(say())

    @precondition(lambda self: any(waiting[0] for waiting in self.waiting.values()))
    @rule(thread_id=THREAD, base=BASE, count=st.integers(1, 3), plan=PLAN)
    def answer_open(self, thread_id: str, base: str, count: int, plan: tuple[list[str], str, int]) -> None:
        """The client answers the calls its last run left pending, as ToolMessages (some or all of them)."""
        pending = self.waiting.get(thread_id, ([], []))[0]
        if not pending:
            return

        async def answer() -> None:
            history = await self.base(thread_id, base)
            answers = [self.answer(call_id) for call_id in pending[:count]]
            await self.post(thread_id, [*history, *answers], plan)

        self.run(answer())

    @precondition(lambda self: any(waiting[1] for waiting in self.waiting.values()))
    @rule(thread_id=THREAD, base=BASE, decisions=st.lists(DECISION, min_size=1, max_size=3), partial=st.booleans(),
          plan=PLAN)  # fmt: skip
    def resume(
        self, thread_id: str, base: str, decisions: list[str], partial: bool, plan: tuple[list[str], str, int]
    ) -> None:
        """The client answers its last run's interrupts: approve, decline or cancel each (maybe not all)."""
        interrupts = self.waiting.get(thread_id, ([], []))[1]
        if not interrupts:
            return
        entries = []
        for interrupt, decision in zip(interrupts, itertools.cycle(decisions)):
            if decision == "cancel":
                entries.append({"interruptId": interrupt["id"], "status": "cancelled"})
                continue
            payload = {"approved": decision == "yes", "note": self.marker("decided")}
            self.authors.decided.append(payload)
            entries.append({"interruptId": interrupt["id"], "status": "resolved", "payload": payload})
        if partial and len(entries) > 1:
            entries.pop()

        async def resume() -> None:
            history = await self.base(thread_id, base)
            await self.post(thread_id, history, plan, resume=entries)

        self.run(resume())

    @precondition(lambda self: any(self.kept.get(t) for t in THREADS))
    @rule(thread_id=THREAD, base=BASE, pick=st.integers(0, 7), plan=PLAN)
    def answer_again(self, thread_id: str, base: str, pick: int, plan: tuple[list[str], str, int]) -> None:
        """The client answers a call the record already answers, under a new id (maybe older than a view's tail)."""

        async def again() -> None:
            stored = await self.stored(thread_id)
            answered = [m["toolCallId"] for m in stored if m["role"] == "tool"]
            if not answered:
                return
            history, call_id = await self.base(thread_id, base), answered[pick % len(answered)]
            last = await self.post(thread_id, [*history, self.answer(call_id)], plan)
            assert last is not None, last
            assert last.get("code") in ("RESUME_DUPLICATE", "RESUME_REQUIRED"), last

        self.run(again())

    @precondition(lambda self: any(self.kept.get(t) for t in THREADS))
    @rule(thread_id=THREAD, how=REWRITES, pick=st.integers(0, 7), more=st.booleans(), plan=PLAN)
    def rewrite(self, thread_id: str, how: str, pick: int, more: bool, plan: tuple[list[str], str, int]) -> None:
        """The client resends the stored history rewritten: an answer replaced or dropped, its tail cut, a user
        message edited or left out."""

        async def rewrite() -> None:
            stored = await self.stored(thread_id)
            answers = [i for i, m in enumerate(stored) if m["role"] == "tool"]
            users = [i for i, m in enumerate(stored) if m["role"] == "user"]
            sent = list(stored)
            duplicate = False
            if how in ("same_id", "new_id", "drop_add", "drop_answer") and answers:
                index = answers[pick % len(answers)]
                old = stored[index]
                other = self.answer(old["toolCallId"])
                if how == "same_id":
                    sent[index] = {**old, "content": other["content"]}
                elif how == "new_id":
                    sent[index], duplicate = other, True
                elif how == "drop_add":
                    del sent[index]
                    sent.append(other)
                    duplicate = True
                else:
                    del sent[index]
            elif how == "shorten" and stored:
                sent = stored[: pick % len(stored)]
            elif how == "drop_user" and users:  # the branch leaves a message out and keeps what followed it
                del sent[users[pick % len(users)]]
            elif how == "edit_user" and users:
                index = users[pick % len(users)]
                sent[index] = {**stored[index], "content": self.marker("edited")}
            else:
                return
            tally(f"rewrite {how}")
            last = await self.post(thread_id, [*sent, *([user(self.marker("after"))] if more else [])], plan)
            if duplicate:  # or the thread waits for answers to interrupts first
                assert last is not None, last
                assert last.get("code") in ("RESUME_DUPLICATE", "RESUME_REQUIRED"), last

        self.run(rewrite())

    @rule(thread_id=THREAD, base=BASE, which=st.sampled_from(["new", "stored", "answer"]), plan=PLAN)
    def repeat_id(self, thread_id: str, base: str, which: str, plan: tuple[list[str], str, int]) -> None:
        """One input holds two messages under one id: refused whole."""

        async def repeat() -> None:
            history = await self.base(thread_id, base)
            said = user(self.marker("twice"))
            if which == "stored" and history:
                copy = {**history[-1]}
                messages = [*history, said, copy]
            elif which == "answer":
                answer = self.answer(new_id("call"))
                messages = [*history, said, answer, {**answer, "content": self.marker("other")}]
            else:
                messages = [*history, said, {**said, "content": self.marker("again")}]
            last = await self.post(thread_id, messages, plan)
            assert last == {"type": "HTTP", "code": "DUPLICATE_MESSAGE_ID"}, last

        self.run(repeat())

    @precondition(lambda self: self.started)
    @invariant()
    def one_record(self) -> None:
        for thread_id in THREADS:
            messages = self.run(self.stored(thread_id))
            check_one_call_one_answer(thread_id, messages)
            check_kept(self.kept, thread_id, messages)
            self.authors.upstream.update(self.upstream.results)
            check_not_invented(thread_id, messages, self.authors)
        for call_id, results in self.bank.paid.items():
            assert len(results) == 1, f"{call_id} paid {results}"

    def teardown(self) -> None:
        if self.started:
            self.run(self.close())
        self.loop.close()

    async def close(self) -> None:
        await self.http.aclose()
        await self.adapter.aclose()
        await self.upstream_http.aclose()
        await self.observer.close()
