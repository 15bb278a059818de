"""SSE through the proxies operators put in front of replicas: HAProxy and nginx, from Debian's packages.

The adapter is served by uvicorn; each proxy runs in a process of its own on 127.0.0.1 with the configuration
below, and the test reads the stream through it as it arrives. The run is held open by a tool that waits until
the test has read, through the proxy, the first event and a keep-alive comment: a proxy that buffered the
stream would deliver nothing before the run ends, and the run cannot end first. Proxying must not cost the
stream its headers: `x-accel-buffering: no` (which tells nginx itself not to buffer or hold back compressed
output: its `proxy_buffering` is left on here, as it is by default, and gzip is on) and `cache-control: no-store`.

Locally a missing proxy skips these tests with the command that installs it; under CI they fail
(tests/externals.py), and .ci/run installs both.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from agui import run_input, user
from conftest import Serve
from externals import in_ci
from replica_process import free_port

from adapter import Adapter, tool
from adapter.backends import Call, Rule, ScriptedBackend

pytestmark = pytest.mark.slow

BOUND = 60.0  # seconds a proxy may take to start, or the stream to show its next frame, on a loaded machine
HOLD = 30.0  # seconds the held tool waits at most: a buffering proxy then shows everything at once, and fails
KEEPALIVE = 0.2  # seconds of silence before the adapter sends a keep-alive comment
INSTALL = "apt-get install -y haproxy nginx (bash .ci/run does)"


def haproxy(folder: Path, port: int, upstream: int) -> list[str]:
    """HAProxy in HTTP mode, with `option http-no-delay`.

    Without the option HAProxy still streams, but sends the headers and each small chunk with MSG_MORE, waiting
    for a full packet: an event then waits up to 200 ms for the kernel to send it (a delay, not a hold: this test
    cannot see it; the load harness measures it, docs/replicas.md).
    """
    config = folder / "haproxy.cfg"
    config.write_text(
        f"""defaults
    mode http
    timeout connect 5s
    timeout client 120s
    timeout server 120s
    option http-no-delay

frontend agui
    bind 127.0.0.1:{port}
    default_backend adapter

backend adapter
    server only 127.0.0.1:{upstream}
"""
    )
    return ["haproxy", "-f", str(config), "-db"]


def nginx(folder: Path, port: int, upstream: int) -> list[str]:
    """nginx with `proxy_buffering on` (its default) and gzip: the adapter's `X-Accel-Buffering: no` turns both off.

    nginx keeps `X-Accel-*` headers to itself unless told to pass them: `proxy_pass_header` hands it on, so that
    a proxy behind this one sees it too.
    """
    config = folder / "nginx.conf"
    config.write_text(
        f"""worker_processes 1;
daemon off;
pid {folder}/nginx.pid;
error_log {folder}/error.log;
events {{}}
http {{
    access_log off;
    # Compressing the stream would hold frames back until a buffer fills, but for the adapter's
    # `X-Accel-Buffering: no`, which makes nginx flush each one: on here, so that the header is what the test sees.
    gzip on;
    gzip_min_length 1;
    gzip_types text/event-stream;
    client_body_temp_path {folder}/body;
    proxy_temp_path {folder}/proxy;
    fastcgi_temp_path {folder}/fastcgi;
    uwsgi_temp_path {folder}/uwsgi;
    scgi_temp_path {folder}/scgi;
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://127.0.0.1:{upstream};
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_read_timeout 120s;
            proxy_pass_header X-Accel-Buffering;
        }}
    }}
}}
"""
    )
    return ["nginx", "-p", str(folder), "-c", str(config)]


PROXIES = {"haproxy": haproxy, "nginx": nginx}


def binary(name: str) -> str | None:
    """The proxy's executable: on the PATH, or where Debian puts it (/usr/sbin, off a plain user's PATH)."""
    sbin = Path("/usr/sbin") / name
    return shutil.which(name) or (str(sbin) if sbin.exists() else None)


@pytest.fixture(params=sorted(PROXIES))
def proxy_kind(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    if binary(name) is None:
        problem = f"{name} is not installed: {INSTALL}"
        if in_ci():
            pytest.fail(problem, pytrace=False)
        pytest.skip(problem)
    return name


@dataclass
class Hold:
    """The held tool's two moments: the test `release`s it; it says when it `returned` (the run may then end)."""

    release: threading.Event = field(default_factory=threading.Event)
    returned: threading.Event = field(default_factory=threading.Event)


