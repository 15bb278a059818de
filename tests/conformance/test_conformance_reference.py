"""The conformance kit's reference agent: its scenarios, its grading, and real clients played against it.

`python -m adapter.conformance serve` runs as a subprocess; the official TypeScript clients play every
scenario over HTTP (tests/node/reference.mjs), then `GET /report` says how each did.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from replica_process import free_port
from restartable import ROOT

from adapter.conformance import Recording, create_reference_app

# Private on purpose: the reference agent is driven by the kit's own client, the one that grades servers, so a
# change to either shows here; the kit's door offers the checks, not its client.
from adapter.conformance._client import Client, Reply, Thread, cancelled, resolved

NODE_DIR = Path(__file__).parents[1] / "node"
SCENARIOS = ["frontend-tool", "parallel", "approval-edits", "form", "expiring", "cancelled", "pending", "state"]
SCENARIOS += ["long-text", "run-error"]
TOOLS = [{"name": "navigate", "description": "Open a page.", "parameters": {"type": "object", "properties": {}}}]
TIMEOUT = 120  # seconds for one client driver: ten scenarios, one of them waits out a 3 s expiry


def by_id(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {scenario["id"]: scenario for scenario in report["scenarios"]}


def failing_checks(scenario: dict[str, Any]) -> set[str]:
    return {check["id"] for check in scenario["checks"] if check["status"] == "fail"}


async def play(client: Client, scenario: str) -> tuple[Thread, Reply]:
    thread = client.thread(tools=TOOLS)
    return thread, await thread.say(f"scenario: {scenario}")


async def test_a_client_that_keeps_the_rules_passes_every_scenario_it_plays() -> None:
    recording = Recording()
    client = Client(create_reference_app(recording))

    thread, reply = await play(client, "parallel")
    await thread.resume(*[resolved(i, {"opened": "x"}) for i in reply.interrupts])
    thread, reply = await play(client, "form")
    await thread.resume(resolved(reply.interrupts[0], {"name": "Ada", "quantity": 2}))
    thread, reply = await play(client, "expiring")
    await thread.resume(cancelled(reply.interrupts[0]))
    thread, reply = await play(client, "long-text")
    await thread.say("thanks")

    report = by_id(recording.report())
    assert {s: report[s]["status"] for s in report} == {
        s: "pass" if s in ("parallel", "form", "expiring", "long-text") else "skip" for s in SCENARIOS
    }
    assert report["form"]["checks"][2] == {
        "id": "valid-payloads",
        "status": "pass",
        "detail": "every resolved payload met its responseSchema",
    }


async def test_a_client_that_breaks_the_rules_gets_graded_failures() -> None:
    recording = Recording()
    client = Client(create_reference_app(recording))

    thread, reply = await play(client, "form")
    await thread.say("never mind the form")  # a new input while the interrupt is open
    await thread.resume(resolved("int_made_up", {"name": "Ada", "quantity": 2}))
    await thread.resume(resolved(reply.interrupts[0], {"name": "", "quantity": 0}))
    thread, reply = await play(client, "parallel")
    await thread.resume(*[resolved(i, {}) for i in reply.interrupts])
    await thread.resume(*[resolved(i, {}) for i in reply.interrupts])  # a replay
    thread, reply = await play(client, "approval-edits")
    await thread.resume(resolved(reply.interrupts[0], {"approved": True}))
    await play(client, "state")

    report = by_id(recording.report())
    assert failing_checks(report["form"]) == {"answered-once", "right-ids", "valid-payloads", "no-input-while-open"}
    form = {check["id"]: check["detail"] for check in report["form"]["checks"]}
    assert form["answered-once"].endswith("never answered"), "a refused answer leaves the interrupt open"
    assert '{"name": "", "quantity": 0}' in form["valid-payloads"], "details are JSON"
    assert failing_checks(report["parallel"]) == {"answered-once", "right-ids"}
    assert failing_checks(report["approval-edits"]) == {"edited-args"}
    assert failing_checks(report["state"]) == {"kept-state"}
    assert "answered 2 times" in report["parallel"]["detail"]


async def test_a_refused_answer_is_no_answer_and_an_accepted_one_is() -> None:
    recording = Recording()
    client = Client(create_reference_app(recording))

    thread, reply = await play(client, "form")
    refused = await thread.resume(resolved(reply.interrupts[0], {"name": "", "quantity": 0}))
    answered_once = {c["id"]: c for c in by_id(recording.report())["form"]["checks"]}["answered-once"]
    accepted = await thread.resume(resolved(reply.interrupts[0], {"name": "Ada", "quantity": 1}))
    report = by_id(recording.report())["form"]

    assert (refused.error or {}).get("code") == "RESUME_PAYLOAD_INVALID"
    assert accepted.error is None
    assert answered_once["status"] == "fail"
    assert failing_checks(report) == {"valid-payloads"}


async def test_a_body_over_the_limit_is_refused_before_it_is_read_whole() -> None:
    app = create_reference_app(Recording(), max_body_bytes=1_000)
    pulled = 0

    async def body() -> AsyncIterator[bytes]:
        nonlocal pulled
        for _ in range(100):
            pulled += 1
            yield b" " * 500

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://ref") as http:
        declared = await http.post("/", content=b" " * 2_000, headers={"content-type": "application/json"})
        streamed = await http.post("/", content=body(), headers={"content-type": "application/json"})

    assert declared.status_code == streamed.status_code == 413
    assert streamed.json()["error"]["code"] == "CONTENT_TOO_LARGE"
    assert pulled < 10, "the body was read past the limit"


async def test_the_recording_forgets_the_oldest_first() -> None:
    recording = Recording(max_threads=2, max_inputs=3)
    client = Client(create_reference_app(recording))

    first, _ = await play(client, "long-text")
    for _ in range(4):
        await first.say("more")
    second, _ = await play(client, "state")
    third, _ = await play(client, "state")

    assert list(recording.threads) == [second.id, third.id]
    assert list(recording.scenarios) == [second.id, third.id]
    kept = Recording(max_inputs=3)
    client = Client(create_reference_app(kept))
    first, _ = await play(client, "long-text")
    for n in range(4):
        await first.say(f"more {n}")
    assert [r.body["messages"][-1]["content"] for r in kept.threads[first.id]] == ["more 1", "more 2", "more 3"]


@pytest.mark.parametrize("allow_reset", [False, True])
async def test_delete_report_needs_allow_reset(allow_reset: bool) -> None:
    recording = Recording()
    client = Client(create_reference_app(recording, allow_reset=allow_reset))
    await play(client, "state")

    response = await client.http.delete("http://agui.invalid/report")

    assert response.status_code == (200 if allow_reset else 405)
    assert bool(recording.threads) is not allow_reset


@pytest.fixture(scope="module")
def served_reference(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`python -m adapter.conformance serve` on a free port, for the module; yields its URL."""
    tmp_path = tmp_path_factory.mktemp("reference")
    port = free_port()
    log = (tmp_path / "serve.log").open("wb")
    command = [sys.executable, "-m", "adapter.conformance", "serve", "--port", str(port), "--allow-reset"]
    server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env={**os.environ})
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 30
        while not _answers(url):
            assert server.poll() is None, (tmp_path / "serve.log").read_text()
            assert time.monotonic() < deadline, (tmp_path / "serve.log").read_text()
            time.sleep(0.05)
        yield url
    finally:
        server.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            server.wait(10)
        log.close()


