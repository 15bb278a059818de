"""The world the invariant machines act on: two replicas over one real store, principals, one clock, crashes.

Each replica is an `Adapter` with its own store object on the same SQLite file (or Postgres schema), served
through `create_app` and reached over HTTP by an `httpx.AsyncClient` per principal (`x-user` names it). A replica
that crashes is replaced by a fresh one on the same store, as a restarted process would be; its store refuses
every read and write from then on, so nothing it does after its death reaches the store.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import httpx
from agui import NAVIGATE, Client
from starlette.requests import Request

from adapter import Action, Adapter, Limits, ScriptedBackend, ToolContext, tool

# private on purpose: the adapter's default policy, one of the policies the machines run under
from adapter._run._access import owner_only
from adapter.backends import Call, Rule
from adapter.stores import (
    ANY_INCARNATION,
    JournalEvent,
    RunJournal,
    StoredThread,
    ThreadChange,
    ThreadSummary,
    TurnStore,
)

LEASE = timedelta(minutes=5)
PRINCIPALS = ("alice", "bob", "manager")
THREADS = ("t0", "t1", "t2")
TOOLS = [NAVIGATE]
RULES = [
    Rule(r"pay (?P<amount>\d+)", steps=[[Call("pay", {"amount": "{amount}"})]], reply="Done."),
    Rule(r"go to (?P<page>\w+)", steps=[[Call("navigate", {"path": "/{page}"})]], reply="Opened it."),
]
Policy = Callable[[str | None, str | None, Action], bool]


def four_eyes(principal: str | None, owner: str | None, action: Action) -> bool:
    """Someone other than the owner decides an approval; everything else is the owner's."""
    if action == "approve":
        return principal is not None and principal != owner
    return owner is None or principal == owner


def manager(principal: str | None, owner: str | None, action: Action) -> bool:
    """Owners do anything on their threads; the manager also reads and approves everyone's."""
    return owner is None or principal == owner or (principal == "manager" and action in ("read", "approve"))


POLICIES: dict[str, Policy] = {"owner": owner_only, "four_eyes": four_eyes, "manager": manager}


class Died(Exception):
    """The replica's process died: what its store answers from then on."""


class Mortal:
    """A store as one replica's process reaches it: it may die before, or right after, a chosen save."""

    def __init__(self, inner: TurnStore) -> None:
        self.inner = inner
        self.dead = False
        self.saves_left: int | None = None
        self.commit_first = False

    def die_at_save(self, count: int, *, commit_first: bool) -> None:
        """Die at the `count`-th save from now; with `commit_first` that save is applied before the death."""
        self.saves_left, self.commit_first = count, commit_first

    async def load(self, thread_id: str, *, since: int | None = 0, until: int | None = None) -> StoredThread | None:
        if self.dead:
            raise Died(thread_id)
        return await self.inner.load(thread_id, since=since, until=until)

    async def find_message(self, thread_id: str, message_id: str) -> int | None:
        if self.dead:
            raise Died(thread_id)
        return await self.inner.find_message(thread_id, message_id)

    async def save(
        self,
        thread_id: str,
        change: ThreadChange,
        *,
        expected_version: int,
        fence: int | None = None,
        incarnation: object = ANY_INCARNATION,
    ) -> int:
        if self.dead:
            raise Died(thread_id)
        if self.saves_left is not None:
            self.saves_left -= 1
            if self.saves_left == 0:
                self.dead = True
                if self.commit_first:
                    await self.inner.save(
                        thread_id, change, expected_version=expected_version, fence=fence, incarnation=incarnation
                    )
                raise Died(thread_id)
        return await self.inner.save(
            thread_id, change, expected_version=expected_version, fence=fence, incarnation=incarnation
        )

    async def purge(
        self, older_than: timedelta, *, grace: timedelta = timedelta(0), now: datetime | None = None
    ) -> int:
        return await self.inner.purge(older_than, grace=grace, now=now)

    # The runs' journals die with the replica too: what it had not appended before it died, it never appends.

    async def append_events(
        self, thread_id: str, run_id: str, events: Sequence[JournalEvent], *, ended: bool = False
    ) -> bool:
        if self.dead:
            raise Died(thread_id)
        return await self.inner.append_events(thread_id, run_id, events, ended=ended)

    async def read_events(self, thread_id: str, run_id: str, *, after: int = 0, limit: int = 1000) -> RunJournal | None:
        if self.dead:
            raise Died(thread_id)
        return await self.inner.read_events(thread_id, run_id, after=after, limit=limit)

    async def request_stop(self, thread_id: str, run_id: str) -> bool:
        if self.dead:
            raise Died(thread_id)
        return await self.inner.request_stop(thread_id, run_id)

    async def list_threads(
        self, owner: str | None, *, before: str | None = None, limit: int = 100
    ) -> tuple[list[ThreadSummary], str | None]:
        if self.dead:
            raise Died("list")
        return await self.inner.list_threads(owner, before=before, limit=limit)

    async def delete_thread(self, thread_id: str, *, incarnation: object = ANY_INCARNATION) -> bool:
        if self.dead:
            raise Died(thread_id)
        return await self.inner.delete_thread(thread_id, incarnation=incarnation)

    async def ping(self, *, write: bool = False) -> None:
        if self.dead:
            raise Died("ping")
        await self.inner.ping(write=write)

    async def close(self) -> None:
        await self.inner.close()


