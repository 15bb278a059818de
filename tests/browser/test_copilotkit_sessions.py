"""The CopilotKit example reloads into its thread: what survives a reload, through CopilotKit's own connect.

The page keeps its thread id in the URL and opens `<CopilotChat threadId>` on it; CopilotKit then asks the runtime to
connect, and the example's runner (examples/copilotkit/adapter-runner.mjs) answers from the adapter: the thread's
messages, its open approval, and the rest of a run still going. The agent is the demo's scripted agent, plus `Held`,
whose answer to "hold W H" waits after H words until the test releases it.

The runner's rule, stated as a property without a browser (a node process drives it as the runtime does): a connect
shows every message of the thread once and misses none, whichever event the page left after and whether the run was
still going when it came back.
"""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from agui import new_id
from browserkit import MISSING_PLAYWRIGHT
from copilotkitstack import RunnerDriver, Runtime, StackError, copilotkit_stack, thread_record
from hypothesis import given
from hypothesis import strategies as st
from served_demo import serve_app
from sessions_kit import BOUND, Held, answer
from starlette.applications import Starlette

from adapter import Adapter, create_app, mount
from adapter.backends import BackendItem, ModelRequest, ScriptedBackend
from adapter.stores import SQLiteStore
from examples.demo_agent import HELP, RULES, forms, tools

try:
    from playwright.sync_api import Browser, Locator, Page, expect
except ImportError:  # a failure in the fixtures, never a skip
    pass

ARTIFACTS = Path(__file__).parents[1] / "artifacts"
WORDS, HOLD = 12, 6
"""The held answer: 12 words, the run waiting after the 6th until the test releases it."""
BEFORE_HOLD = HOLD + 2
"""Events a page can see before the hold: RUN_STARTED, TEXT_MESSAGE_START and six deltas."""

pytestmark = [pytest.mark.slow, pytest.mark.needs_copilotkit]


class HeldOrScripted:
    """`Held` answers "hold W H"; the demo's scripted agent answers everything else."""

    def __init__(self, held: Held) -> None:
        self.held = held
        self.scripted = ScriptedBackend(RULES, fallback=HELP)

    async def stream(self, request: ModelRequest) -> AsyncIterator[BackendItem]:
        last = str(request.messages[-1].content) if request.messages else ""
        backend = self.held if last.startswith("hold") else self.scripted
        async for item in backend.stream(request):
            yield item


class Stack:
    def __init__(self, agent: str, runtime: Runtime, held: Held) -> None:
        self.agent = agent
        self.runtime = runtime
        self.held = held


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """The adapter (the demo's tools, `HeldOrScripted`, SQLite) and the CopilotKit runtime serving the page."""
    held = Held()
    db_path = tmp_path_factory.mktemp("copilotkit-sessions") / "turns.db"
    adapter = Adapter(HeldOrScripted(held), tools=tools, forms=forms, store=SQLiteStore(db_path))
    app = Starlette(routes=[mount("/agui", create_app(adapter))])
    try:
        with copilotkit_stack(db_path, app) as (agent, runtime):
            yield Stack(agent, runtime, held)
    except StackError as error:
        pytest.fail(str(error), pytrace=False)


