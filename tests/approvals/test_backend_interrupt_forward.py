"""Answers to a backend's own interrupts: checked against its schema, and spent only when it accepts them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from ag_ui.core import Interrupt, RunAgentInput
from agui import collect, resolved, run_input, user
from clock import clocked

from adapter import Adapter, Limits
from adapter.backends import BackendError, BackendInterrupt, BackendItem, ModelRequest, TextDelta
from adapter.stores import MemoryStore, ThreadChange

if TYPE_CHECKING:
    from clock import Clock

LEASE = timedelta(minutes=5)
SCHEMA = {"type": "object", "properties": {"approved": {"type": "boolean"}}, "required": ["approved"]}


class Asking:
    """A backend that stops for its own interrupt, and refuses the first `refusals` answers it is sent."""

    def __init__(self, refusals: int = 0) -> None:
        self.refusals = refusals
        self.forwarded: list[list[dict[str, Any]]] = []

    async def stream(self, request: ModelRequest) -> AsyncIterator[BackendItem]:
        if not request.resume:
            yield BackendInterrupt([Interrupt(id="up-1", reason="confirmation", response_schema=SCHEMA)])
            return
        self.forwarded.append([entry.model_dump(mode="json") for entry in request.resume])
        if len(self.forwarded) <= self.refusals:
            raise BackendError("The upstream agent failed: no such interrupt", code="UPSTREAM_ERROR")
        yield TextDelta("accepted")


async def run(adapter: Adapter, body: dict[str, Any]) -> list[dict[str, Any]]:
    return await collect(adapter.run(RunAgentInput.model_validate(body)), resumed="resume" in body)


async def open_ids(adapter: Adapter) -> list[str]:
    stored = await adapter.thread("t")
    assert stored is not None
    return [each["id"] for each in stored["interrupts"]]


async def test_a_payload_that_fails_the_backends_schema_is_refused_before_it_is_forwarded() -> None:
    backend = Asking()
    adapter = Adapter(backend)
    await run(adapter, run_input("t", [user("go")]))

    refused = await run(adapter, run_input("t", [], resume=[resolved("up-1", {"approved": "yes"})]))

    assert (refused[-1]["type"], refused[-1]["code"]) == ("RUN_ERROR", "RESUME_PAYLOAD_INVALID")
    assert backend.forwarded == []
    assert await open_ids(adapter) == ["up-1"]


async def test_a_refused_forward_leaves_the_interrupt_open_for_the_same_answer_again() -> None:
    backend = Asking(refusals=1)
    adapter = Adapter(backend)
    await run(adapter, run_input("t", [user("go")]))
    entry = resolved("up-1", {"approved": True})

    refused = await run(adapter, run_input("t", [], resume=[entry]))
    still_open = await open_ids(adapter)
    applied = await run(adapter, run_input("t", [], resume=[entry]))
    replayed = await run(adapter, run_input("t", [], resume=[entry]))

    assert (refused[-1]["type"], refused[-1]["code"]) == ("RUN_ERROR", "UPSTREAM_ERROR")
    assert still_open == ["up-1"]
    assert applied[-1]["outcome"] == {"type": "success"}
    assert replayed[-1]["outcome"] == {"type": "success"}
    assert len(backend.forwarded) == 2  # the refused one and the accepted one; the replay sent nothing
    assert await open_ids(adapter) == []


async def test_a_corrected_answer_may_follow_a_refused_one() -> None:
    backend = Asking(refusals=1)
    adapter = Adapter(backend)
    await run(adapter, run_input("t", [user("go")]))

    await run(adapter, run_input("t", [], resume=[resolved("up-1", {"approved": True})]))
    corrected = await run(adapter, run_input("t", [], resume=[resolved("up-1", {"approved": False})]))

    assert corrected[-1]["outcome"] == {"type": "success"}
    assert [entries[0]["payload"] for entries in backend.forwarded] == [{"approved": True}, {"approved": False}]


async def test_an_interrupt_whose_schema_cannot_be_applied_passes_its_answer_on_unchecked() -> None:
    class Unresolvable(Asking):
        async def stream(self, request: ModelRequest) -> AsyncIterator[BackendItem]:
            if request.resume:
                self.forwarded.append([entry.model_dump(mode="json") for entry in request.resume])
                yield TextDelta("accepted")
                return
            broken = {"$ref": "https://schemas.example/approval.json"}
            yield BackendInterrupt([Interrupt(id="up-1", reason="confirmation", response_schema=broken)])

    backend = Unresolvable()
    adapter = Adapter(backend)
    await run(adapter, run_input("t", [user("go")]))

    applied = await run(adapter, run_input("t", [], resume=[resolved("up-1", {"approved": True})]))

    assert applied[-1]["outcome"] == {"type": "success"}
    assert [entries[0]["payload"] for entries in backend.forwarded] == [{"approved": True}]


async def test_a_client_that_leaves_while_the_answers_are_forwarded_leaves_the_interrupt_open() -> None:
    class Slow(Asking):
        async def stream(self, request: ModelRequest) -> AsyncIterator[BackendItem]:
            if request.resume and not self.forwarded:
                self.forwarded.append([entry.model_dump(mode="json") for entry in request.resume])
                yield TextDelta("working")
                await asyncio.Event().wait()  # the upstream never finishes; the client gives up first
            async for item in super().stream(request):
                yield item

    backend = Slow()
    adapter = Adapter(backend, on_disconnect="stop")  # the run ends with its client (the default goes on)
    await run(adapter, run_input("t", [user("go")]))
    entry = resolved("up-1", {"approved": True})

    events = adapter.run(RunAgentInput.model_validate(run_input("t", [], resume=[entry])))
    async for event in events:
        if event.type == "TEXT_MESSAGE_CONTENT":
            break
    await events.aclose()  # type: ignore[attr-defined]
    for _ in range(500):  # until the turn is given back (in the background, once the client is gone)
        applied = await run(adapter, run_input("t", [], resume=[entry]))
        if applied[-1].get("code") != "RESUME_CONFLICT":
            break
        await asyncio.sleep(0.01)

    assert applied[-1]["outcome"] == {"type": "success"}
    assert len(backend.forwarded) == 2


async def test_a_refused_forward_after_a_takeover_leaves_the_turn_unclaimed(clock: Clock) -> None:
    """A claim left by a replica that died is taken over after the lease; the refusal gives the turn back unclaimed."""
    store = MemoryStore()
    adapter = clocked(Adapter(Asking(refusals=1), store=store, limits=Limits(claim_lease=LEASE)), clock)
    await run(adapter, run_input("t", [user("go")]))
    stored = await store.load("t", since=None)
    assert stored is not None
    dead = {**stored.head.open_turn, "claimed_by": "run-on-a-dead-replica", "claimed_at": clock.now.isoformat()}
    await store.save("t", ThreadChange(open_turn=dead, claim=True), expected_version=stored.head.version)
    entry = resolved("up-1", {"approved": True})

    clock.advance(LEASE)
    refused = await run(adapter, run_input("t", [], resume=[entry]))
    reopened = await store.load("t", since=None)
    applied = await run(adapter, run_input("t", [], resume=[entry]))

    assert (refused[-1]["type"], refused[-1]["code"]) == ("RUN_ERROR", "UPSTREAM_ERROR")
    assert reopened is not None
    assert reopened.head.open_turn is not None
    turn = reopened.head.open_turn
    assert [call["interrupt_id"] for call in turn["pending"]] == ["up-1"]
    assert (turn["claimed_by"], turn["claimed_at"]) == (None, None)
    assert applied[-1]["outcome"] == {"type": "success"}
