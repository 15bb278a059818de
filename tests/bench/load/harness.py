"""The load harness: HAProxy in front of N uvicorn replicas on one PostgreSQL, loaded by Locust, all on 127.0.0.1.

    python tests/bench/load/harness.py [--replicas 1,2,4] [--duration 60] [--users 24] [--rolling-restart]
                                       [--tool-seconds 0.2] [--lease SECONDS] [--lease-wait 30]
                                       [--dsn URL] [--json PATH] [--keep DIR] [--check]

It starts and stops everything itself, and each phase is bounded by `--duration` (plus Locust's stop timeout):

1. PostgreSQL: `postgres_start` of .ci/postgres.sh (one on 127.0.0.1:5432, or a throwaway one it stops), unless
   `--dsn` names one. Each phase gets a fresh schema, and its replicas connect as `application_name=agui-load`.
2. For each replica count N: N replicas (replica.py: the adapter on a PostgresStore, uvicorn), HAProxy from
   Debian's package in front (round robin, health checks on `GET /health`, a refused connection or a 503 sent to
   another server), and Locust (locustfile.py, in .venv-load, created from requirements.txt when missing) for
   `--duration` seconds. With `--rolling-restart` each replica in turn gets SIGTERM under load, is waited for,
   and is started again, and HAProxy sends it requests before the next one stops (N >= 2 only: one replica
   restarted is an outage, not a rolling deploy).
3. Then it reads what happened: every exchange Locust recorded, the tool's execution journal, the threads as the
   store keeps them, `pg_stat_activity` sampled every 0.5 s, and HAProxy's counters.

It prints a Markdown table (throughput, time to first event and to the terminal event, connections) and the
correctness counts, each of which must be 0 (docs/replicas.md, "Under load"); the exit status is 1 when one is
not (`--check`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import csv
import functools
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
LOAD_VENV = ROOT / ".venv-load"
REQUIREMENTS = HERE / "requirements.txt"
APPLICATION = "agui-load"
"""The `application_name` the replicas connect with: what `pg_stat_activity` is filtered on."""
STOP_BOUND = 60.0
"""Seconds a replica may take to stop after SIGTERM (a drain's grace, 30 s by default, and its 5 s cut) before the
harness kills it, and counts it."""
START_BOUND = 60.0
"""Seconds a replica, HAProxy or PostgreSQL may take to answer on a loaded machine."""
OK = ("ok", "coded")
"""Verdicts that are no fault: a stream with one terminal event, last; or a 4xx (or 503) with a JSON `code`."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_for(condition: Any, what: str, bound: float = START_BOUND) -> None:
    deadline = time.monotonic() + bound
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.1)


