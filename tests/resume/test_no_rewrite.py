"""No conflict rewrites history a run did not read: the rule as a property over two racing runs on one thread."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from ag_ui.core import AssistantMessage, Message, UserMessage
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from adapter import AdapterError

# Private on purpose: two racing runs' saves, driven at the record handle where the rule lives.
from adapter._run._access import Access
from adapter._thread._cache import ParsedStore
from adapter._thread._handle import RecordHandle
from adapter._thread._record import stored_message
from adapter.stores import MemoryStore, ThreadChange

PEOPLE = st.sampled_from(["alice", "bob"])


def joins(principal: str) -> Callable[[str | None], Awaitable[bool]]:
    """What a run asks before it stores into a thread another request created: the default policy's "run"."""

    async def may_join(owner: str | None) -> bool:
        return await Access().allows(principal, owner, "run")

    return may_join


def said(who: str, count: int) -> list[Message]:
    return [
        UserMessage(id=f"{who}-u{i}", content="hi") if i % 2 == 0 else AssistantMessage(id=f"{who}-a{i}", content="ok")
        for i in range(count)
    ]


async def race(existing: int, first: str, second: str, kept: int, new: int) -> tuple[list[str], list[str], bool]:
    """`first` and `second` both read the thread; `second` stores first; then `first` stores its history.

    Returns what was stored after `second`, after `first`, and whether `first` was refused.
    """
    store = MemoryStore()
    if existing:
        seed = ThreadChange(append=[stored_message(m) for m in said("old", existing)], owner="alice")
        await store.save("t1", seed, expected_version=0)
    runs = [RecordHandle(ParsedStore(store), "t1", principal=who, may_join=joins(who)) for who in (first, second)]
    for run in runs:
        await run.load()
    slow, fast = runs
    await fast.finish(said("fast", 2), "r2", None)
    between = await store.load("t1")
    assert between is not None
    history, stored = await slow.history(slow.conversation()[:kept], server_kept=False)
    try:
        await slow.finish([*history[stored:], *said("slow", new)], "r1", None)
        refused = False
    except AdapterError as error:
        assert error.code == "THREAD_CONFLICT"
        refused = True
    after = await store.load("t1")
    assert after is not None
    return [m.id for m in between.messages], [m.id for m in after.messages], refused


@settings(max_examples=150)
@given(st.integers(0, 4), PEOPLE, PEOPLE, st.integers(0, 4), st.integers(1, 3))
def test_a_run_only_ever_adds_its_own_messages_after_what_it_did_not_read(
    existing: int, first: str, second: str, kept: int, new: int
) -> None:
    assume(existing == 0 or first == second == "alice")  # on alice's thread the run's start lets only her in
    kept = min(kept, existing)
    between, after, refused = asyncio.run(race(existing, first, second, kept, new))

    if refused:
        assert after == between
        return
    assert after[: len(between)] == between  # nothing another run stored is replaced or dropped
    assert after[len(between) :] == [m.id for m in said("slow", new)]
    assert first == ("alice" if existing else second)  # the default policy let it into the thread it found
