"""CopilotKit (react-core 1.74, runtime 1.75), unchanged, in front of the adapter: examples/copilotkit in Chromium.

The page's tools are CopilotKit's own hooks; the runtime reaches the demo over AG-UI (HttpAgent). Each test checks
what the person sees and what the adapter stored: the tool result reached the agent, and the reply reflects it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import copilotkitstack
import pytest
from browserkit import MISSING_PLAYWRIGHT
from copilotkitstack import Runtime, StackError, copilotkit_stack, thread_record

try:
    from playwright.sync_api import Browser, Locator, Page, expect
except ImportError:  # a failure in the fixtures, never a skip
    pass

ARTIFACTS = Path(__file__).parents[1] / "artifacts"

pytestmark = pytest.mark.slow


class Stack:
    def __init__(self, demo: str, runtime: Runtime) -> None:
        self.demo = demo
        self.runtime = runtime


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """The demo in pending mode and the CopilotKit runtime serving the page; missing packages fail with the fix."""
    try:
        with copilotkit_stack(tmp_path_factory.mktemp("copilotkit") / "demo.db") as (demo, runtime):
            yield Stack(demo, runtime)
    except StackError as error:
        pytest.fail(str(error), pytrace=False)


class Chat:
    """The example page, driven the way a person does: type, send, read, click."""

    def __init__(self, page: Page, demo: str) -> None:
        self.page = page
        self.demo = demo
        self.thread_ids: list[str] = []
        page.on("request", self._remember_thread)

    def _remember_thread(self, request: Any) -> None:
        if request.method == "POST" and request.url.endswith("/agent/default/run"):
            self.thread_ids.append(json.loads(request.post_data)["threadId"])

    @property
    def messages(self) -> Locator:
        return self.page.get_by_test_id("copilot-message-list")

    def say(self, text: str) -> None:
        self.page.get_by_test_id("copilot-chat-textarea").fill(text)
        self.page.get_by_test_id("copilot-send-button").click()

    def stored(self) -> list[dict[str, Any]]:
        """The thread's messages as the adapter stored them (one thread per page)."""
        assert len(set(self.thread_ids)) == 1, self.thread_ids
        messages: list[dict[str, Any]] = thread_record(self.demo, self.thread_ids[0])["messages"]
        return messages

    def results(self, tool: str) -> list[Any]:
        """What each call of `tool` got back, parsed, in the adapter's record."""
        messages = self.stored()
        ids = {c["id"] for m in messages for c in m.get("toolCalls") or [] if c["function"]["name"] == tool}
        return [_parsed(m["content"]) for m in messages if m["role"] == "tool" and m["toolCallId"] in ids]


def _parsed(content: str) -> Any:
    try:
        return json.loads(content)
    except ValueError:
        return content


@pytest.fixture
def chat(browser: Browser, stack: Stack, request: pytest.FixtureRequest) -> Iterator[Chat]:
    """A fresh page (so a fresh CopilotKit thread); the runtime's log and a screenshot if the test fails."""
    if "expect" not in globals():
        pytest.fail(MISSING_PLAYWRIGHT, pytrace=False)
    context = browser.new_context(base_url=stack.runtime.url, viewport={"width": 1280, "height": 900}, locale="en-US")
    page = context.new_page()
    page.set_default_timeout(30_000)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.goto("/")
    failed_before = request.session.testsfailed
    yield Chat(page, stack.demo)
    if request.session.testsfailed > failed_before:
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=ARTIFACTS / f"{request.node.name}.png", full_page=True)
        print("".join(stack.runtime.log))
    context.close()
    assert not errors, f"the page reported errors: {errors}"


@pytest.mark.needs_copilotkit
def test_a_frontend_tool_runs_in_the_page_and_its_result_reaches_the_agent(chat: Chat) -> None:
    chat.say("go to settings")
    expect(chat.messages).to_contain_text("I opened the settings page for you.")
    expect(chat.page.get_by_test_id("current-page")).to_have_text("settings")
    assert chat.results("navigate") == [{"opened": "settings"}]

    chat.say("go to nowhere")
    expect(chat.messages).to_contain_text("I could not open the nowhere page (no page called nowhere).")
    expect(chat.page.get_by_test_id("current-page")).to_have_text("settings")
    assert chat.results("navigate")[-1]["error"] == "no page called nowhere"


@pytest.mark.needs_copilotkit
def test_show_toast_runs_in_the_page(chat: Chat) -> None:
    chat.say("toast: hello from CopilotKit")
    expect(chat.page.get_by_test_id("toasts")).to_have_text("hello from CopilotKit")
    expect(chat.messages).to_contain_text("Done.")
    assert chat.results("show_toast") == [{"shown": True}]


@pytest.mark.parametrize(
    ("button", "answer", "reply"),
    [
        pytest.param("Confirm", {"confirmed": True}, "Confirmed: I will delete report.pdf now.", id="confirmed"),
        pytest.param("Decline", {"confirmed": False}, "Understood, I will not delete report.pdf.", id="declined"),
    ],
)
@pytest.mark.needs_copilotkit
def test_a_confirm_card_waits_for_the_person(chat: Chat, button: str, answer: dict[str, bool], reply: str) -> None:
    chat.say("confirm delete report.pdf")
    card = chat.page.get_by_test_id("confirm-card")
    expect(card).to_contain_text("Confirm: delete report.pdf?")
    expect(card.get_by_role("button", name=button)).to_be_enabled()
    assert chat.results("confirm_action") == []  # the run ended; nothing answered until the person does

    card.get_by_role("button", name=button).click()
    expect(chat.messages).to_contain_text(reply)
    assert chat.results("confirm_action") == [answer]


@pytest.mark.needs_copilotkit
def test_an_approved_refund_runs_once(chat: Chat) -> None:
    chat.say("refund order A100")
    card = chat.page.get_by_test_id("approval-card")
    expect(card).to_contain_text("Approve the call to refund_order?")
    expect(card).to_contain_text('"order_id": "A100"')
    assert chat.results("refund_order") == []

    card.get_by_role("button", name="Approve").click()
    expect(chat.messages).to_contain_text(re.compile(r"A100 was refunded", re.IGNORECASE))
    [refund] = chat.results("refund_order")
    assert refund["refunded"] == 59.0
    expect(chat.messages).to_contain_text(refund["reference"])


@pytest.mark.needs_copilotkit
def test_a_rejected_refund_does_not_run(chat: Chat) -> None:
    chat.say("refund order B200")
    card = chat.page.get_by_test_id("approval-card")
    card.get_by_role("button", name="Reject").click()
    expect(chat.messages).to_contain_text("did not refund order B200")
    [declined] = chat.results("refund_order")
    assert not (isinstance(declined, dict) and "refunded" in declined), declined


@pytest.mark.needs_copilotkit
def test_a_form_the_page_does_not_render_can_be_cancelled(chat: Chat) -> None:
    """CopilotKit has no JSON Schema form renderer; the example offers to cancel rather than leave the thread stuck."""
    chat.say("book a meeting room")
    card = chat.page.get_by_test_id("interrupt-card")
    card.get_by_role("button", name="Cancel").click()
    expect(chat.messages).to_contain_text("OK, no room was booked.")
    expect(card).to_have_count(0)


def test_a_missing_install_says_what_to_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(copilotkitstack, "EXAMPLE", tmp_path)
    with pytest.raises(StackError, match=re.escape("cd examples/copilotkit && npm ci")):
        copilotkitstack.ensure_build()
