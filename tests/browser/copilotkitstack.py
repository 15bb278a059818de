"""The CopilotKit example (examples/copilotkit) in front of the demo, for the tests and the docs' screenshot.

The stack, each part on a free port: the demo with no option set (the adapter's default, `frontend_outcome="pending"`,
which CopilotKit's @ag-ui/client 0.0.x needs), or another app with the adapter mounted at /agui,
then `node server.mjs`: the CopilotKit runtime with that adapter as its AG-UI agent, serving the Vite build of the page.
`python tests/browser/copilotkitstack.py` writes docs/screenshots/copilotkit.png.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from starlette.types import ASGIApp

ROOT = Path(__file__).parents[2]
sys.path[:0] = [p for p in (str(ROOT), str(ROOT / "tests")) if p not in sys.path]  # run as a script, too

from browserkit import CHROMIUM, CHROMIUM_ARGS  # noqa: E402 - needs the paths above first
from served_demo import serve_app, serve_demo  # noqa: E402

EXAMPLE = ROOT / "examples" / "copilotkit"
BUILD_INPUTS = ["index.html", "vite.config.js", "package-lock.json", "src"]
NOT_INSTALLED = (
    "The CopilotKit example has no node_modules. Install its pinned packages first: "
    "cd examples/copilotkit && npm ci (bash .ci/run does it)."
)
NO_NODE = "Node.js is missing: the CopilotKit example needs node >= 20.19 and npm on the PATH."
_START_BOUND = 120.0  # seconds the runtime may take to import and listen on a loaded 2-core machine


class StackError(RuntimeError):
    """The example cannot be started; the message says what to run."""


def ensure_build() -> None:
    """Check the example's packages, and run `npm run build` when dist/ is missing or older than its sources."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        raise StackError(NO_NODE)
    if not (EXAMPLE / "node_modules" / ".package-lock.json").exists():
        raise StackError(NOT_INSTALLED)
    built = EXAMPLE / "dist" / "index.html"
    sources = [p for name in BUILD_INPUTS for p in [EXAMPLE / name, *(EXAMPLE / name).rglob("*")] if p.is_file()]
    if built.exists() and built.stat().st_mtime >= max(p.stat().st_mtime for p in sources):
        return
    done = subprocess.run(["npm", "run", "build"], cwd=EXAMPLE, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise StackError(f"npm run build failed in examples/copilotkit:\n{done.stdout}\n{done.stderr}")


class Runtime:
    """`node server.mjs --agent AGENT --port 0`: the page and the CopilotKit runtime at `url`, and what it logged."""

    def __init__(self, agent_url: str) -> None:
        env = {**os.environ, "COPILOTKIT_TELEMETRY_DISABLED": "true", "DO_NOT_TRACK": "1"}
        self.process = subprocess.Popen(
            ["node", "server.mjs", "--agent", agent_url, "--port", "0"],
            cwd=EXAMPLE,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.log: list[str] = []
        lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._drain, args=(lines,), daemon=True, name="copilotkit-runtime-log")
        self._reader.start()
        deadline = time.monotonic() + _START_BOUND
        while True:
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                line = None
            if line is None:
                self.stop()
                raise StackError("the CopilotKit runtime did not start:\n" + "".join(self.log))
            if line.startswith("CopilotKit runtime: "):
                self.url = line.split()[2].removesuffix("/api/copilotkit")
                return

    def _drain(self, lines: queue.Queue[str | None]) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.log.append(line)
            lines.put(line)
        lines.put(None)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
        self._reader.join(10)  # the pipe is at its end once the process is gone
        assert self.process.stdout is not None
        self.process.stdout.close()


@contextlib.contextmanager
def copilotkit_stack(db_path: Path, app: ASGIApp | None = None) -> Iterator[tuple[str, Runtime]]:
    """Yield (the agent server's base URL, the runtime serving the page); both stop afterwards.

    The agent server is the demo on `db_path`, or `app`, which mounts its adapter at /agui.
    """
    ensure_build()
    with serve_demo(db_path) if app is None else serve_app(app, "copilotkit-agent") as demo:
        runtime = Runtime(f"{demo}/agui/")
        try:
            yield demo, runtime
        finally:
            runtime.stop()


RUNNER_DRIVER = """
import { createInterface } from "node:readline";
import { HttpAgent } from "@ag-ui/client";
import { AdapterRunner } from "./adapter-runner.mjs";

const url = process.argv[1];
const runner = new AdapterRunner({ url });
const template = new HttpAgent({ url });
const say = (line) => process.stdout.write(JSON.stringify(line) + "\\n");

// As the runtime's run handler does: a clone of the agent per request, holding the input's thread.
function run({ threadId, runId, text, take }) {
  const input = { threadId, runId, messages: [{ id: `user-${runId}`, role: "user", content: text }], tools: [],
                  context: [], state: {}, forwardedProps: {} };
  const agent = template.clone();
  agent.setMessages(input.messages);
  agent.threadId = threadId;
  const seen = [];
  const subscription = runner.run({ threadId, agent, input }).subscribe({
    next: (event) => {
      seen.push(event);
      if (seen.length === take) {
        subscription?.unsubscribe();
        say({ events: seen });
      }
    },
    complete: () => take === null && say({ events: seen }),
  });
}

function connect({ threadId }) {
  runner.connect({ threadId, agentId: "default", headers: {} }).subscribe({
    next: (event) => say({ event }),
    error: (error) => say({ error: String(error) }),
    complete: () => say({ done: true }),
  });
}

for await (const line of createInterface({ input: process.stdin })) {
  const command = JSON.parse(line);
  (command.op === "run" ? run : connect)(command);
}
"""
"""A node process that drives examples/copilotkit/adapter-runner.mjs as the runtime does, one JSON command a line:
`{"op": "run", "threadId", "runId", "text", "take"}` answers `{"events": [...]}` once it saw `take` events (then
leaves, as a page that goes away; `take` null: the whole run); `{"op": "connect", "threadId"}` answers each event
as `{"event": ...}`, then `{"done": true}` (or `{"error": ...}`)."""


class RunnerDriver:
    """`RUNNER_DRIVER` in node, in front of the adapter at `agent_url`; `send` a command, `receive` its answers."""

    def __init__(self, agent_url: str) -> None:
        self.process = subprocess.Popen(
            ["node", "--input-type=module", "-e", RUNNER_DRIVER, agent_url],
            cwd=EXAMPLE,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._drain, daemon=True, name="copilotkit-runner-driver")
        self._reader.start()

    def _drain(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def send(self, command: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()

    def receive(self, bound: float) -> dict[str, Any]:
        """The next answer, within `bound` seconds; the driver's own output (a stack trace) fails the test."""
        line = self.lines.get(timeout=bound)
        assert line is not None, "the runner driver exited"
        try:
            answer: dict[str, Any] = json.loads(line)
        except ValueError:
            raise AssertionError(f"the runner driver said: {line}") from None
        return answer

    def stop(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.terminate()
        self.process.wait(10)
        self._reader.join(10)
        assert self.process.stdout is not None
        self.process.stdout.close()


def thread_record(demo_url: str, thread_id: str) -> dict[str, Any]:
    """GET /agui/threads/{id} on the demo: the stored conversation, as the adapter saw it."""
    with urllib.request.urlopen(f"{demo_url}/agui/threads/{thread_id}", timeout=10) as response:
        record: dict[str, Any] = json.load(response)
    return record


def screenshot() -> None:
    """The docs' picture: a page the agent navigated, and a refund waiting for approval."""
    from playwright.sync_api import expect, sync_playwright

    out = ROOT / "docs" / "screenshots" / "copilotkit.png"
    with tempfile.TemporaryDirectory() as tmp, copilotkit_stack(Path(tmp) / "demo.db") as (_, runtime):
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            page = browser.new_page(base_url=runtime.url, viewport={"width": 1200, "height": 720}, locale="en-US")
            page.set_default_timeout(60_000)
            page.goto("/")
            for text, shown in [("go to settings", "I opened the settings"), ("toast: hello from CopilotKit", "Done.")]:
                page.get_by_test_id("copilot-chat-textarea").fill(text)
                page.get_by_test_id("copilot-send-button").click()
                expect(page.get_by_test_id("copilot-message-list")).to_contain_text(shown)
            page.get_by_test_id("copilot-chat-textarea").fill("refund order A100")
            page.get_by_test_id("copilot-send-button").click()
            expect(page.get_by_role("button", name="Approve")).to_be_visible()
            # The chat may stop scrolling before the card's buttons clear the input box that overlays its end.
            page.get_by_test_id("copilot-scroll-content").evaluate(
                "content => { for (let e = content; e; e = e.parentElement) e.scrollTop = e.scrollHeight; }"
            )
            page.screenshot(path=out)
            browser.close()
    print(out)


if __name__ == "__main__":
    screenshot()