@contextlib.contextmanager
def postgres(dsn: str | None) -> Iterator[str]:
    """A PostgreSQL server's DSN: `dsn`, or .ci/postgres.sh's `postgres_start` (stopped when the block ends)."""
    if dsn:
        yield dsn
        return
    script = '. .ci/postgres.sh && postgres_start && echo "DSN $AGUI_TEST_POSTGRES_DSN" && read -r _'
    # bash stays up reading its stdin; closing it ends bash, whose EXIT trap (postgres_stop) stops the server.
    shell = subprocess.Popen(["bash", "-c", script], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert shell.stdout is not None
    assert shell.stdin is not None
    line = shell.stdout.readline()
    if not line.startswith("DSN "):
        shell.kill()
        raise RuntimeError(f"postgres_start failed: {line!r}")
    try:
        yield line.split()[1]
    finally:
        shell.stdin.close()
        shell.wait(START_BOUND)


def fresh_schema(dsn: str, name: str) -> str:
    """A DSN on a new schema `name`, connecting as APPLICATION."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute(f"CREATE SCHEMA {name}")
    separator = "&" if "?" in dsn else "?"
    return f"{dsn}{separator}options={quote(f'-csearch_path={name}')}&application_name={APPLICATION}"


class Replica:
    """replica.py in a process of its own, on a fixed port (kept across restarts, as HAProxy knows it)."""

    def __init__(self, dsn: str, journal: Path, options: Sequence[str]) -> None:
        self.port = free_port()
        self.command = [sys.executable, str(HERE / "replica.py"), str(self.port), dsn, str(journal), *options]
        self.process: subprocess.Popen[bytes] | None = None
        self.url = f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        self.process = subprocess.Popen(self.command, env=env)

    def healthy(self) -> bool:
        assert self.process is not None, f"the replica on {self.port} exited"
        assert self.process.poll() is None, f"the replica on {self.port} exited"
        try:
            return httpx.get(self.url + "/health", timeout=5).status_code == 200
        except httpx.TransportError:
            return False

    def stop(self, bound: float = STOP_BOUND) -> dict[str, Any]:
        """SIGTERM, and wait for it to exit; after `bound` seconds, SIGKILL. What it took, and whether it was killed."""
        assert self.process is not None
        began = time.monotonic()
        self.process.send_signal(signal.SIGTERM)
        killed = False
        try:
            self.process.wait(bound)
        except subprocess.TimeoutExpired:
            killed = True
            self.process.kill()
            self.process.wait(bound)
        took = time.monotonic() - began
        return {"port": self.port, "stop_s": took, "killed": killed, "exit": self.process.returncode}

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(START_BOUND)


class Balancer:
    """HAProxy in front of the replicas: round robin, health checks, connection failures and 503s sent elsewhere."""

    def __init__(self, replicas: Sequence[Replica], folder: Path) -> None:
        self.port, self.stats_port = free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = folder / "haproxy.cfg"
        config.write_text(haproxy_config(self.port, self.stats_port, [r.port for r in replicas]))
        self.log = folder / "haproxy.log"
        with self.log.open("wb") as log:  # its warnings: servers going down and up
            self.process = subprocess.Popen([haproxy_binary(), "-f", str(config), "-db"], stdout=log, stderr=log)
        wait_for(self.answers, "HAProxy to answer")

    def answers(self) -> bool:
        try:
            return httpx.get(f"{self.url}/health", timeout=5).status_code == 200
        except httpx.TransportError:
            return False

    def counters(self) -> dict[str, int]:
        """The backend's counters (HAProxy's CSV stats): retries, redispatches, aborts, errors, 5xx."""
        text = httpx.get(f"http://127.0.0.1:{self.stats_port}/stats;csv", timeout=5).text.lstrip("# ")
        rows = list(csv.DictReader(io.StringIO(text)))
        backend = next(row for row in rows if row["pxname"] == "replicas" and row["svname"] == "BACKEND")
        keys = ("wretr", "wredis", "cli_abrt", "srv_abrt", "econ", "eresp", "hrsp_5xx")
        return {key: int(backend[key] or 0) for key in keys}

    def up(self, index: int) -> bool:
        """Whether HAProxy sends requests to server `r{index}` again (its checks passed `rise` times)."""
        text = httpx.get(f"http://127.0.0.1:{self.stats_port}/stats;csv", timeout=5).text.lstrip("# ")
        rows = csv.DictReader(io.StringIO(text))
        return any(row["svname"] == f"r{index}" and row["status"] == "UP" for row in rows)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(START_BOUND)

    def downs(self) -> int:
        """How many times HAProxy took a server out (its health check failed)."""
        return self.log.read_text(errors="replace").count(" is DOWN")


def haproxy_binary() -> str:
    """HAProxy's executable: on the PATH, or where Debian puts it (/usr/sbin, off a plain user's PATH)."""
    sbin = Path("/usr/sbin/haproxy")
    found = shutil.which("haproxy") or (str(sbin) if sbin.exists() else None)
    if found is None:
        raise SystemExit("HAProxy is missing: apt-get install -y haproxy")
    return found


def haproxy_config(port: int, stats_port: int, servers: Sequence[int]) -> str:
    """HAProxy's configuration: SSE passes unbuffered (HAProxy streams HTTP/1.1 chunks as they come)."""
    lines = "\n".join(f"    server r{i} 127.0.0.1:{server} check" for i, server in enumerate(servers))
    return f"""global
    maxconn 4096

defaults
    mode http
    timeout connect 5s
    # Longer than the adapter's keep-alive comments (15 s) so a quiet stream is never cut; the client side
    # closes idle connections before uvicorn's 75 s (examples/serving.py), so neither side reuses a closed one.
    timeout client 120s
    timeout server 120s
    timeout http-keep-alive 60s
    timeout queue 30s
    # A connection refused (a replica restarting) or a 503 (DRAINING: it started nothing) goes to another server.
    # L7 retries resend the request from HAProxy's buffer: it must hold the whole body before the first try.
    retries 3
    option redispatch 1
    retry-on conn-failure 503
    # Without it HAProxy sends the headers and each small chunk with MSG_MORE, waiting for a full packet: an SSE
    # event then waits up to 200 ms (measured: the first event 35 ms direct, 240 ms through HAProxy without it).
    option http-no-delay
    option http-buffer-request

frontend agui
    bind 127.0.0.1:{port}
    default_backend replicas

backend replicas
    balance roundrobin
    option httpchk GET /health
    http-check expect status 200
    # Every second; two failures in a row take a server out (a draining one answers 503 at once), two passes put
    # it back. A check may take 5 s: GET /health writes to the store, and on a loaded machine that is slow (with
    # HAProxy's default, the interval, a busy replica was taken out, and with one replica every request got 503).
    timeout check 5s
    default-server inter 1s fall 2 rise 2
{lines}

frontend stats
    bind 127.0.0.1:{stats_port}
    stats enable
    stats uri /stats
"""


