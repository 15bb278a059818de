"""A replica killed mid-tool, then a reattach on another: the crash-takeover rules decide, and no event is twice.

The replicas are tests/crash_server.py in processes of their own on one SQLite file (lease 0.5 s); the first
is killed with SIGKILL while its approved tool runs. The reader that reattaches on the second gets what the
journal holds after the last event it saw, then, once the claim's lease lapsed, one `RUN_INTERRUPTED` sent
without an id; the same answer sent again then finishes the turn there, as it does without a reattach.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest
from agui import Client, Reply, new_id, resolved, run_input
from replica_process import BOUND, Replica, journaled, until
from sessions_kit import Sent, read_until_cut, reattach


def crash_replica(db: Path, journal: Path) -> Replica:
    """tests/crash_server.py: the approved `pay` tool journals, then waits while JOURNAL.hold exists; lease 0.5 s."""
    return Replica("tests/crash_server.py", db, journal, 0.5)


@pytest.mark.slow
async def test_a_reattach_after_the_replica_died_mid_tool_ends_as_the_takeover_rules_say(tmp_path: Path) -> None:
    db, journal, hold = tmp_path / "turns.db", tmp_path / "journal", tmp_path / "journal.hold"
    first = crash_replica(db, journal)
    replicas = [first]
    try:
        async with httpx.AsyncClient(timeout=BOUND) as http:
            await first.ready(http)
            thread = Client(http, first.url).thread()
            (interrupt,) = (await thread.say("pay 10")).interrupts
            answer = resolved(interrupt["id"], {"approved": True})
            body = run_input(thread.id, thread.messages, resume=[answer], runId=new_id("run"))
            hold.touch()
            seen: list[Sent] = []
            resuming = asyncio.ensure_future(read_until_cut(http, first.url + "/", body, seen))

            async def tool_started() -> bool | None:
                return len(journaled(journal)) == 1 or None

            await until(tool_started, "the tool to start")
            first.kill()
            await resuming
            hold.unlink()
            second = crash_replica(db, journal)
            replicas.append(second)
            await second.ready(http)

            last = seen[-1].id if seen else None
            status, rest = await reattach(http, second.url, thread.id, body["runId"], last_event_id=last)
            again = Client(http, second.url).thread(thread_id=thread.id)

            async def finished() -> Reply | None:
                reply = await again.resume(answer, clean=False)
                return None if reply.of("RUN_ERROR") and reply.error["code"] == "RESUME_CONFLICT" else reply

            takeover = await until(finished, "the lease to lapse")
            _, whole = await reattach(http, second.url, thread.id, body["runId"])
            _, taken_over = await reattach(http, second.url, thread.id, takeover.started["runId"])
    finally:
        for replica in replicas:
            if replica.process.poll() is None:
                replica.kill()

    assert status == 200
    # What the journal held after the last event seen, then the one RUN_INTERRUPTED the journal does not hold.
    assert (rest[-1].id, rest[-1].event["type"], rest[-1].event["code"]) == (None, "RUN_ERROR", "RUN_INTERRUPTED")
    assert [s.id for s in seen + rest[:-1]] == list(range(1, len(seen) + len(rest)))
    # the journal, then the same ending
    assert whole[-1] == rest[-1]
    assert whole[:-1] == seen + rest[:-1]
    assert len({json.dumps(s.event, sort_keys=True) for s in whole}) == len(whole)  # no event twice
    # The takeover rules, as without a reattach: the same answer finishes the turn, the tool ran at least once
    # with one idempotency key, and the new run's journal replays whole.
    assert takeover.outcome == {"type": "success"}
    runs = journaled(journal)
    assert len(runs) == 2
    assert runs[0]["key"] == runs[1]["key"]
    assert [s.event for s in taken_over] == takeover.events
    assert [s.id for s in taken_over] == list(range(1, len(taken_over) + 1))