@pytest.fixture
def held() -> Iterator[Hold]:
    """Released at teardown too, so that no run outlives its test."""
    hold = Hold()
    yield hold
    hold.release.set()


def hold_adapter(held: Hold) -> Adapter:
    @tool
    async def hold() -> str:
        """Wait until the test lets the run end."""
        try:
            released = await asyncio.to_thread(held.release.wait, HOLD)
        finally:
            held.returned.set()
        return "released" if released else "held too long"

    rules = [Rule(r"hold", steps=[[Call("hold", {})]], reply="Done.")]
    return Adapter(ScriptedBackend(rules), tools=[hold])


@pytest.fixture
async def through(
    proxy_kind: str, held: Hold, serve: Serve, tmp_path: Path
) -> AsyncIterator[tuple[str, httpx.AsyncClient]]:
    """The adapter served by uvicorn behind the proxy: the proxy's URL, and a client."""
    served = await serve(hold_adapter(held), keepalive_interval=KEEPALIVE)
    port = free_port()
    executable, *arguments = PROXIES[proxy_kind](tmp_path, port, int(served.url.rsplit(":", 1)[1]))
    command = [binary(executable) or executable, *arguments]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(timeout=BOUND) as http:
            await until_healthy(http, url, process)
            yield url, http
    finally:
        process.terminate()
        process.wait(BOUND)
        assert process.stderr is not None
        process.stderr.close()


async def until_healthy(http: httpx.AsyncClient, url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + BOUND
    while time.monotonic() < deadline:
        assert process.poll() is None, process.stderr.read().decode() if process.stderr else "the proxy exited"
        try:
            if (await http.get(url + "/health")).status_code == 200:
                return
        except httpx.TransportError:
            pass
        await asyncio.sleep(0.05)
    raise AssertionError("the proxy never answered")


class Frames:
    """The SSE frames of a response, one at a time, as they come through."""

    def __init__(self, response: httpx.Response) -> None:
        self.chunks = response.aiter_text()
        self.buffer = ""

    async def next(self) -> str:
        while "\n\n" not in self.buffer:
            self.buffer += await anext(self.chunks)
        frame, self.buffer = self.buffer.split("\n\n", 1)
        return frame


def event_type(frame: str) -> str | None:
    data = [line[5:].strip() for line in frame.splitlines() if line.startswith("data:")]
    return json.loads("".join(data))["type"] if data else None


TERMINAL = {"RUN_FINISHED", "RUN_ERROR"}


async def test_the_first_event_and_keep_alives_come_through_the_proxy_before_the_run_ends(
    through: tuple[str, httpx.AsyncClient], held: Hold
) -> None:
    url, http = through
    body = run_input("thread-proxy", [user("hold on")])
    headers = {"content-type": "application/json", "accept": "text/event-stream"}
    async with http.stream("POST", url + "/", json=body, headers=headers) as response:
        frames = Frames(response)
        first = await frames.next()
        before: list[str] = [first]
        while not before[-1].startswith(": keep-alive"):
            before.append(await frames.next())
        returned_first = held.returned.is_set()
        held.release.set()
        after: list[str] = []
        while not after or event_type(after[-1]) not in TERMINAL:
            after.append(await frames.next())
        rest = frames.buffer + "".join([chunk async for chunk in frames.chunks])

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["x-accel-buffering"] == "no"
    assert response.headers["cache-control"] == "no-store"
    assert event_type(first) == "RUN_STARTED"
    assert not returned_first  # the first event and a keep-alive came while the run was held: nothing buffered them
    assert not [frame for frame in before if event_type(frame) in TERMINAL]
    types = [event_type(frame) for frame in after if event_type(frame)]
    assert types.count("RUN_FINISHED") == 1
    assert types[-1] == "RUN_FINISHED"
    assert rest.strip("\n") in ("", ": keep-alive")  # nothing after the terminal event but a comment