class Connections:
    """`pg_stat_activity` sampled every 0.5 s in a thread: the replicas' connections, all and active, at most."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.most = self.most_active = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        import psycopg

        query = (
            "SELECT count(*), count(*) FILTER (WHERE state = 'active') FROM pg_stat_activity"
            " WHERE application_name = %s"
        )
        with psycopg.connect(self.dsn, autocommit=True) as connection:
            while not self._done.wait(0.5):
                row = connection.execute(query, (APPLICATION,)).fetchone()
                assert row is not None
                self.most, self.most_active = max(self.most, row[0]), max(self.most_active, row[1])

    def stop(self) -> None:
        self._done.set()
        self._thread.join()


def locust_command() -> Path:
    """Locust from .venv-load, made from requirements.txt the first time (Locust's gevent stays out of .venv)."""
    locust = LOAD_VENV / "bin" / "locust"
    if not locust.exists():
        subprocess.run([sys.executable, "-m", "venv", str(LOAD_VENV)], check=True)
        pip = [str(LOAD_VENV / "bin" / "python"), "-m", "pip", "install", "--quiet"]
        subprocess.run([*pip, "-r", str(REQUIREMENTS)], check=True)
    return locust


@dataclass
class Phase:
    """One replica count's run: its settings, and what it measured."""

    replicas: int
    users: int
    duration: float
    rolling: bool
    elapsed: float = 0.0
    exchanges: list[dict[str, Any]] = field(default_factory=list)
    turns: list[dict[str, Any]] = field(default_factory=list)
    executions: Counter[str] = field(default_factory=Counter)
    restarts: list[dict[str, Any]] = field(default_factory=list)
    connections: tuple[int, int] = (0, 0)
    balancer: dict[str, int] = field(default_factory=dict)
    lost: list[str] = field(default_factory=list)


def run_phase(base_dsn: str, count: int, args: argparse.Namespace, folder: Path) -> Phase:
    """Start `count` replicas and HAProxy, load them with Locust for the duration, then stop everything."""
    phase = Phase(count, args.users, args.duration, args.rolling_restart and count > 1)
    dsn = fresh_schema(base_dsn, f"agui_load_{uuid.uuid4().hex[:8]}")
    journal, records = folder / "executions.jsonl", folder / "records.jsonl"
    options = ["--tool-seconds", str(args.tool_seconds), *(["--lease", str(args.lease)] if args.lease else [])]
    replicas = [Replica(dsn, journal, options) for _ in range(count)]
    balancer: Balancer | None = None
    load: subprocess.Popen[bytes] | None = None
    sampler = Connections(base_dsn)
    try:
        for replica in replicas:
            replica.start()
        for replica in replicas:
            wait_for(replica.healthy, f"the replica on {replica.port} to be healthy")
        balancer = Balancer(replicas, folder)
        env = {**os.environ, "LOAD_RECORDS": str(records), "LOAD_LEASE_WAIT": str(args.lease_wait)}
        command = [
            str(locust_command()),
            *("-f", str(HERE / "locustfile.py"), "--headless", "--only-summary", "--loglevel", "WARNING"),
            *("-u", str(args.users), "-r", str(args.users), "-t", f"{int(args.duration)}s"),
            *("--stop-timeout", str(int(args.lease_wait + 30)), "--host", balancer.url, "--exit-code-on-error", "0"),
            *("--csv", str(folder / "locust")),
        ]
        began = time.monotonic()
        with (folder / "locust.log").open("wb") as log:  # Locust's own summary and its errors, read on failure
            load = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=folder)
        if phase.rolling:
            phase.restarts = rolling_restart(replicas, balancer, args.duration, began)
        if load.wait(args.duration + args.lease_wait + 120):
            print((folder / "locust.log").read_text()[-3000:], file=sys.stderr)
        phase.elapsed = time.monotonic() - began
        phase.balancer = {**balancer.counters(), "downs": balancer.downs()}
    finally:
        sampler.stop()
        if load is not None and load.poll() is None:
            load.kill()
        phase.connections = (sampler.most, sampler.most_active)
        lines = [json.loads(line) for line in records.read_text().splitlines()] if records.exists() else []
        phase.exchanges = [line for line in lines if line.get("type") != "turn"]
        phase.turns = [line for line in lines if line.get("type") == "turn"]
        phase.executions = Counter(json.loads(line)["thread"] for line in _lines(journal))
        if all(replica.process is not None and replica.process.poll() is None for replica in replicas):
            phase.lost = asyncio.run(lost_acknowledged(replicas[0].url, phase.exchanges))
        if balancer is not None:
            balancer.stop()
        for replica in replicas:
            replica.kill()
    return phase