@dataclass
class Execution:
    """One execution of the approval-gated `pay` tool: `result` stays None when its replica died during it."""

    call_id: str
    thread_id: str
    key: str
    principal: str | None
    generation: int
    result: str | None = None


@dataclass
class Ledger:
    """Every execution of `pay`; a generation in `freezing` stalls its executions forever (it dies mid-tool)."""

    executions: list[Execution] = field(default_factory=list)
    freezing: set[int] = field(default_factory=set)
    started: asyncio.Event = field(default_factory=asyncio.Event)
    thaw: asyncio.Event = field(default_factory=asyncio.Event)
    """Set at teardown only, so that the dead replicas' shielded tool calls end and their adapters close."""

    def pay_tool(self, generation: int) -> Any:
        ledger = self

        @tool(requires_approval=True)
        async def pay(amount: str, ctx: ToolContext) -> str:
            """Pay an amount."""
            execution = Execution(ctx.tool_call_id, ctx.thread_id, ctx.idempotency_key, ctx.principal, generation)
            ledger.executions.append(execution)
            if generation in ledger.freezing:
                ledger.started.set()
                await ledger.thaw.wait()
            execution.result = f"paid {amount}"
            return execution.result

        return pay


def by_header(request: Request) -> str | None:
    return request.headers.get("x-user")


class Clock:
    """The replicas' one clock; a lease lapses when a rule moves it."""

    def __init__(self) -> None:
        from datetime import UTC, datetime

        self.now = datetime(2030, 1, 1, tzinfo=UTC)

    def __call__(self) -> Any:
        return self.now


@dataclass
class Replica:
    """One served adapter and a client per principal."""

    adapter: Adapter
    store: Mortal
    generation: int
    http: list[httpx.AsyncClient]
    clients: dict[str, Client]

    async def close(self) -> None:
        for client in self.http:
            await client.aclose()
        await self.adapter.aclose()


def start_replica(
    open_store: Callable[[], TurnStore], ledger: Ledger, clock: Clock, policy: str, history: Any, generation: int
) -> Replica:
    """A replica of the app: its own store object over the shared database, the shared clock and ledger."""
    from adapter import create_app

    store = Mortal(open_store())
    adapter = Adapter(
        ScriptedBackend(RULES),
        tools=[ledger.pay_tool(generation)],
        store=store,
        limits=Limits(claim_lease=LEASE),
        authorize=None if policy == "owner" else POLICIES[policy],
        history=history,
    )
    adapter.config.use_clock(clock)
    app = create_app(adapter, principal=by_header)
    http = [
        httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url=f"http://r{generation}", headers={"x-user": p})
        for p in PRINCIPALS
    ]
    clients = {p: Client(h, f"http://r{generation}") for p, h in zip(PRINCIPALS, http, strict=True)}
    return Replica(adapter, store, generation, http, clients)