class Chat:
    """The example page on one thread, driven the way a person does; `reload` is the browser's."""

    def __init__(self, page: Page, stack: Stack) -> None:
        self.page = page
        self.stack = stack
        page.wait_for_url(re.compile(r"[?&]thread=[\w-]+"))
        self.thread_id = page.url.split("thread=")[1]
        self.url = page.url
        self.run_ids: list[str] = []
        page.on("request", self._remember_run)

    def _remember_run(self, request: Any) -> None:
        if request.method == "POST" and request.url.endswith("/agent/default/run"):
            self.run_ids.append(json.loads(request.post_data)["runId"])

    @property
    def messages(self) -> Locator:
        return self.page.get_by_test_id("copilot-message-list")

    @property
    def user_messages(self) -> Locator:
        return self.page.get_by_test_id("copilot-user-message")

    @property
    def replies(self) -> Locator:
        """The assistant messages that say something (one that only calls tools shows no text)."""
        return self.page.get_by_test_id("copilot-assistant-message").filter(has_text=re.compile(r"\S"))

    def say(self, text: str) -> None:
        self.page.get_by_test_id("copilot-chat-textarea").fill(text)
        self.page.get_by_test_id("copilot-send-button").click()

    def reload(self) -> None:
        self.page.reload()
        assert self.page.url == self.url

    def stored(self) -> list[dict[str, Any]]:
        """The thread's messages as the adapter stored them."""
        messages: list[dict[str, Any]] = thread_record(self.stack.agent, self.thread_id)["messages"]
        return messages

    def results(self, tool: str) -> list[str]:
        """The content of each tool message that answers a call of `tool`, in the adapter's record."""
        messages = self.stored()
        ids = {c["id"] for m in messages for c in m.get("toolCalls") or [] if c["function"]["name"] == tool}
        return [m["content"] for m in messages if m["role"] == "tool" and m["toolCallId"] in ids]


@pytest.fixture
def open_page(browser: Browser, stack: Stack, request: pytest.FixtureRequest) -> Iterator[Any]:
    """Open the page at a path on the stack's runtime (a fresh context each); fails on any page error."""
    if "expect" not in globals():
        pytest.fail(MISSING_PLAYWRIGHT, pytrace=False)
    pages: list[Page] = []
    errors: list[str] = []

    def open_at(path: str = "/", runtime: Runtime | None = None) -> Page:
        base = (runtime or stack.runtime).url
        context = browser.new_context(base_url=base, viewport={"width": 1280, "height": 900}, locale="en-US")
        page = context.new_page()
        page.set_default_timeout(30_000)
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
        page.goto(path)
        pages.append(page)
        return page

    failed_before = request.session.testsfailed
    yield open_at
    if request.session.testsfailed > failed_before:
        ARTIFACTS.mkdir(exist_ok=True)
        for index, page in enumerate(pages):
            page.screenshot(path=ARTIFACTS / f"{request.node.name}-{index}.png", full_page=True)
        print("".join(stack.runtime.log))
    for page in pages:
        page.context.close()
    assert not errors, f"the page reported errors: {errors}"


@pytest.fixture
def chat(open_page: Any, stack: Stack) -> Chat:
    """A fresh page, so a new thread."""
    return Chat(open_page(), stack)


def test_a_new_page_puts_a_new_thread_in_the_url_and_a_reload_shows_its_conversation(chat: Chat) -> None:
    chat.say("look up order A100")
    expect(chat.replies).to_have_text(["Order A100 (keyboard, 59.00) is delivered."])

    chat.reload()
    expect(chat.user_messages).to_have_text(["look up order A100"])
    expect(chat.replies).to_have_text(["Order A100 (keyboard, 59.00) is delivered."])

    chat.say("go to settings")
    expect(chat.replies.last).to_have_text("I opened the settings page for you.")
    expect(chat.page.get_by_test_id("current-page")).to_have_text("settings")
    assert [m["content"] for m in chat.stored() if m["role"] == "user"] == ["look up order A100", "go to settings"]


def test_an_open_approval_is_drawn_again_after_a_reload_and_runs_once(chat: Chat) -> None:
    chat.say("refund order A100")
    expect(chat.page.get_by_test_id("approval-card")).to_contain_text("Approve the call to refund_order?")

    chat.reload()
    card = chat.page.get_by_test_id("approval-card")
    expect(card).to_contain_text("Approve the call to refund_order?")
    expect(card).to_contain_text('"order_id": "A100"')
    expect(chat.user_messages).to_have_text(["refund order A100"])
    assert chat.results("refund_order") == []

    card.get_by_role("button", name="Approve").click()
    expect(chat.messages).to_contain_text(re.compile(r"A100 was refunded", re.IGNORECASE))
    expect(card).to_have_count(0)
    [refund] = chat.results("refund_order")
    assert '"refunded": 59.0' in refund