def rolling_restart(
    replicas: Sequence[Replica], balancer: Balancer, duration: float, began: float
) -> list[dict[str, Any]]:
    """Restart each replica in turn, spread over the middle half of the run: SIGTERM, wait for it to exit, start
    it, and wait until HAProxy sends it requests again before the next (as a deploy waits for readiness)."""
    done = []
    for i, replica in enumerate(replicas):
        at = began + duration * (0.25 + 0.5 * i / len(replicas))
        time.sleep(max(0.0, at - time.monotonic()))
        stopped = replica.stop()
        replica.start()
        started = time.monotonic()
        wait_for(replica.healthy, f"the replica on {replica.port} to come back")
        wait_for(functools.partial(balancer.up, i), f"HAProxy to send requests to r{i} again")
        done.append({**stopped, "start_s": time.monotonic() - started, "at_s": at - began})
    return done


async def lost_acknowledged(url: str, exchanges: Sequence[dict[str, Any]]) -> list[str]:
    """What a run acknowledged (RUN_FINISHED) but the store does not hold: its messages and calls, per thread."""
    acked: dict[str, list[dict[str, Any]]] = {}
    for record in exchanges:
        if record.get("verdict") == "ok" and record.get("terminal") == "RUN_FINISHED":
            acked.setdefault(record["thread"], []).append(record)
    gate = asyncio.Semaphore(16)
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:

        async def check(thread: str, records: list[dict[str, Any]]) -> list[str]:
            async with gate:
                response = await http.get(f"/threads/{thread}")
            if response.status_code != 200:
                return [f"{thread}: GET {response.status_code}"]
            messages = response.json().get("messages", [])
            ids = {message["id"] for message in messages}
            calls = {call["id"] for message in messages for call in message.get("toolCalls") or []}
            told = {m for r in records for m in r.get("messages", [])}, {c for r in records for c in r.get("calls", [])}
            return [f"{thread}: {missing}" for missing in (told[0] - ids) | (told[1] - calls)]

        found = await asyncio.gather(*(check(thread, records) for thread, records in acked.items()))
    return [item for items in found for item in items]


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) in ms, nearest rank; NaN when there is no value."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return 1000 * ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))]


