from __future__ import annotations

from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest
from browserkit import CHROMIUM_ARGS, DemoServer
from externals import CHROMIUM, missing_chromium

try:
    from playwright.sync_api import Browser, Page, expect, sync_playwright
except ImportError:  # a failure below, never a skip
    HAVE_PLAYWRIGHT = False
else:
    HAVE_PLAYWRIGHT = True
    # expect() waits for a condition, 5 s by default: too short on a loaded 2-core machine, where a run
    # through the CopilotKit runtime can take longer. A generous bound costs nothing when things are fast.
    expect.set_options(timeout=30_000)

ARTIFACTS = Path(__file__).parents[1] / "artifacts"
FAILED = pytest.StashKey[bool]()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    report = yield
    if report.when == "call" and report.failed:
        item.stash[FAILED] = True
    return report


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoServer]:
    """The demo app on a free port, with its own SQLite file; one per test module."""
    server = DemoServer(tmp_path_factory.mktemp("demo") / "demo.db")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Debian's Chromium, headless. Missing Chromium or Playwright fails the tests with how to install it."""
    problem = missing_chromium()
    if problem is not None or not HAVE_PLAYWRIGHT:
        pytest.fail(problem or "Playwright for Python is missing", pytrace=False)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser: Browser, demo: DemoServer, request: pytest.FixtureRequest) -> Iterator[Page]:
    """A fresh page on the demo (its own localStorage, so its own thread); a screenshot if the test fails."""
    context = browser.new_context(base_url=demo.url, viewport={"width": 1280, "height": 900}, locale="en-US")
    page = context.new_page()
    page.set_default_timeout(10_000)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto("/")
    yield page
    if request.node.stash.get(FAILED, False):
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=ARTIFACTS / f"{request.node.name}.png", full_page=True)
    context.close()
    assert not errors, f"the page threw: {errors}"