def test_a_confirm_card_is_drawn_again_after_a_reload(chat: Chat) -> None:
    """useHumanInTheLoop: CopilotKit runs a waiting call's handler again once it connected (RunHandler.connectAgent)."""
    chat.say("confirm delete report.pdf")
    expect(chat.page.get_by_test_id("confirm-card").get_by_role("button", name="Confirm")).to_be_enabled()

    chat.reload()
    card = chat.page.get_by_test_id("confirm-card")
    expect(card).to_contain_text("Confirm: delete report.pdf?")
    card.get_by_role("button", name="Decline").click()
    expect(chat.messages).to_contain_text("Understood, I will not delete report.pdf.")
    assert chat.results("confirm_action") == ['{"confirmed":false}']


def test_another_runtime_shows_the_thread_from_the_adapter(open_page: Any, stack: Stack) -> None:
    """The runtime keeps no conversation: a second runtime process (a restart, a replica) opens the same thread."""
    chat = Chat(open_page(), stack)
    chat.say("refund order B200")
    expect(chat.page.get_by_test_id("approval-card")).to_be_visible()

    other = Runtime(f"{stack.agent}/agui/")
    try:
        elsewhere = open_page(f"/?thread={chat.thread_id}", runtime=other)
        expect(elsewhere.get_by_test_id("copilot-user-message")).to_have_text(["refund order B200"])
        elsewhere.get_by_test_id("approval-card").get_by_role("button", name="Reject").click()
        expect(elsewhere.get_by_test_id("copilot-message-list")).to_contain_text("did not refund order B200")
    finally:
        other.stop()
    [declined] = chat.results("refund_order")
    assert "refunded" not in declined


@pytest.mark.parametrize(
    "live",
    [
        pytest.param(True, id="the-run-still-going"),
        pytest.param(False, id="the-run-ended-while-no-page-was-open"),
    ],
)
def test_a_page_that_comes_back_mid_answer_gets_the_whole_answer_once(chat: Chat, stack: Stack, live: bool) -> None:
    """The page leaves after the 6th word; it comes back while the run goes on, or after it ended unseen."""
    streams = stack.held.streams
    chat.say(f"hold {WORDS} {HOLD}")
    try:
        expect(chat.replies).to_have_text([answer(HOLD).strip()])
        chat.page.goto("about:blank")
        if not live:
            stack.held.release(chat.thread_id)
            read_to_the_end(stack, chat)
        chat.page.goto(chat.url)
        expect(chat.user_messages).to_have_text([f"hold {WORDS} {HOLD}"])
        expect(chat.replies).to_have_text([re.compile("^" + answer(HOLD if live else WORDS).strip())])
    finally:
        stack.held.release(chat.thread_id)
    expect(chat.replies).to_have_text([answer(WORDS).strip()])
    assert stack.held.streams == streams + 1  # reattached, never run again
    chat.say("look up order B200")
    expect(chat.replies.last).to_have_text("Order B200 (monitor, 189.00) is shipped.")
    assert [m.get("content") for m in chat.stored() if m["role"] == "assistant"][0] == answer(WORDS)


def read_to_the_end(stack: Stack, chat: Chat) -> None:
    """Wait until the page's one run ended: the adapter's stream of it closes after its terminal event."""
    [run_id] = chat.run_ids
    assert journal(stack, chat.thread_id, run_id)[-1]["type"] == "RUN_FINISHED"


