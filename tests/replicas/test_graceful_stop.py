"""A graceful stop: on SIGTERM a replica drains, lets its runs end within the grace, then lapses the claims it holds.

The replicas are tests/crash_server.py served as the demo is (examples/serving.py, `drain=adapter.drain`), in
processes of their own on one SQLite file, with a claim lease of five minutes: a turn that waited for the lease
would outlast every bound of the test, so a takeover that succeeds proves that nothing waited for it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest
from agui import Client, new_id, resolved, run_input
from replica_process import BOUND, Replica, journaled, until
from sessions_kit import Sent, read_until_cut

LEASE = 300.0  # seconds: longer than any test may wait


def replica(db: Path, journal: Path, grace: float) -> Replica:
    return Replica("tests/crash_server.py", db, journal, LEASE, grace, log=journal.with_name("replica.log"))


async def draining(http: httpx.AsyncClient, server: Replica) -> None:
    """While it drains, the replica says so and starts no run: 503s a balancer and a client understand."""
    health = await http.get(server.url + "/health")
    assert (health.status_code, health.json()) == (503, {"status": "draining"})
    refused = await http.post(server.url + "/", json=run_input(new_id("thread"), [], runId=new_id("run")))
    assert refused.status_code == 503
    assert refused.headers["retry-after"] == "1"
    assert refused.json()["error"]["code"] == "DRAINING"


async def approved_and_started(
    http: httpx.AsyncClient, server: Replica, journal: Path
) -> tuple[Any, dict[str, Any], dict[str, Any], asyncio.Future[None], list[Sent]]:
    """A thread on `server` whose approved `pay` runs now (held by JOURNAL.hold), and the resume's stream."""
    thread = Client(http, server.url).thread()
    (interrupt,) = (await thread.say("pay 10")).interrupts
    answer = resolved(interrupt["id"], {"approved": True})
    body = run_input(thread.id, thread.messages, resume=[answer], runId=new_id("run"))
    journal.with_name(journal.name + ".hold").touch()
    sent: list[Sent] = []
    resuming = asyncio.ensure_future(read_until_cut(http, server.url + "/", body, sent))

    async def tool_started() -> bool | None:
        return len(journaled(journal)) == 1 or None

    await until(tool_started, "the approved tool to start")
    return thread, answer, body, resuming, sent


@pytest.mark.slow
async def test_a_run_that_ends_within_the_grace_finishes_and_the_replica_then_exits(tmp_path: Path) -> None:
    db, journal = tmp_path / "turns.db", tmp_path / "journal"
    server = replica(db, journal, BOUND)
    try:
        async with httpx.AsyncClient(timeout=BOUND) as http:
            await server.ready(http)
            _, _, _, resuming, sent = await approved_and_started(http, server, journal)
            server.terminate()

            async def says_draining() -> bool | None:
                return (await http.get(server.url + "/health")).status_code == 503 or None

            await until(says_draining, "the replica to say it drains")
            await draining(http, server)

            async def logged_draining() -> str | None:
                log = journal.with_name("replica.log").read_text(encoding="utf-8")
                return next((line for line in log.splitlines() if "draining" in line), None)

            logged = await until(logged_draining, "the replica to log that it drains")
            journal.with_name(journal.name + ".hold").unlink()  # the tool ends within the grace
            await resuming
            await server.exited()
    finally:
        if server.process.poll() is None:
            server.kill()

    assert sent[-1].event["type"] == "RUN_FINISHED"
    assert sent[-1].event.get("outcome", {"type": "success"}) == {"type": "success"}
    assert len(journaled(journal)) == 1  # the tool ran once, and finished there
    assert f"waiting up to {BOUND:g} s for 1 run in progress" in logged, logged  # said while it waited, not after


@pytest.mark.slow
async def test_past_the_grace_the_claim_lapses_at_once_and_the_same_answer_finishes_on_another_replica(
    tmp_path: Path,
) -> None:
    db, journal = tmp_path / "turns.db", tmp_path / "journal"
    first, second = replica(db, journal, 0.2), replica(db, journal, BOUND)
    try:
        async with httpx.AsyncClient(timeout=BOUND) as http:
            await first.ready(http)
            await second.ready(http)
            thread, answer, body, resuming, sent = await approved_and_started(http, first, journal)
            first.terminate()
            await resuming  # cut past the grace: the tool never ends on its own here
            await first.exited()
            journal.with_name(journal.name + ".hold").unlink()
            again = Client(http, second.url).thread(thread_id=thread.id)
            denied = await again.resume(resolved(answer["interruptId"], {"approved": False}), clean=False)
            takeover = await again.resume(answer, clean=False)
            events = (await http.get(f"{second.url}/threads/{thread.id}/runs/{body['runId']}/events")).text
    finally:
        for server in (first, second):
            if server.process.poll() is None:
                server.kill()

    # The cut run told its client, and its journal (read on the other replica) ends the same way.
    assert (sent[-1].event["type"], sent[-1].event["code"]) == ("RUN_ERROR", "RUN_INTERRUPTED")
    assert '"code":"RUN_INTERRUPTED"' in events.strip().splitlines()[-1]
    # Only the same answer takes a claim over whose tool may have started, and it takes it over now, not after
    # the five-minute lease; the tool runs again with the same idempotency key (at least once).
    assert denied.error["code"] == "RESUME_CONFLICT"
    assert takeover.outcome == {"type": "success"}
    runs = journaled(journal)
    assert len(runs) == 2
    assert runs[0]["key"] == runs[1]["key"]
    assert runs[0]["pid"] != runs[1]["pid"]
