"""The demo page survives a reload (issue 31): it comes back to the run that was streaming, on any replica.

A reload lands in the middle of the demo agent's long answer (`examples.demo_agent.LONG_ANSWER`, streamed word by
word with a pause): the page draws the thread from one read, then reads the run's events after the last id it had
shown, so the whole answer appears once. The same holds when the reload reaches the other of two replicas on one
PostgreSQL database, behind one origin (a TCP proxy switched between the load and the reload). The rule the page
follows to put the conversation together again (`resumed`, and `applyEvent` with the ids the store holds) is
checked in Node over generated runs, cut at every event, whether the run was still going or had been saved.
Besides: a reload while an approval waits, the Stop button, and the list of conversations.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from browserkit import DemoServer
from hypothesis import given
from hypothesis import strategies as st
from pg import fresh_schema_dsn
from playwright.sync_api import Browser, Dialog, Locator, Page, expect
from replica_process import free_port, wait_until
from tcp_proxy import Proxy

from adapter.client import parse_sse
from examples.demo_agent import LONG_ANSWER

ROOT = Path(__file__).resolve().parents[2]
MESSAGES_JS = ROOT / "examples" / "web" / "messages.js"
BOUND = 120.0  # seconds a replica may take to start or stop on a loaded machine
WHOLE = 60_000  # milliseconds the long answer may take to stream whole on a loaded machine (about twelve seconds idle)


def say(page: Page, text: str) -> None:
    page.fill("#message", text)
    page.click("#send")


def replies(page: Page) -> Locator:
    return page.locator(".msg.assistant:not(.thinking) .bubble")  # while a run goes on, the dots come last


def thread_id(page: Page) -> str:
    return page.inner_text("#thread")


@dataclass
class Stream:
    """One event stream the page read: its URL, the `Last-Event-ID` it asked with (None for a run it started), and
    every byte it received."""

    url: str
    after: int | None
    body: bytearray = field(default_factory=bytearray)

    def ids(self) -> list[int]:
        return [int(frame.id) for frame in parse_sse(bytes(self.body)).frames if frame.id is not None]


RECORD_STREAMS = """
(() => {
  // Each event stream's bytes are kept in sessionStorage before the page can read them: what the page received is
  // recorded by then, a reload does not lose it, and a chunk the page never read is never taken for one it read.
  const KEY = "test:streams";
  const kept = () => JSON.parse(sessionStorage.getItem(KEY) ?? "[]");
  const keep = (streams) => sessionStorage.setItem(KEY, JSON.stringify(streams));
  const fetched = window.fetch;
  window.fetch = async (input, init) => {
    const response = await fetched(input, init);
    const url = new URL(input instanceof Request ? input.url : String(input), location.href).href;
    if (!(url.endsWith("/agui/") || url.includes("/runs/")) || response.status !== 200 || !response.body) {
      return response;
    }
    const asked = new Headers(init?.headers ?? (input instanceof Request ? input.headers : undefined));
    const after = asked.get("last-event-id");
    const streams = kept();
    const index = streams.push({ url, after: after === null ? null : Number(after), body: "" }) - 1;
    keep(streams);
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    const body = new ReadableStream({
      async pull(controller) {
        const { value, done } = await reader.read();
        if (done) return controller.close();
        const now = kept();
        now[index].body += decoder.decode(value, { stream: true });
        keep(now);
        controller.enqueue(value);
      },
      cancel: (reason) => reader.cancel(reason),
    });
    return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
  };
})();
"""


class Received:
    """The event streams the page reads from now on (`POST /agui/` and `GET .../runs/{runId}/events`) as the page
    received them: the page's `fetch` keeps each chunk in sessionStorage before the page reads it (`RECORD_STREAMS`).
    A recorder outside the page (the DevTools protocol) could lose a stream's last chunk at a reload, and the page
    then seemed to ask after an event it never received."""

    def __init__(self, page: Page) -> None:
        self.page = page
        page.add_init_script(RECORD_STREAMS)
        page.reload()  # the page loaded before the recorder: it starts recording from a load of its own

    @property
    def streams(self) -> list[Stream]:
        kept = json.loads(self.page.evaluate("sessionStorage.getItem('test:streams') ?? '[]'"))
        return [Stream(each["url"], each["after"], bytearray(each["body"].encode())) for each in kept]


def mid_answer(page: Page) -> None:
    """Ask for the long answer and wait until some of it, not all, is on the page."""
    say(page, "tell me a long story")
    expect(replies(page).last).to_contain_text("(2) The parcel")
    assert replies(page).last.text_content() != LONG_ANSWER, "the answer ended before the reload"


def answered_once(page: Page) -> None:
    """The long answer is on the page whole, once, and the run is over."""
    expect(replies(page).last).to_have_text(LONG_ANSWER, timeout=WHOLE)
    expect(page.locator("#status")).to_have_text("idle")
    assert replies(page).last.text_content() == LONG_ANSWER
    assert page.locator(".note-error").count() == 0


def continued(wire: Received) -> None:
    """Every stream the page read is numbered on from where it asked; it never asked after an id it had not
    received; the last one came back mid-run and went on to the end; the run's journal is numbered 1, 2, 3, ...
    with no gap and holds the long answer once."""
    started, *back = wire.streams
    assert started.after is None, "the page started the run, then came back to it"
    assert back, "the page started the run, then came back to it"
    received = 0
    for stream in wire.streams:
        first = (stream.after or 0) + 1
        assert stream.after is None or stream.after <= received, "asked after an event it never received"
        assert stream.ids() == list(range(first, first + len(stream.ids())))
        received = max([received, *stream.ids()])
    journal = parse_sse(httpx.get(back[-1].url, params={"after": 0}, timeout=30).content)
    total = len(journal.frames)
    assert [frame.id for frame in journal.frames] == [str(seq) for seq in range(1, total + 1)]
    assert "".join(e.get("delta", "") for e in journal.events if e["type"] == "TEXT_MESSAGE_CONTENT") == LONG_ANSWER
    assert journal.events[-1]["type"] == "RUN_FINISHED"
    assert 0 < (back[-1].after or 0) < total, "the reload came after the run had ended"
    assert back[-1].ids()[-1] == total


def test_a_reload_in_the_middle_of_a_long_answer_shows_the_rest_of_it_once(page: Page) -> None:
    wire = Received(page)
    mid_answer(page)

    page.reload()

    answered_once(page)
    continued(wire)
    streams = len(wire.streams)
    page.reload(wait_until="networkidle")  # the run is over: the stored thread holds it whole, nothing to come back to
    expect(replies(page).last).to_have_text(LONG_ANSWER)
    assert len(wire.streams) == streams


def test_a_reload_while_an_approval_waits_draws_it_again_from_one_read(page: Page, demo: DemoServer) -> None:
    say(page, "refund order A100")
    approval = page.locator('.tool-call[data-tool-name="refund_order"] [data-interrupt]')
    expect(approval).to_contain_text("Approve the call to refund_order?")
    reads: list[str] = []
    page.on("request", lambda r: reads.append(r.url) if "/agui/threads" in r.url and r.method == "GET" else None)

    page.reload()

    expect(approval).to_contain_text("Approve the call to refund_order?")
    expect(page.locator("#status")).to_have_text("waiting for you")
    assert reads == [f"{demo.url}/agui/threads/{thread_id(page)}"]  # one read, and no run to come back to
    approval.get_by_role("button", name="Approve").click()
    expect(replies(page).last).to_contain_text("Done: order A100 was refunded.")
    assert demo.thread_record(thread_id(page))["interrupts"] == []


def test_stop_ends_the_answer_where_it_is_and_the_thread_keeps_what_was_said(page: Page, demo: DemoServer) -> None:
    mid_answer(page)

    page.click("#stop")

    expect(page.locator(".note-info").last).to_contain_text("stopped before it finished (cancelled)")
    expect(page.locator("#stop")).to_be_hidden()
    shown = replies(page).last.text_content() or ""
    assert LONG_ANSWER.startswith(shown)
    assert 0 < len(shown) < len(LONG_ANSWER)
    assert demo.thread_record(thread_id(page))["messages"][-1]["content"] == shown


def test_a_reload_after_stop_still_says_the_run_stopped(page: Page) -> None:
    mid_answer(page)
    page.click("#stop")
    stopped = page.locator(".note-info")
    expect(stopped).to_have_text(["The agent stopped before it finished (cancelled)."])
    shown = replies(page).last.text_content()

    page.reload()

    expect(replies(page).last).to_have_text(shown or "")
    expect(stopped).to_have_text(["The agent stopped before it finished (cancelled)."])  # once, and after the answer
    assert page.locator(".msg").last.get_attribute("class") == "msg note note-info"


CJK = re.compile(r"[\u3000-\u30ff\u3400-\u9fff\uff00-\uffef]")


def test_no_label_on_the_page_is_chinese_only(page: Page) -> None:
    """Every control of the page says what it does in Chinese and English ("停止 Stop"): a label with Chinese in it
    has an English word too, the Chats tab's and its dialogs' included. Thread titles and the suggestion chips are
    what people say, not labels."""
    say(page, "refund order A100")
    expect(page.locator("#status")).to_have_text("waiting for you")
    dialogs: list[str] = []

    def read_and_dismiss(dialog: Dialog) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", read_and_dismiss)

    page.click('.tabs [data-tab="threads"]')
    row = page.locator("ul.threads li[data-thread-id]").first
    expect(row.locator(".status")).to_be_visible()  # the approval that waits
    row.locator(".thread-actions button").first.click()
    row.locator(".thread-actions button").last.click()
    expect(row).to_be_visible()  # both dismissed: nothing renamed or deleted

    controls = page.locator("button:not(.thread-open):not(.suggestions button), h1, h2, h3, label, .status, .hint")
    labels = [" ".join(text.split()) for text in controls.evaluate_all("all => all.map(e => e.textContent)")]
    labels += dialogs
    assert [label for label in labels if CJK.search(label) and not re.search(r"[A-Za-z]{2,}", label)] == []
    assert len(dialogs) == 2, labels
    assert {"重命名 Rename", "删除 Delete", "会话 Conversations"} <= set(labels), labels


def test_the_conversation_list_opens_renames_and_deletes_threads(page: Page, demo: DemoServer) -> None:
    say(page, "look up order A100")
    expect(replies(page).last).to_have_text("Order A100 (keyboard, 59.00) is delivered.")
    first = thread_id(page)
    with page.expect_navigation():
        page.click("#new-thread")
    say(page, "look up order B200")
    expect(replies(page).last).to_have_text("Order B200 (monitor, 189.00) is shipped.")

    page.click('.tabs [data-tab="threads"]')
    rows = page.locator("ul.threads li[data-thread-id]")
    expect(rows.first).to_have_attribute("aria-current", "true")  # newest first: the one just used
    row = page.locator(f'ul.threads li[data-thread-id="{first}"]')
    expect(row.locator(".thread-open")).to_have_text("look up order A100")  # titled by its first message
    page.once("dialog", lambda dialog: dialog.accept("订单 A100"))
    row.get_by_role("button", name="重命名").click()
    expect(row.locator(".thread-open")).to_have_text("订单 A100")

    with page.expect_navigation():
        row.locator(".thread-open").click()
    expect(page.locator("#thread")).to_have_text(first)
    expect(replies(page).last).to_have_text("Order A100 (keyboard, 59.00) is delivered.")

    page.click('.tabs [data-tab="threads"]')
    page.once("dialog", lambda dialog: dialog.accept())
    with page.expect_navigation():
        row.get_by_role("button", name="删除").click()
    expect(page.locator("#thread")).not_to_have_text(first)
    assert httpx.get(f"{demo.url}/agui/threads/{first}", timeout=10).status_code == 404


# ---- two replicas on PostgreSQL behind one origin ----------------------------------------------------------------


class Switch(Proxy):
    """A proxy whose target a test moves from one replica to another; it counts the connections each one got."""

    def __init__(self, port: int) -> None:
        super().__init__("127.0.0.1", port)
        self.served: Counter[int] = Counter()

    async def _link(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.served[self.target[1]] += 1
        await super()._link(reader, writer)


class Origin:
    """One origin (127.0.0.1:port) for the page in front of the replicas: a `Switch` on an event loop of its own."""

    def __init__(self, port: int) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True, name="origin")
        self.thread.start()
        self.proxy = Switch(port)
        self.url = f"http://127.0.0.1:{self.call(self.proxy.start())}"

    def call(self, work: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(work, self.loop).result(BOUND)

    def switch(self, port: int) -> None:
        """Send every connection from now on to `port`, and cut those open (a browser would reuse them)."""

        async def move() -> None:
            self.proxy.target = ("127.0.0.1", port)
            self.proxy.drop()

        self.call(move())

    def close(self) -> None:
        async def shut() -> None:
            await self.proxy.close()
            links = asyncio.all_tasks() - {asyncio.current_task()}
            for link in links:
                link.cancel()
            await asyncio.gather(*links, return_exceptions=True)

        self.call(shut())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(BOUND)
        self.loop.close()


@contextlib.contextmanager
def demo_replicas(dsn: str, count: int) -> Iterator[list[int]]:
    """`python -m examples.demo --db <dsn>` in `count` processes, each on a free port; their ports, once healthy."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    ports = [free_port() for _ in range(count)]
    processes = [
        subprocess.Popen([sys.executable, "-m", "examples.demo", "--port", str(p), "--db", dsn], cwd=ROOT, env=env)
        for p in ports
    ]
    try:
        for port, process in zip(ports, processes, strict=True):

            def healthy(port: int = port, process: subprocess.Popen[bytes] = process) -> bool:
                assert process.poll() is None, f"the replica on port {port} exited"
                try:
                    return httpx.get(f"http://127.0.0.1:{port}/agui/health", timeout=5).status_code == 200
                except httpx.TransportError:
                    return False

            wait_until(healthy, f"the replica on port {port}", BOUND)
        yield ports
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(BOUND)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(BOUND)