@pytest.fixture
def reference_url(served_reference: str) -> str:
    """The served reference agent, with an empty report."""
    httpx.delete(served_reference + "report").raise_for_status()
    return served_reference


def _answers(url: str) -> bool:
    try:
        return httpx.get(url + "scenarios").status_code == 200
    except httpx.TransportError:
        return False


def test_the_served_agent_lists_its_scenarios(reference_url: str) -> None:
    listed = httpx.get(reference_url + "scenarios").json()["scenarios"]

    assert [scenario["id"] for scenario in listed] == SCENARIOS
    assert all(scenario["does"] and scenario["clientShould"] for scenario in listed)
    assert httpx.get(reference_url + "report").json()["scenarios"][0]["status"] == "skip"


def drive(package: str, url: str) -> str:
    node = shutil.which("node")
    assert node is not None, "Node.js is needed: .ci/run expects node and npm on the PATH"
    folder = NODE_DIR / package
    assert (folder / "node_modules" / "@ag-ui" / "client").is_dir(), f"run `npm ci` in {folder} (.ci/run does)"
    result = subprocess.run(
        [node, "reference.mjs", url], cwd=folder, capture_output=True, text=True, timeout=TIMEOUT, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


@pytest.mark.slow
@pytest.mark.needs_node
def test_the_1_0_client_passes_every_scenario(reference_url: str) -> None:
    output = drive("client-1.0", reference_url)

    report = by_id(httpx.get(reference_url + "report").json())
    assert {s: report[s]["status"] for s in report} == dict.fromkeys(SCENARIOS, "pass"), json.dumps(report, indent=1)
    assert output.count("client-1.0 played") == len(SCENARIOS), output


@pytest.mark.slow
@pytest.mark.needs_node
def test_the_0_0_59_clients_known_limits_are_graded_failures(reference_url: str) -> None:
    output = drive("client-0.0.59", reference_url)

    report = by_id(httpx.get(reference_url + "report").json())
    assert {s for s in report if report[s]["status"] == "fail"} == {"cancelled", "expiring"}, output
    assert failing_checks(report["cancelled"]) == {"continued"}
    assert failing_checks(report["expiring"]) == {"answered-once", "expiry"}
    assert "neither answered nor cancelled" in report["expiring"]["detail"]
    assert "threw in cancelled" in output
    assert "threw in expiring" in output
    assert output.count("client-0.0.59 played") == len(SCENARIOS) - 2