def faults(phase: Phase) -> dict[str, int]:
    """The correctness counts: each must be 0."""
    verdicts = Counter(record["verdict"] for record in phase.exchanges if record["step"] != "reattach")
    approved = {turn["thread"]: turn for turn in phase.turns if turn["kind"] == "approve"}
    denied = {turn["thread"] for turn in phase.turns if turn["kind"] == "deny"}
    return {
        "no terminal event (or more than one)": verdicts["no_terminal"] + verdicts["terminals"] + verdicts["cut"],
        "connection reset": verdicts["reset"],
        "other transport or status": sum(n for v, n in verdicts.items() if v not in OK and v not in FAULT_VERDICTS),
        "approved call not run once": sum(
            1 for thread, turn in approved.items() if turn.get("acked") and phase.executions[thread] != 1
        ),
        # Each thread has one `pay` call, so one idempotency key: a thread that ran it twice ran one key twice.
        "double executions": sum(1 for n in phase.executions.values() if n > 1),
        "denied call ran": sum(phase.executions[thread] for thread in denied),
        "acknowledged but lost": len(phase.lost),
        "turns that waited for a lease": sum(1 for turn in phase.turns if turn.get("lease_waited")),
    }


FAULT_VERDICTS = ("no_terminal", "terminals", "cut", "reset")


def figures(phase: Phase) -> dict[str, Any]:
    """Throughput and latency (ms) of a phase: the first event and the terminal event of every run that ended well."""
    ok = [record for record in phase.exchanges if record["verdict"] == "ok" and record["step"] != "reattach"]
    short = [record for record in ok if record["kind"] != "long"]
    long = [record for record in ok if record["kind"] == "long"]
    first = [record["ttfe"] for record in ok]
    end = [record["tterm"] for record in short]
    return {
        "turns_per_s": len(phase.turns) / phase.duration,
        "runs_per_s": len(ok) / phase.duration,
        "ttfe": [percentile(first, q) for q in (50, 95, 99)],
        "terminal": [percentile(end, q) for q in (50, 95, 99)],
        "long_terminal": [percentile([r["tterm"] for r in long], q) for q in (50, 99)],
        "codes": dict(Counter(r.get("code") for r in phase.exchanges if r["verdict"] == "coded")),
        "drain_retries": sum(1 for r in phase.exchanges if r.get("code") == "DRAINING"),
    }


def table(phases: Sequence[Phase]) -> str:
    head = (
        "| replicas | users | turns/s | runs/s | first event p50 / p95 / p99 ms | terminal event p50 / p95 / p99 ms "
        "| long stream p50 / p99 ms | PG connections (active) | faults |\n|---|---|---|---|---|---|---|---|---|\n"
    )
    rows = []
    for phase in phases:
        f = figures(phase)
        fmt = " / ".join
        counted = sum(faults(phase).values())
        rows.append(
            f"| {phase.replicas}{' (rolling restart)' if phase.rolling else ''} | {phase.users} | "
            f"{f['turns_per_s']:.1f} | {f['runs_per_s']:.1f} | {fmt(f'{v:.0f}' for v in f['ttfe'])} | "
            f"{fmt(f'{v:.0f}' for v in f['terminal'])} | {fmt(f'{v:.0f}' for v in f['long_terminal'])} | "
            f"{phase.connections[0]} ({phase.connections[1]}) | {counted} |"
        )
    return head + "\n".join(rows)