@pytest.mark.postgres
@pytest.mark.slow
def test_a_reload_that_reaches_the_other_replica_shows_the_rest_of_the_answer_once(browser: Browser) -> None:
    with demo_replicas(fresh_schema_dsn(), 2) as (first, second):
        origin = Origin(first)
        context = browser.new_context(base_url=origin.url, locale="en-US")
        try:
            page = context.new_page()
            page.set_default_timeout(10_000)
            errors: list[str] = []
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.goto("/")
            wire = Received(page)
            mid_answer(page)
            before = origin.proxy.served[second]

            origin.switch(second)
            page.reload()

            answered_once(page)
            continued(wire)
            assert origin.proxy.served[second] > before == 0  # the reload and what followed reached the other one
            assert not errors, f"the page threw: {errors}"
        finally:
            context.close()
            origin.close()


# ---- the rule, in Node: a reload at any event shows what the page would have shown without it -------------------

NODE_SCRIPT = """
import { createInterface } from "node:readline";
import { applyEvent, resumed } from %s;
const fold = (messages, events, whole) => events.reduce((m, e) => applyEvent(m, e, whole), messages);
for await (const line of createInterface({ input: process.stdin })) {
  const { before, events, stored, cut } = JSON.parse(line);
  const all = fold(structuredClone(before), events);
  const seen = JSON.parse(JSON.stringify(fold(structuredClone(before), events.slice(0, cut))));  // as kept
  const after = fold(resumed(stored, seen), events.slice(cut), new Set(stored.map((m) => m.id)));
  process.stdout.write(JSON.stringify({ all, after }) + "\\n");
}
"""
TEXTS = st.text(alphabet="ab (1).", max_size=4)
Message = dict[str, Any]


