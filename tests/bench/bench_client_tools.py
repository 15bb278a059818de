"""Benchmark: what client tool declarations cost the server, and whether `/health` keeps answering meanwhile.

Run with ``python tests/bench/bench_client_tools.py [--seconds 5]``. One adapter server runs in its own
process (`_server.py adapter`); every figure is taken in the same run as its baseline:

- ``same size``: the refused body's JSON sent as `state` instead of `tools`: what parsing any such body costs;
- ``refused``: the review's body, 4,400 small tools (about 1 MiB), now refused with 413 `TOO_MANY_TOOLS`;
- ``cold``: the largest accepted declaration (128 tools, just under 256 KiB), different on every request,
  so each schema is checked;
- ``warm``: the same declaration resent, so every check is remembered.

For each, server CPU per request, and `GET /agui/health` latency (median and worst) while four clients send
that workload in a loop, against the same probe on the idle server. Compare ratios, not absolute numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from _server import Server, new_id

CLIENTS = 4
_HEADERS = {"content-type": "application/json", "accept": "text/event-stream"}


def tools(count: int, *, salt: str, padding: int) -> list[dict[str, Any]]:
    """`count` tools with distinct schemas (a `salt` in each title), each about `padding` bytes larger."""
    return [
        {
            "name": f"tool_{index}",
            "description": "d" * padding,
            "parameters": {
                "type": "object",
                "title": f"{salt} {index}",
                "properties": {"x": {"type": "string"}, "n": {"type": "integer", "minimum": 0}},
            },
        }
        for index in range(count)
    ]


def body(declared: list[dict[str, Any]], state: Any = None) -> bytes:
    message = {"id": new_id("user"), "role": "user", "content": "hi"}
    run_input = {"threadId": new_id("t"), "runId": new_id("r"), "messages": [message], "tools": declared}
    return json.dumps({**run_input, "state": state} if state is not None else run_input).encode()


POOL = 40  # bodies made before measuring, so that the client's own JSON encoding does not delay its probes
WORKLOADS: dict[str, Callable[[], bytes]] = {
    "same size": lambda: body([], {"items": tools(4_400, salt=new_id("s"), padding=20)}),  # the same JSON as state
    "refused": lambda: body(tools(4_400, salt=new_id("s"), padding=20)),  # ~0.9 MiB: under max_body_bytes
    "cold": lambda: body(tools(128, salt=new_id("s"), padding=1_800)),
    "warm": lambda: WARM,
}
WARM: bytes = body(tools(128, salt="warm", padding=1_800))


async def send(server: Server, content: bytes) -> tuple[int, str]:
    async with server.http.stream("POST", "/agui/", content=content, headers=_HEADERS) as response:
        raw = await response.aread()
    return response.status_code, json.loads(raw)["error"]["code"] if response.status_code != 200 else ""


async def cpu_per_request(server: Server, bodies: list[bytes]) -> float:
    before = await server.cpu()
    for content in bodies:
        await send(server, content)
    return (await server.cpu() - before) / len(bodies) * 1000


async def probe(server: Server, seconds: float) -> list[float]:
    latencies: list[float] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        started = time.perf_counter()
        response = await server.http.get("/agui/health")
        response.raise_for_status()
        latencies.append((time.perf_counter() - started) * 1000)
        await asyncio.sleep(0.01)
    return latencies


async def under_load(server: Server, bodies: list[bytes], seconds: float) -> list[float]:
    stop = asyncio.Event()

    async def flood(start: int) -> None:
        index = start
        while not stop.is_set():
            await send(server, bodies[index % len(bodies)])
            index += 1

    floods = [asyncio.create_task(flood(client * len(bodies) // CLIENTS)) for client in range(CLIENTS)]
    await asyncio.sleep(0.2)
    try:
        return await probe(server, seconds)
    finally:
        stop.set()
        await asyncio.gather(*floods)


async def main_async(args: argparse.Namespace) -> int:
    server = Server("adapter")
    try:
        await server.wait_ready()
        statuses = {name: await send(server, make()) for name, make in WORKLOADS.items()}
        expected = {"same size": (200, ""), "refused": (413, "TOO_MANY_TOOLS"), "cold": (200, ""), "warm": (200, "")}
        assert statuses == expected, statuses
        idle = await probe(server, args.seconds)
        print(f"{'workload':<10} {'CPU ms/request':>15} {'/health median ms':>18} {'/health worst ms':>17}")
        print(f"{'idle':<10} {'':>15} {statistics.median(idle):>18.2f} {max(idle):>17.2f}")
        cpu: dict[str, float] = {}
        for name, make in WORKLOADS.items():
            bodies = [make() for _ in range(POOL)]
            cpu[name] = await cpu_per_request(server, bodies[: args.reps])
            loaded = await under_load(server, bodies if name == "warm" else [make() for _ in range(POOL)], args.seconds)
            print(f"{name:<10} {cpu[name]:>15.2f} {statistics.median(loaded):>18.2f} {max(loaded):>17.2f}")
        print(f"\nrefused / same size CPU: {cpu['refused'] / cpu['same size']:.2f}  (as any body of that size)")
        print(f"warm / cold CPU: {cpu['warm'] / cpu['cold']:.2f}  (a resent declaration is checked once)")
    finally:
        await server.aclose()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="probe time per workload")
    parser.add_argument("--reps", type=int, default=20, help=f"requests per CPU figure, at most {POOL}")
    return asyncio.run(main_async(parser.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
