"""Soak: mixed traffic against one uvicorn server on SQLite; the server's RSS must not grow after warm-up.

    python tests/bench/soak.py [--minutes 30] [--warmup 10] [--workers 4] [--limit 1.10]

The server runs in a process of its own (`soak.py serve DB`): an `Adapter` on a `ScriptedBackend` and a
`SQLiteStore` in a temp dir, with an approval-gated tool, principals named by an `x-user` header, and the
default policy (a thread is its creator's). Each worker is one principal looping over a round of:

- a plain run on a new thread, and a second turn on it;
- a frontend-tool call (interrupt) answered by a resume;
- an approval-gated tool approved or denied (alternating), then the same resume replayed;
- refused inputs: a stranger's POST (403), a made-up resume (RUN_ERROR RESUME_*), a body that is not JSON
  (4xx), a wrong content type (415);
- GETs: the owner's read (200) and a stranger's (404).

Every answer is checked (status, and for a stream one terminal event last); a wrong one counts as a failure.
RSS (VmRSS of /proc/<pid>/status) is read after `--warmup` minutes and at the end. The warm-up must be
long enough for the adapter's bounded caches to fill: the parsed threads (`adapter._thread._cache`, 16M characters
of stored text by default) take about 185 MiB and, at ~70,000 requests a minute, 7 minutes to fill.
Exit 1 when the end RSS is more than `--limit` times the warm-up RSS, or any answer was wrong.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import datetime
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

KEEP_ALIVE_SECONDS = 75  # as examples/serving.py: longer than any client pool keeps an idle connection

HEADERS = {"content-type": "application/json", "accept": "text/event-stream"}
NAVIGATE = {
    "name": "navigate",
    "description": "The client's page navigation.",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
}
TERMINAL = ("RUN_FINISHED", "RUN_ERROR")


def serve(db: str) -> None:
    """The server side: bind port 0, print `PORT n`, serve until killed."""
    import uvicorn
    from starlette.requests import Request

    from adapter import Adapter, ScriptedBackend, SQLiteStore, create_app, tool
    from adapter.backends import Call, Rule

    @tool(requires_approval=True)
    async def pay(amount: str) -> str:
        """Pay an amount."""
        return f"paid {amount}"

    rules = [
        Rule(r"pay (?P<amount>\d+)", steps=[[Call("pay", {"amount": "{amount}"})]], reply="Done."),
        Rule(r"go to (?P<page>\w+)", steps=[[Call("navigate", {"path": "/{page}"})]], reply="Opened it."),
    ]
    backend = ScriptedBackend(rules, keep_requests=1)  # it keeps requests for tests; a model keeps none
    adapter = Adapter(backend, tools=[pay], store=SQLiteStore(db), frontend_outcome="interrupt")  # resumed

    def principal(request: Request) -> str | None:
        return request.headers.get("x-user")

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    app = create_app(adapter, principal=principal)
    server = uvicorn.Server(
        uvicorn.Config(
            app, log_level="warning", access_log=False, lifespan="off", timeout_keep_alive=KEEP_ALIVE_SECONDS
        )
    )
    asyncio.run(server.serve(sockets=[sock]))


def rss_bytes(pid: int) -> int:
    """The process's resident set size (VmRSS; psutil is not in the dev extra)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


@dataclass
class Tally:
    """What the workers did."""

    requests: int = 0
    failures: collections.Counter[str] = field(default_factory=collections.Counter)

    def fail(self, what: str) -> None:
        self.failures[what] += 1


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def body(thread_id: str, messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "threadId": thread_id,
        "runId": new_id("run"),
        "messages": messages,
        "tools": [NAVIGATE],
        "context": [],
        "protocolVersion": "1.0",
        **extra,
    }


def events_of(raw: bytes) -> list[dict[str, Any]]:
    return [json.loads(line[5:]) for line in raw.decode().split("\n") if line.startswith("data:")]