class Script:
    """A run's events, written with the messages they leave (`final`): what the page shows at the run's end.

    Each move takes its number `n`, which names what it makes (`m3`, `c3`, `r3`).
    """

    def __init__(self, draw: st.DrawFn, before: list[Message]) -> None:
        self.draw = draw
        self.final = copy.deepcopy(before)
        self.events: list[dict[str, Any]] = []
        self.last_text: Message | None = None

    def text(self, n: int) -> None:
        """An assistant message streamed in pieces, as START, CONTENT..., END or as CHUNKs."""
        chunks = self.draw(st.lists(TEXTS, min_size=1, max_size=4))
        self.last_text = {"id": f"m{n}", "role": "assistant", "content": "".join(chunks)}
        self.final.append(self.last_text)
        if self.draw(st.booleans()):
            self.events.append({"type": "TEXT_MESSAGE_START", "messageId": f"m{n}", "role": "assistant"})
            self.events += [{"type": "TEXT_MESSAGE_CONTENT", "messageId": f"m{n}", "delta": c} for c in chunks]
            self.events.append({"type": "TEXT_MESSAGE_END", "messageId": f"m{n}"})
        else:
            self.events += [{"type": "TEXT_MESSAGE_CHUNK", "messageId": f"m{n}", "delta": c} for c in chunks]

    def call(self, n: int) -> None:
        """A tool call with its arguments in pieces, in the last text's message or a new one; perhaps its result."""
        parent = self.last_text if self.last_text is not None and self.draw(st.booleans()) else None
        if parent is None:
            parent = {"id": f"m{n}", "role": "assistant"}
            self.final.append(parent)
        chunks = self.draw(st.lists(TEXTS, max_size=3))
        function = {"name": "lookup", "arguments": "".join(chunks)}
        parent.setdefault("toolCalls", []).append({"id": f"c{n}", "type": "function", "function": function})
        start = {"toolCallId": f"c{n}", "toolCallName": "lookup", "parentMessageId": parent["id"]}
        self.events.append({"type": "TOOL_CALL_START", **start})
        self.events += [{"type": "TOOL_CALL_ARGS", "toolCallId": f"c{n}", "delta": c} for c in chunks]
        self.events.append({"type": "TOOL_CALL_END", "toolCallId": f"c{n}"})
        if self.draw(st.booleans()):
            content = self.draw(TEXTS)
            self.final.append({"id": f"r{n}", "role": "tool", "toolCallId": f"c{n}", "content": content})
            self.events.append(
                {"type": "TOOL_CALL_RESULT", "messageId": f"r{n}", "toolCallId": f"c{n}", "content": content}
            )

    def card(self, n: int) -> None:
        """A form card, new or changed (a card's status moves while runs go on)."""
        card_id, status = self.draw(st.sampled_from(["a0", "a1"])), self.draw(st.sampled_from(["PENDING", "SUBMITTED"]))
        card = {"id": card_id, "role": "activity", "activityType": "agent_form", "content": {"status": status}}
        held = next((m for m in self.final if m["id"] == card_id), None)
        if held is None:
            self.final.append(card)
        else:
            held.update(card)
        self.events.append({"type": "ACTIVITY_SNAPSHOT", "messageId": card_id, **card})

    def snapshot(self, n: int) -> None:
        """The whole conversation so far, as a resume's run restates it."""
        self.events.append({"type": "MESSAGES_SNAPSHOT", "messages": copy.deepcopy(self.final)})


