"""Take the README's screenshots of the demo page: `python tests/browser/screenshots.py` (writes docs/screenshots/).

The same server and browser as the tests. Chinese labels need a CJK font: .ci/run installs fonts-wqy-microhei.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from browserkit import CHROMIUM_ARGS, DemoServer  # noqa: E402 - needs ROOT on the path first
from externals import CHROMIUM  # noqa: E402
from playwright.sync_api import Page, expect, sync_playwright  # noqa: E402

OUT = ROOT / "docs" / "screenshots"


def say(page: Page, text: str) -> None:
    page.fill("#message", text)
    page.click("#send")


def approval(page: Page) -> None:
    say(page, "go to settings")
    expect(page.locator(".msg.assistant .bubble").last).to_contain_text("I opened the settings page")
    say(page, "refund order A100")
    expect(page.get_by_role("button", name="Approve")).to_be_visible()


def form(page: Page) -> None:
    say(page, "create a high priority login incident ticket")
    card = page.locator('.form-card[data-form-key="support_ticket_details"]')
    card.get_by_label("受影响系统").fill("统一登录系统")
    card.get_by_role("button", name="Submit").click()
    expect(card.locator(".field-error").last).to_have_text("This field is required.")


def form_assist(page: Page) -> None:
    say(page, "申请两台云服务器，地域选北京")
    expect(page.get_by_test_id("draft-version")).to_have_text("v2")
    say(page, "用途：模型训练")
    expect(page.get_by_test_id("draft-version")).to_have_text("v3")
    page.fill("#draft-quantity", "3")
    page.press("#draft-quantity", "Tab")
    page.evaluate("document.activeElement.blur()")
    expect(page.get_by_test_id("draft-version")).to_have_text("v4")


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as playwright:
        server = DemoServer(Path(tmp) / "demo.db")
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            for name, scene in [("chat-approval", approval), ("form", form), ("form-assist", form_assist)]:
                context = browser.new_context(base_url=server.url, viewport={"width": 1200, "height": 760})
                page = context.new_page()
                page.goto("/")
                scene(page)
                page.wait_for_timeout(1300)  # let the "filled by the agent" highlight fade
                page.screenshot(path=OUT / f"{name}.png")
                context.close()
                print(OUT / f"{name}.png")
        finally:
            browser.close()
            server.stop()


if __name__ == "__main__":
    main()