class Worker:
    """One principal sending rounds of mixed traffic."""

    def __init__(self, http: httpx.AsyncClient, url: str, name: str, tally: Tally) -> None:
        self.http, self.url, self.name, self.tally = http, url, name, tally
        self.rounds = 0

    async def post(self, payload: Any, *, user: str | None = None, content_type: str = "") -> httpx.Response:
        content = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        headers = {**HEADERS, "x-user": user or self.name}
        if content_type:
            headers["content-type"] = content_type
        response = await self.http.post(self.url + "/", content=content, headers=headers)
        self.tally.requests += 1
        return response

    async def run(self, payload: dict[str, Any], expect: str, what: str) -> list[dict[str, Any]]:
        """POST a run; its stream must end in one terminal event of type `expect` (with an outcome type after ':')."""
        response = await self.post(payload)
        events = events_of(response.content) if response.status_code == 200 else []
        terminals = [e for e in events if e["type"] in TERMINAL]
        last = events[-1] if events else {}
        kind, _, outcome = expect.partition(":")
        got = f"{last.get('type')}:{(last.get('outcome') or {}).get('type', 'success')}"
        if len(terminals) != 1 or last.get("type") != kind or (outcome and not got.endswith(outcome)):
            self.tally.fail(f"{what}: {response.status_code} {got} {last.get('code', '')}")
        return events

    async def round(self) -> None:
        self.rounds += 1
        thread = new_id("thread")
        hello = [{"id": new_id("u"), "role": "user", "content": "hello"}]
        await self.run(body(thread, hello), "RUN_FINISHED:success", "plain run")
        again = [*hello, {"id": new_id("u"), "role": "user", "content": "and again"}]
        await self.run(body(thread, again), "RUN_FINISHED:success", "second turn")
        await self.interrupt_and_resume("go to orders", {"navigated": True}, replay=False)
        await self.interrupt_and_resume("pay 5", {"approved": self.rounds % 2 == 0}, replay=True)
        await self.refusals(thread)
        await self.reads(thread)

    async def interrupt_and_resume(self, text: str, payload: dict[str, Any], *, replay: bool) -> None:
        thread = new_id("thread")
        first = await self.run(
            body(thread, [{"id": new_id("u"), "role": "user", "content": text}]), "RUN_FINISHED:interrupt", text
        )
        interrupts = (first[-1].get("outcome") or {}).get("interrupts", []) if first else []
        if len(interrupts) != 1:
            return
        entry = [{"interruptId": interrupts[0]["id"], "status": "resolved", "payload": payload}]
        resume = body(thread, [], resume=entry)
        await self.run(resume, "RUN_FINISHED:success", f"{text} resume")
        if replay:
            await self.run({**resume, "runId": new_id("run")}, "RUN_FINISHED:success", f"{text} replay")

    async def refusals(self, thread: str) -> None:
        stranger = await self.post(body(thread, [{"id": new_id("u"), "role": "user", "content": "hi"}]), user="eve")
        if stranger.status_code != 403:
            self.tally.fail(f"stranger POST: {stranger.status_code}")
        made_up = [{"interruptId": new_id("int"), "status": "resolved", "payload": {"approved": True}}]
        events = await self.run(body(thread, [], resume=made_up), "RUN_ERROR", "made-up resume")
        if events and not str(events[-1].get("code", "")).startswith("RESUME_"):
            self.tally.fail(f"made-up resume: {events[-1].get('code')}")
        if (await self.post(b"{not json")).status_code // 100 != 4:
            self.tally.fail("bad JSON")
        if (await self.post(body(thread, []), content_type="text/plain")).status_code != 415:
            self.tally.fail("content type")

    async def reads(self, thread: str) -> None:
        for user, status in ((self.name, 200), ("eve", 404)):
            response = await self.http.get(f"{self.url}/threads/{thread}", headers={"x-user": user})
            self.tally.requests += 1
            if response.status_code != status:
                self.tally.fail(f"GET as {user}: {response.status_code}")


async def traffic(url: str, workers: int, until: float, tally: Tally) -> None:
    async with httpx.AsyncClient(timeout=120) as http:

        async def loop(index: int) -> None:
            worker = Worker(http, url, f"user-{index}", tally)
            while time.monotonic() < until:
                await worker.round()

        await asyncio.gather(*(loop(i) for i in range(workers)))


def start_server(db: Path) -> tuple[subprocess.Popen[str], str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[2]), *sys.path])}
    process = subprocess.Popen([sys.executable, __file__, "serve", str(db)], stdout=subprocess.PIPE, text=True, env=env)
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.startswith("PORT "):
        process.kill()
        raise RuntimeError(f"the server did not start: {line!r}")
    return process, f"http://127.0.0.1:{int(line.split()[1])}"


def mib(value: int) -> str:
    return f"{value / 2**20:.1f} MiB"


async def soak(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        process, url = start_server(Path(tmp) / "turns.db")
        tally = Tally()
        began = time.monotonic()
        try:
            warm_end = began + args.warmup * 60
            await traffic(url, args.workers, warm_end, tally)
            warm_rss, warm_requests = rss_bytes(process.pid), tally.requests
            print(f"warm-up done: {mib(warm_rss)} after {warm_requests} requests", flush=True)
            samples = [warm_rss]
            end = began + args.minutes * 60
            while time.monotonic() < end:
                await traffic(url, args.workers, min(end, time.monotonic() + 60), tally)
                samples.append(rss_bytes(process.pid))
                print(f"  {(time.monotonic() - began) / 60:5.1f} min  {mib(samples[-1])}  {tally.requests}", flush=True)
            end_rss = rss_bytes(process.pid)
            db_size = (Path(tmp) / "turns.db").stat().st_size
        finally:
            process.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(10)
            process.kill()
    ratio = end_rss / warm_rss
    elapsed = (time.monotonic() - began) / 60
    print(f"date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC; load average {os.getloadavg()}")
    print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}")
    print(f"duration {elapsed:.1f} min, {args.workers} workers, requests served {tally.requests}")
    print(f"warm-up RSS {mib(warm_rss)}, end RSS {mib(end_rss)}, ratio {ratio:.3f} (limit {args.limit})")
    print(f"RSS per minute: {', '.join(f'{s / 2**20:.0f}' for s in samples)} MiB; SQLite file {mib(db_size)}")
    print(f"wrong answers: {sum(tally.failures.values())} {dict(tally.failures.most_common(10))}")
    return 0 if ratio <= args.limit and not tally.failures else 1


def main() -> int:
    if sys.argv[1:2] == ["serve"]:
        serve(sys.argv[2])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--minutes", type=float, default=30.0, help="whole run, warm-up included")
    parser.add_argument("--warmup", type=float, default=10.0, help="minutes before the first RSS sample")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--limit", type=float, default=1.10, help="largest end/warm-up RSS ratio that passes")
    args = parser.parse_args()
    args.warmup = min(args.warmup, args.minutes / 3)
    return asyncio.run(soak(args))


if __name__ == "__main__":
    sys.exit(main())