@st.composite
def runs(draw: st.DrawFn) -> dict[str, Any]:
    """A conversation (its last message the user's, which the run answers), the run's events, the messages they
    leave (`final`), and what the store holds when the page reads the thread after a reload at event `cut`."""
    roles = draw(st.lists(st.sampled_from(["user", "assistant"]), max_size=3))
    earlier = [{"id": f"p{i}", "role": role, "content": draw(TEXTS)} for i, role in enumerate(roles)]
    before = [*earlier, {"id": "u", "role": "user", "content": "tell me"}]
    script = Script(draw, before)
    for n in range(draw(st.integers(1, 6))):
        move = draw(st.sampled_from(["text", "call", "card", "snapshot"]))
        getattr(script, move)(n)
    stored = draw(st.sampled_from([script.final, earlier, before]))  # saved, going, or going with its question kept
    cut = draw(st.integers(0, len(script.events)))
    return {"before": before, "events": script.events, "final": script.final, "stored": stored, "cut": cut}


@pytest.fixture(scope="module")
def node_messages() -> Iterator[subprocess.Popen[str]]:
    """The page's messages.js in one Node process: a generated run in, on one line; what the page shows out."""
    node = shutil.which("node")
    assert node is not None
    command = [node, "--input-type=module", "-e", NODE_SCRIPT % json.dumps(MESSAGES_JS.as_uri())]
    with subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as process:
        yield process
        assert process.stdin is not None
        process.stdin.close()


@pytest.mark.needs_node
@given(run=runs())
def test_a_reload_at_any_event_shows_what_the_page_would_have_shown_without_it(
    node_messages: subprocess.Popen[str], run: dict[str, Any]
) -> None:
    assert node_messages.stdin is not None
    assert node_messages.stdout is not None
    final = run.pop("final")
    node_messages.stdin.write(json.dumps(run) + "\n")
    node_messages.stdin.flush()
    shown = json.loads(node_messages.stdout.readline())

    assert shown["all"] == final
    assert shown["after"] == final
