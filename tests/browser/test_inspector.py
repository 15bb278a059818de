"""`create_app(..., inspector=True)`: the agui-inspector dev UI, served by the sub-app and pointed at it."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from browserkit import CHROMIUM_ARGS
from externals import CHROMIUM, missing_chromium
from playwright.sync_api import Page, expect, sync_playwright
from served_demo import serve_demo
from starlette.applications import Starlette
from starlette.routing import Mount

from adapter import Adapter, create_app
from adapter.backends import ScriptedBackend

ARTIFACTS = Path(__file__).parent.parent / "artifacts"


def app_at(mount: str, *, inspector: bool = False) -> Starlette:
    return Starlette(routes=[Mount(mount, app=create_app(Adapter(ScriptedBackend()), inspector=inspector))])


async def get(app: Starlette, path: str) -> httpx.Response:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://test") as client:
        return await client.get(path)


@pytest.mark.parametrize("mount", ["/agui", "/api/v1/agent"])
async def test_the_inspector_is_pointed_at_the_sub_app_wherever_it_is_mounted(mount: str) -> None:
    app = app_at(mount, inspector=True)

    page = await get(app, f"{mount}/inspector/")
    config = await get(app, f"{mount}/inspector/config.json")
    bare = await get(app, f"{mount}/inspector")

    assert page.status_code == 200
    assert '<div id="root">' in page.text
    assert config.json()["agents"] == [{"id": "agui-adapter", "url": f"{mount}/", "name": "agui-adapter"}]
    assert (bare.status_code, bare.headers["location"]) == (307, f"{mount}/inspector/")


async def test_the_inspector_is_off_by_default() -> None:
    response = await get(app_at("/agui"), "/agui/inspector/")

    assert response.status_code == 404


def test_without_the_package_the_option_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "agui_inspector", None)

    with pytest.raises(ImportError, match=r"pip install 'agui-adapter\[inspector\]'"):
        create_app(Adapter(ScriptedBackend()), inspector=True)


@pytest.fixture
def page(request: pytest.FixtureRequest) -> Iterator[Page]:
    """A page in headless Debian Chromium; a screenshot lands in tests/artifacts/ when the test fails."""
    problem = missing_chromium()
    assert problem is None, problem
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        failed_before = request.session.testsfailed  # a failed call is counted before teardown runs
        try:
            yield page
        finally:
            if request.session.testsfailed > failed_before:
                ARTIFACTS.mkdir(exist_ok=True)
                page.screenshot(path=ARTIFACTS / f"{request.node.name}.png", full_page=True)
            browser.close()


@pytest.mark.slow
def test_the_inspector_renders_an_interrupt_and_resumes_it(tmp_path: Path, page: Page) -> None:
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    page.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)

    with serve_demo(tmp_path / "demo.db", inspector=True) as base:
        page.goto(f"{base}/agui/inspector/")
        page.get_by_placeholder("Message the agent").fill("refund order A100")
        page.keyboard.press("Enter")

        interrupt = page.locator('[data-entry="interrupt"]')
        expect(interrupt).to_have_attribute("data-status", "unanswered")
        expect(interrupt).to_contain_text("tool_call")
        expect(interrupt).to_contain_text("Approve the call to refund_order?")
        interrupt.get_by_label("Answer for interrupt").fill('{"approved": true}')
        interrupt.get_by_role("button", name="Resolve").click()

        expect(page.locator('[data-entry="run"]')).to_have_count(2)
        expect(page.locator('[data-entry="run"]').last).to_have_attribute("data-status", "finished")
        reply = page.locator('[data-entry="message"][data-role="assistant"]').last
        expect(reply).to_contain_text("Done: order A100 was refunded.")
        issues = page.locator("[data-issues-chip]")
        expect(issues).to_have_attribute("data-has-issues", "false")
        expect(issues.locator(".agui-count")).to_have_text("0")
    assert problems == []
