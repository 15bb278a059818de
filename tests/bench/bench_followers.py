"""Followers of a run on another replica, on PostgreSQL: their lag and the store reads they cost, for N followers.

    python tests/bench/bench_followers.py [--followers 0,1,10,100,500] [--deltas 200] [--every 0.02]
        [--mode notify,poll] [--freeze]

Replica A drives a run that streams `--deltas` text deltas, one every `--every` seconds, each carrying the time it
was made; N followers read it on replica B from the start (`Adapter.run_events`, as the events route does, without
the HTTP and SSE framing), B reading the journal from the store A writes. Both replicas are `PostgresStore`s on one
fresh schema in this process (one event loop: the followers' CPU is A's too). Per N and mode (`notify`: B's
store listens, as by default; `poll`: `PostgresStore(notify=False)`, the fallback), it prints (N = 0: no follower,
the run and its writer alone):

- lag p50 / p99 from a delta's making to a follower receiving it (A's batching included: `GATHER`, or up to
  `FLUSH_INTERVAL` while deltas come faster), and from the end of the store call that stored it (an append, or the
  run's last save, which carries the last batch) to a follower receiving it;
- B's store calls per second while the run streams (journal reads that ask for events, and thread loads, the
  dead-run check's), and A's appends per second beside them;
- the process's CPU per second meanwhile (both replicas, their followers and the run: this process's side of the
  load, PostgreSQL's own aside);
- the garbage collector's full collections meanwhile, and the longest: each stops the one event loop, and at N = 500
  one that lands in a fan-out is the lag's p99. The followers note what they receive in arrays, so the bench's own
  records add no object for a collection to walk. `--freeze` first warms up (a short run, every module loaded),
  then freezes what is there out of the collector's walks, as `examples/serving.py` does before it serves.

Needs AGUI_TEST_POSTGRES_DSN. Figures in docs/replicas.md.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import sys
import time
import uuid
from array import array
from collections.abc import AsyncIterator, Sequence
from typing import Any
from urllib.parse import quote

import psycopg
from ag_ui.core import RunAgentInput

from adapter import Adapter
from adapter._sessions._journal import journal_name  # private on purpose: the feed is keyed by the journal's name
from adapter.backends import BackendItem, ModelRequest, TextDelta
from adapter.stores import JournalAppend, JournalEvent, PostgresStore, RunJournal, StoredThread, TurnStore


class Paced:
    """A backend that yields one delta, waits for `go`, then `deltas` more, one every `every` s, each its time."""

    def __init__(self, deltas: int, every: float) -> None:
        self.deltas, self.every = deltas, every
        self.go = asyncio.Event()

    async def stream(self, request: ModelRequest) -> AsyncIterator[BackendItem]:
        yield TextDelta("start ")
        await self.go.wait()
        for _ in range(self.deltas):
            await asyncio.sleep(self.every)
            yield TextDelta(f"{time.monotonic():.6f} ")


class Counted:
    """The store, counting B's reads (journal reads that ask for events, and loads) or A's appends, when each ended."""

    def __init__(self, store: TurnStore) -> None:
        self.store = store
        self.reads = self.loads = self.appends = 0
        self.stored_at: dict[int, float] = {}
        self.ended = asyncio.Event()

    async def read_events(self, thread_id: str, run_id: str, *, after: int = 0, limit: int = 1000) -> RunJournal | None:
        self.reads += limit > 0
        return await self.store.read_events(thread_id, run_id, after=after, limit=limit)

    async def load(self, thread_id: str, **options: Any) -> StoredThread | None:
        self.loads += 1
        return await self.store.load(thread_id, **options)

    async def append_events(
        self, thread_id: str, run_id: str, events: Sequence[JournalEvent], *, ended: bool = False
    ) -> bool:
        stop = await self.store.append_events(thread_id, run_id, events, ended=ended)
        self.appends += 1
        self.note(events)
        if ended:
            self.ended.set()
        return stop

    def note(self, events: Sequence[JournalEvent]) -> None:
        now = time.monotonic()
        for event in events:
            self.stored_at[event.seq] = now

    async def save_and_append(self, thread_id: str, change: Any, journal: JournalAppend, **options: Any) -> Any:
        saved = await self.store.save_and_append(thread_id, change, journal, **options)  # type: ignore[attr-defined]
        self.note(journal.events)
        if journal.ended:
            self.ended.set()
        return saved

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


def fresh_dsn(dsn: str) -> str:
    schema = f"agui_bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute(f"CREATE SCHEMA {schema}")
    return f"{dsn}{'&' if '?' in dsn else '?'}options={quote(f'-csearch_path={schema}')}"


class Received:
    """What one follower received: each event's seq and when, in arrays (no object per event for the GC to walk)."""

    def __init__(self) -> None:
        self.seqs = array("q")
        self.times = array("d")


async def follow(b: Adapter, thread_id: str, run_id: str, texts: dict[int, str]) -> Received:
    """Read the run as a follower on B, noting when each event came; `texts` gets each event's JSON once."""
    events = await b.run_events(thread_id, run_id)
    assert events is not None
    received = Received()
    async for event in events:
        received.seqs.append(event.seq)
        received.times.append(time.monotonic())
        if event.seq not in texts:
            texts[event.seq] = event.json
    return received


