"""The load of the harness: Locust users that talk to the adapter through the balancer, and record every answer.

Run by harness.py in its own virtualenv (.venv-load, tests/bench/load/requirements.txt): it imports Locust and the
standard library only, never the adapter. Each user loops over weighted turns:

| turn | what | expected |
|---|---|---|
| `new` | "hello" on a new thread | RUN_FINISHED success |
| `frontend` | "go to orders" with the client's `navigate` tool, then its answer as a resume | interrupt, then success |
| `approve` | "pay N", then the approval | interrupt, then success; `pay` ran once |
| `deny` | "pay N", then the denial | interrupt, then success; `pay` never ran |
| `long` | "slowly": 400 deltas, one every 20 ms | RUN_FINISHED success |

Every HTTP exchange is judged as it arrives and written as one JSON line to $LOAD_RECORDS (see `Exchange`);
harness.py reads them: the latencies, and the correctness counts. A user reacts as a careful client would:
a `503 DRAINING` (a replica stopping) is sent again after its `Retry-After`; a resume refused with
`RESUME_CONFLICT` (the turn is claimed by a run that is gone) is sent again every second, up to $LOAD_LEASE_WAIT
seconds, and the turn counts as one that waited for a lease; a resume whose run a stopping replica cut
(`RUN_ERROR` `RUN_INTERRUPTED`) is sent again at once, and the turn counts as taken over; a stream cut before its
terminal event is reattached (`GET .../runs/{runId}/events` with its last id) to learn how the run ended.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from typing import Any

from locust import HttpUser, between, task

RECORDS = os.environ.get("LOAD_RECORDS", "load-records.jsonl")
LEASE_WAIT = float(os.environ.get("LOAD_LEASE_WAIT", "30"))
DRAIN_RETRIES = 20
TAKEOVERS = 3
"""Times a resume cut by a stopping replica (RUN_INTERRUPTED) is sent again."""
HEADERS = {"content-type": "application/json", "accept": "text/event-stream"}
NAVIGATE = {
    "name": "navigate",
    "description": "The client's page navigation.",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
}
TERMINAL = ("RUN_FINISHED", "RUN_ERROR")
_out = open(RECORDS, "a", buffering=1, encoding="utf-8")  # one line per exchange, open for the process's life


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def body(thread: str, messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    base = {"threadId": thread, "runId": new_id("run"), "messages": messages, "tools": [NAVIGATE], "context": []}
    return {**base, "protocolVersion": "1.0", **extra}


def said(text: str) -> list[dict[str, Any]]:
    return [{"id": new_id("u"), "role": "user", "content": text}]


def failure_of(error: BaseException) -> str:
    """How a transport failure reads: `reset` when the peer reset the connection, else its kind."""
    seen: list[BaseException] = []
    pending: list[Any] = [error]
    while pending:
        item = pending.pop()
        if isinstance(item, BaseException) and item not in seen:
            seen.append(item)
            pending.extend([item.__cause__, item.__context__, *item.args])
    if any(isinstance(item, ConnectionResetError) for item in seen) or "reset by peer" in repr(error):
        return "reset"
    if any(isinstance(item, ConnectionRefusedError) for item in seen):
        return "refused"
    if "IncompleteRead" in repr(error) or "ended prematurely" in repr(error):
        return "cut"  # the server (or the balancer) closed the stream before its end, without a reset
    if "timed out" in repr(error).lower():
        return "timeout"
    return f"transport:{type(error).__name__}"


class Exchange:
    """One HTTP exchange and what it showed: written as one JSON line.

    `verdict` is `ok` (200, one terminal event, last), `coded` (a 4xx or 503 with a JSON `code`), or a fault:
    `no_terminal` (the body ended without one), `cut` (closed before the body's end), `terminals` (more than
    one, or not last), `reset`, `refused`, `timeout`, `transport:*`, `status` (any other status).
    """

    def __init__(self, kind: str, step: str, thread: str, run: str) -> None:
        self.record: dict[str, Any] = {"kind": kind, "step": step, "thread": thread, "run": run, "at": time.time()}
        self.events: list[dict[str, Any]] = []
        self.last_id = 0

    @property
    def terminal(self) -> dict[str, Any]:
        return self.events[-1] if self.events and self.events[-1]["type"] in TERMINAL else {}

    def read(self, response: Any, started: float) -> None:
        """Read an SSE body as it arrives, timing the first event and the terminal one."""
        buffer = b""
        for chunk in response.iter_content(chunk_size=None):
            buffer += chunk
            *frames, buffer = buffer.split(b"\n\n")
            for frame in frames:
                self.frame(frame.decode(), started)

    def frame(self, frame: str, started: float) -> None:
        data = [line[5:].strip() for line in frame.split("\n") if line.startswith("data:")]
        ids = [line[3:].strip() for line in frame.split("\n") if line.startswith("id:")]
        if not data:
            self.record["keepalives"] = self.record.get("keepalives", 0) + 1
            return
        event = json.loads("\n".join(data))
        self.events.append(event)
        if ids:
            self.last_id = int(ids[-1])
        elapsed = time.perf_counter() - started
        self.record.setdefault("ttfe", elapsed)
        if event["type"] in TERMINAL:
            self.record["tterm"] = elapsed

    def judge(self, status: int, payload: Any = None) -> None:
        record = self.record
        record["status"] = status
        if status != 200:
            refusal = payload.get("error", payload) if isinstance(payload, dict) else None  # {"error": {"code"}}
            code = refusal.get("code") if isinstance(refusal, dict) else None
            record["code"] = code
            record["verdict"] = "coded" if code and (400 <= status < 500 or status == 503) else "status"
            return
        terminals = [event for event in self.events if event["type"] in TERMINAL]
        if not terminals:
            record["verdict"] = "no_terminal"
        elif len(terminals) > 1 or not self.terminal:
            record["verdict"] = "terminals"
        else:
            record["verdict"] = "ok"
            end = self.terminal
            record["terminal"] = end["type"]
            record["code"] = end.get("code")
            record["outcome"] = (end.get("outcome") or {}).get("type", "success" if end["type"] == TERMINAL[0] else "")
            record["interrupts"] = [item["id"] for item in (end.get("outcome") or {}).get("interrupts", [])]
            if end["type"] == "RUN_FINISHED":  # acknowledged: what it reported must be in the store
                record["messages"] = sorted(
                    {e["messageId"] for e in self.events if e["type"] == "TEXT_MESSAGE_START"}
                    | {e["parentMessageId"] for e in self.events if e.get("parentMessageId")}
                )
                record["calls"] = sorted({e["toolCallId"] for e in self.events if e["type"] == "TOOL_CALL_START"})

    def write(self) -> None:
        _out.write(json.dumps(self.record) + "\n")


class AguiUser(HttpUser):
    """One person at an AG-UI page: new runs, tool round trips, approvals, denials and long streams."""

    wait_time = between(0.05, 0.3)

    def post(self, kind: str, step: str, payload: dict[str, Any]) -> Exchange:
        """POST one input; a `503 DRAINING` is sent again after its Retry-After (counted in `drained`)."""
        for attempt in range(DRAIN_RETRIES):
            exchange = self.exchange(kind, step, payload, attempt)
            if exchange.record.get("code") != "DRAINING":
                return exchange
            time.sleep(float(exchange.record.get("retry_after") or 1))
        return exchange

    def exchange(self, kind: str, step: str, payload: dict[str, Any], attempt: int) -> Exchange:
        exchange = Exchange(kind, step, payload["threadId"], payload["runId"])
        exchange.record["attempt"] = attempt
        started = time.perf_counter()
        try:
            with self.client.post(
                "/", data=json.dumps(payload), headers=HEADERS, stream=True, name=f"{kind}:{step}", catch_response=True
            ) as response:
                exchange.record["headers_s"] = time.perf_counter() - started
                exchange.record["retry_after"] = response.headers.get("retry-after")
                if response.status_code == 200:
                    exchange.read(response, started)
                    exchange.judge(200)
                else:
                    exchange.judge(response.status_code, _json(response))
                    exchange.record["body"] = response.text[:120]
                verdict = exchange.record["verdict"]
                response.success() if verdict in ("ok", "coded") else response.failure(verdict)
        except Exception as error:  # every transport failure is a verdict, recorded
            exchange.judge(200)
            exchange.record["verdict"] = exchange.record["verdict"] if exchange.terminal else failure_of(error)
            exchange.record["error"] = repr(error)[:300]
        exchange.write()
        self.fire(exchange)
        return exchange

    def fire(self, exchange: Exchange) -> None:
        """The first event and the terminal one as Locust request entries, for Locust's own table."""
        for key, label in (("ttfe", "first event"), ("tterm", "terminal event")):
            if key in exchange.record:
                self.environment.events.request.fire(
                    request_type="SSE",
                    name=f"{exchange.record['kind']} {label}",
                    response_time=exchange.record[key] * 1000,
                    response_length=0,
                    exception=None,
                    context={},
                )

    def reattach(self, exchange: Exchange) -> None:
        """A stream cut before its end: read the rest of the run from any replica, and record how it ended."""
        record = exchange.record
        again = Exchange(record["kind"], "reattach", record["thread"], record["run"])
        started = time.perf_counter()
        path = f"/threads/{record['thread']}/runs/{record['run']}/events"
        try:
            headers = {"accept": "text/event-stream", "last-event-id": str(exchange.last_id)}
            with self.client.get(path, headers=headers, stream=True, name="reattach", catch_response=True) as response:
                if response.status_code == 200:
                    again.read(response, started)
                    again.judge(200)
                else:
                    again.judge(response.status_code, _json(response))
                response.success()
        except Exception as error:  # recorded as its verdict
            again.judge(200)
            again.record["verdict"] = failure_of(error)
        again.write()

    def turn(self, kind: str, text: str, answer: dict[str, Any] | None) -> None:
        """One turn: the first run and, for an interrupt, its answer; written as a `turn` line at the end."""
        thread = new_id("thread")
        summary: dict[str, Any] = {"type": "turn", "kind": kind, "thread": thread, "at": time.time()}
        first = self.post(kind, "start", body(thread, said(text)))
        if first.record["verdict"] != "ok" and first.record.get("ttfe") is not None:
            self.reattach(first)
        summary["start"] = first.record["verdict"]
        if answer is not None and first.record.get("interrupts"):
            entry = [{"interruptId": first.record["interrupts"][0], "status": "resolved", "payload": answer}]
            summary.update(self.resume(kind, body(thread, [], resume=entry)))
        _out.write(json.dumps(summary) + "\n")

    def resume(self, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
        """Send the answer; while the turn is claimed (RESUME_CONFLICT) send it again each second, up to LEASE_WAIT."""
        waiting_since: float | None = None
        interrupted = 0
        while True:
            exchange = self.post(kind, "resume", {**payload, "runId": new_id("run")})
            record = exchange.record
            if record["verdict"] != "ok" and record.get("ttfe") is not None:
                self.reattach(exchange)
            code = record.get("code")
            if code == "RUN_INTERRUPTED" and interrupted < TAKEOVERS:
                interrupted += 1  # a stopping replica cut the run: the same answers take the turn over elsewhere
                continue
            if code != "RESUME_CONFLICT":
                break
            waiting_since = waiting_since or time.perf_counter()
            if time.perf_counter() - waiting_since > LEASE_WAIT:
                break
            time.sleep(1.0)
        return {
            "resume": record["verdict"],
            "resume_code": record.get("code"),
            "resume_outcome": record.get("outcome"),
            "acked": record["verdict"] == "ok" and record.get("terminal") == "RUN_FINISHED",
            "lease_waited": waiting_since is not None,
            "lease_wait_s": time.perf_counter() - waiting_since if waiting_since else 0.0,
            "stalled": code == "RESUME_CONFLICT",
            "taken_over": interrupted,
        }

    @task(3)
    def new_run(self) -> None:
        self.turn("new", "hello there", None)

    @task(2)
    def frontend_round_trip(self) -> None:
        self.turn("frontend", "go to orders", {"navigated": True})

    @task(2)
    def approval(self) -> None:
        self.turn("approve", "pay 7", {"approved": True})

    @task(1)
    def denial(self) -> None:
        self.turn("deny", "pay 3", {"approved": False})

    @task(1)
    def long_stream(self) -> None:
        self.turn("long", "slowly please", None)


def _json(response: Any) -> Any:
    try:
        return response.json()
    except ValueError:
        return None