def test_the_stop_button_stops_the_run_in_the_adapter(chat: Chat, stack: Stack) -> None:
    """CopilotKit's stop reaches the runner, which asks the adapter to stop the run (leaving it would not stop it)."""
    chat.say(f"hold {WORDS} {HOLD}")
    try:
        expect(chat.replies).to_have_text([answer(HOLD).strip()])
        chat.page.get_by_test_id("copilot-send-button").click()
        [run_id] = chat.run_ids
        events = journal(stack, chat.thread_id, run_id)
    finally:
        stack.held.release(chat.thread_id)
    assert events[-1]["type"] == "RUN_FINISHED"
    assert events[-1]["outcome"] == {"type": "cancelled"}
    assert [m.get("content") for m in chat.stored() if m["role"] == "assistant"] == [answer(HOLD)]

    chat.reload()
    expect(chat.replies).to_have_text([answer(HOLD).strip()])
    chat.say("look up order A100")
    expect(chat.replies.last).to_have_text("Order A100 (keyboard, 59.00) is delivered.")


def journal(stack: Stack, thread_id: str, run_id: str) -> list[dict[str, Any]]:
    """The run's events as the adapter journaled them, read once the run ended (the read waits for its end)."""
    url = f"{stack.agent}/agui/threads/{thread_id}/runs/{run_id}/events"
    with urllib.request.urlopen(url, timeout=BOUND) as response:
        body = response.read().decode()
    return [json.loads(line[6:]) for line in body.split("\n") if line.startswith("data: ")]


class Driven:
    def __init__(self, agent: str, driver: RunnerDriver, held: Held) -> None:
        self.agent = agent
        self.driver = driver
        self.held = held


@pytest.fixture(scope="module")
def driven(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Driven]:
    """`Held` behind an adapter, and the runner in a node process in front of it."""
    held = Held()
    store = SQLiteStore(tmp_path_factory.mktemp("copilotkit-runner") / "turns.db")
    with serve_app(Starlette(routes=[mount("/agui", create_app(Adapter(held, store=store)))])) as agent:
        driver = RunnerDriver(f"{agent}/agui/")
        yield Driven(agent, driver, held)
        driver.stop()


@given(cut=st.one_of(st.none(), st.integers(min_value=1, max_value=BEFORE_HOLD)), live=st.booleans())
def test_a_connect_shows_every_message_once_and_none_missing(driven: Driven, cut: int | None, live: bool) -> None:
    """The page left after its `cut`-th event (None: it saw the run end); the run ended before the connect or not."""
    thread_id, run_id = new_id("thread"), new_id("run")
    streams = driven.held.streams
    if cut is None:
        driven.held.release(thread_id)
    try:
        driven.driver.send(
            {"op": "run", "threadId": thread_id, "runId": run_id, "text": f"hold {WORDS} {HOLD}", "take": cut}
        )
        assert len(driven.driver.receive(BOUND)["events"]) == cut or cut is None
        if cut is not None and not live:
            driven.held.release(thread_id)
            with urllib.request.urlopen(f"{driven.agent}/agui/threads/{thread_id}/runs/{run_id}/events", timeout=BOUND):
                pass  # the read ends with the run
        driven.driver.send({"op": "connect", "threadId": thread_id})
        events = []
        while "event" in (said := driven.driver.receive(BOUND)):
            events.append(said["event"])
            if said["event"].get("delta") == f"w{HOLD - 1} ":
                driven.held.release(thread_id)  # the connect follows the run by now
        assert said == {"done": True}
    finally:
        driven.held.release(thread_id)

    [started, snapshot, *body, end] = events
    assert (started["type"], snapshot["type"], end["type"]) == ("RUN_STARTED", "MESSAGES_SNAPSHOT", "RUN_FINISHED")
    texts = {m["id"]: m.get("content", "") for m in snapshot["messages"]}
    for event in body:
        assert event["type"] not in {"RUN_STARTED", "RUN_FINISHED", "RUN_ERROR"}, event
        if event["type"] == "TEXT_MESSAGE_START":
            assert event["messageId"] not in texts, event  # a message the page shows already would get its text twice
            texts[event["messageId"]] = ""
        elif event["type"] == "TEXT_MESSAGE_CONTENT":
            texts[event["messageId"]] += event["delta"]
    assert list(texts.values()) == [f"hold {WORDS} {HOLD}", answer(WORDS)]
    assert driven.held.streams == streams + 1