class Collections:
    """The garbage collector's full collections (generation 2) while it is on, and how long each took."""

    def __init__(self) -> None:
        self.pauses: list[float] = []
        self._started = 0.0

    def __enter__(self) -> Collections:
        gc.callbacks.append(self._note)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._note)

    def _note(self, phase: str, info: dict[str, int]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.pauses.append(time.perf_counter() - self._started)


def percentile(values: list[float], share: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


async def measure(dsn: str, followers: int, mode: str, deltas: int, every: float) -> dict[str, float]:
    shared = fresh_dsn(dsn)
    backend = Paced(deltas, every)
    writes = Counted(PostgresStore(shared))
    reads = Counted(PostgresStore(shared, notify=mode == "notify", max_size=4))
    a, b = Adapter(backend, store=writes), Adapter(backend, store=reads)
    thread_id, run_id = f"thread-{uuid.uuid4().hex}", f"run-{uuid.uuid4().hex}"
    body = {
        "threadId": thread_id,
        "runId": run_id,
        "messages": [{"id": "user-1", "role": "user", "content": "go"}],
        "tools": [],
        "context": [],
        "state": None,
        "forwardedProps": None,
    }
    try:
        await a.start(RunAgentInput.model_validate(body))
        thread = await writes.store.load(thread_id, since=None)
        journal = journal_name(run_id, thread.head.incarnation if thread is not None else None)
        texts: dict[int, str] = {}
        reading = [asyncio.ensure_future(follow(b, thread_id, run_id, texts)) for _ in range(followers)]
        while followers and ((feed := b.feeds.feed(thread_id, journal)) is None or feed.followers < followers):
            await asyncio.sleep(0.01)
        await asyncio.sleep(1.0)  # the LISTEN in effect, the feed settled: the window starts quiet
        started, before = time.monotonic(), (reads.reads, reads.loads, writes.appends)
        cpu = time.process_time()
        with Collections() as collections:
            backend.go.set()
            got = await asyncio.gather(*reading)
            await writes.ended.wait()  # with no follower: the run's own cost, its writer's appends
        elapsed = time.monotonic() - started
        cpu = time.process_time() - cpu
    finally:
        await a.aclose()
        await b.aclose()
    made_at = {}
    for seq, text in texts.items():
        decoded = json.loads(text)
        if decoded["type"] == "TEXT_MESSAGE_CONTENT" and decoded["delta"] != "start ":
            made_at[seq] = float(decoded["delta"])
    made, stored = [], []
    for received in got:
        for seq, at in zip(received.seqs, received.times, strict=True):
            if seq in made_at:
                made.append(at - made_at[seq])
                stored.append(at - writes.stored_at[seq])
    return {
        "made_p50": percentile(made, 0.5) * 1000,
        "made_p99": percentile(made, 0.99) * 1000,
        "stored_p50": percentile(stored, 0.5) * 1000,
        "stored_p99": percentile(stored, 0.99) * 1000,
        "reads": (reads.reads - before[0]) / elapsed,
        "loads": (reads.loads - before[1]) / elapsed,
        "appends": (writes.appends - before[2]) / elapsed,
        "cpu": cpu / elapsed * 1000,
        "seconds": elapsed,
        "full_gcs": len(collections.pauses),
        "longest_gc": max(collections.pauses, default=0.0) * 1000,
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--followers", default="0,1,10,100,500")
    parser.add_argument("--deltas", type=int, default=200)
    parser.add_argument("--every", type=float, default=0.02)
    parser.add_argument("--mode", default="notify,poll")
    parser.add_argument("--freeze", action="store_true", help="after a warm-up run, gc.freeze() as serving does")
    options = parser.parse_args()
    dsn = os.environ.get("AGUI_TEST_POSTGRES_DSN")
    if not dsn:
        sys.exit("bench_followers.py needs AGUI_TEST_POSTGRES_DSN")
    if options.freeze:  # every module loaded, then out of the collector's walks (examples/serving.py)
        await measure(dsn, 2, "notify", 5, options.every)
        gc.collect()
        gc.freeze()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {os.cpu_count()} CPUs")
    print(
        "| mode | N | lag from made p50 / p99 ms | lag from append p50 / p99 ms | B reads/s | B loads/s | A appends/s"
        " | CPU ms/s | full GCs (longest ms) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for mode in options.mode.split(","):
        for followers in (int(n) for n in options.followers.split(",")):
            row = await measure(dsn, followers, mode, options.deltas, options.every)
            print(
                f"| {mode} | {followers} | {row['made_p50']:.0f} / {row['made_p99']:.0f} |"
                f" {row['stored_p50']:.0f} / {row['stored_p99']:.0f} | {row['reads']:.1f} | {row['loads']:.1f} |"
                f" {row['appends']:.1f} | {row['cpu']:.0f} | {row['full_gcs']:.0f} ({row['longest_gc']:.0f}) |",
                flush=True,
            )
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    asyncio.run(main())