def report(phases: Sequence[Phase]) -> str:
    parts = [table(phases), ""]
    for phase in phases:
        f = figures(phase)
        parts.append(f"{phase.replicas} replicas{' (rolling restart)' if phase.rolling else ''}:")
        parts.append(f"  exchanges {len(phase.exchanges)}, turns {len(phase.turns)}, coded answers {f['codes']}")
        parts.extend(f"  {name}: {count}" for name, count in faults(phase).items())
        wrong = Counter(
            (r["step"], r["verdict"], r.get("status"), r.get("code"), (r.get("error") or r.get("body") or "")[:80])
            for r in phase.exchanges
            if r["verdict"] not in OK
        )
        parts.extend(f"  fault {key}: {n}" for key, n in wrong.most_common(8))
        reattached = Counter(
            (r["verdict"], r.get("terminal"), r.get("code")) for r in phase.exchanges if r["step"] == "reattach"
        )
        parts.extend(f"  reattached after a cut stream {key}: {n}" for key, n in reattached.items())
        parts.append(f"  drain refusals sent again (503 DRAINING): {figures(phase)['drain_retries']}")
        stopped = Counter(
            (r["step"], r["kind"], r.get("code") or r.get("outcome"))
            for r in phase.exchanges
            if r.get("code") == "RUN_INTERRUPTED" or r.get("outcome") == "cancelled"
        )
        # A resume cut (RUN_INTERRUPTED) is sent again to take the turn over; a run asked to stop ends cancelled.
        parts.extend(f"  ended by a stopping replica {key}: {n}" for key, n in stopped.items())
        parts.append(f"  HAProxy: {phase.balancer}")
        parts.extend(f"  restart: {restart}" for restart in phase.restarts)
        parts.extend(f"  lost: {item}" for item in phase.lost[:10])
    return "\n".join(parts)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--replicas", default="1,2,4", help="replica counts, one phase each (default 1,2,4)")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of load per phase (default 60)")
    parser.add_argument("--users", type=int, default=24, help="Locust users, the same in every phase (default 24)")
    parser.add_argument("--rolling-restart", action="store_true", help="restart each replica in turn under load")
    parser.add_argument("--lease", type=float, help="the replicas' claim_lease in seconds (the adapter's default)")
    parser.add_argument("--lease-wait", type=float, default=30.0, help="how long a client resends a claimed resume")
    parser.add_argument("--tool-seconds", type=float, default=0.2, help="how long an approved tool works")
    parser.add_argument("--dsn", help="a PostgreSQL server to use instead of starting one")
    parser.add_argument("--json", type=Path, help="write every phase's figures and counts to this file")
    parser.add_argument("--keep", type=Path, help="keep each phase's records, journal and logs in this folder")
    parser.add_argument("--check", action="store_true", help="exit 1 when a correctness count is not 0")
    args = parser.parse_args(argv)
    haproxy_binary()
    phases = []
    with postgres(args.dsn) as dsn, tempfile.TemporaryDirectory(prefix="agui-load-") as tmp:
        for count in (int(n) for n in args.replicas.split(",")):
            folder = (args.keep or Path(tmp)) / f"r{count}"
            folder.mkdir(parents=True)
            phases.append(run_phase(dsn, count, args, folder))
            print(report(phases[-1:]).split("\n\n", 1)[-1], flush=True)
    print(report(phases))
    if args.json:
        dump = [{"replicas": p.replicas, **figures(p), "faults": faults(p), "restarts": p.restarts} for p in phases]
        args.json.write_text(json.dumps(dump, indent=2))
    broken = any(sum(faults(phase).values()) for phase in phases)
    return 1 if args.check and broken else 0


if __name__ == "__main__":
    sys.exit(main())
