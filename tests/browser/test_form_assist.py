"""Seed 003 in Chromium: the agent fills the page's form draft; the person edits, confirms, or changes it first."""

from __future__ import annotations

import json
import time
from typing import Any

from playwright.sync_api import Page, Request, Route, expect


def say(page: Page, text: str) -> None:
    page.fill("#message", text)
    page.click("#send")


def replies(page: Page) -> Any:
    return page.locator(".msg.assistant .bubble")


def set_quantity(page: Page, quantity: str) -> None:
    page.fill("#draft-quantity", quantity)
    page.press("#draft-quantity", "Tab")  # a change is committed when the field is left


def run_ended(page: Page) -> None:
    expect(page.locator("#status")).to_have_attribute("data-state", "idle")


def test_the_agent_fills_the_draft_and_says_what_it_filled(page: Page) -> None:
    expect(page.get_by_test_id("draft-version")).to_have_text("v1")

    say(page, "申请两台云服务器，地域选北京")

    expect(replies(page).last).to_have_text(
        "已填写：数量 2，地域 北京（草稿第 2 版）。请检查右侧表单，确认无误后点击“确认提交”。"
    )
    expect(page.locator("#draft-quantity")).to_have_value("2")
    expect(page.locator("#draft-region option:checked")).to_have_text("北京")
    expect(page.get_by_test_id("draft-version")).to_have_text("v2")
    result = page.locator(".tool-call[data-tool-name=update_form_draft] .tool-result")
    expect(result).to_contain_text('"applied": true')
    expect(result).to_contain_text('"version": 2')

    say(page, "3 servers in Guangzhou, purpose: load testing")

    expect(replies(page).last).to_have_text(
        "Filled in quantity 3, region Guangzhou, purpose load testing (draft version 3). "
        "Check the form, then press 确认提交."
    )
    expect(page.locator("#draft-purpose")).to_have_value("load testing")


def test_the_person_changes_a_suggestion_and_their_value_is_submitted(page: Page) -> None:
    sent: list[dict[str, Any]] = []

    def record(request: Request) -> None:
        if request.method == "POST":
            sent.append(request.post_data_json or {})

    page.on("request", record)
    say(page, "申请两台云服务器，地域选北京，用途：模型训练")
    expect(page.get_by_test_id("draft-version")).to_have_text("v2")

    set_quantity(page, "3")
    expect(page.get_by_test_id("draft-version")).to_have_text("v3")
    page.get_by_test_id("submit-draft").click()

    receipt = page.get_by_test_id("receipt")
    expect(receipt).to_contain_text("已提交 Submitted (v3)")
    expect(receipt.locator('dd[data-key="quantity"]')).to_have_text("3")
    expect(receipt.locator('dd[data-key="region"]')).to_have_text("北京")  # the option's title, not its code
    expect(replies(page).last).to_contain_text("已收到提交（第 3 版）：数量 3，地域 北京，用途 模型训练")
    expect(page.locator("#draft-quantity")).to_be_disabled()
    context = json.loads(sent[-1]["context"][0]["value"])
    assert sent[-1]["context"][0]["description"] == "formContext"
    assert context == {
        "formId": "compute-request",
        "expectedVersion": 3,
        "values": {"quantity": 3, "region": "Beijing", "purpose": "模型训练"},
        "status": "submitted",
    }


def test_a_change_made_for_an_older_version_is_refused_and_the_persons_values_stay(page: Page) -> None:
    held: list[Route] = []
    page.route("**/agui/", lambda route: route.continue_() if held else held.append(route))
    say(page, "申请两台云服务器，地域选北京")
    deadline = time.monotonic() + 5
    while not held and time.monotonic() < deadline:
        page.wait_for_timeout(20)
    (request,) = held
    body = request.request.post_data_json
    assert body is not None
    assert json.loads(body["context"][0]["value"])["expectedVersion"] == 1

    set_quantity(page, "5")  # while the agent is still thinking
    expect(page.get_by_test_id("draft-version")).to_have_text("v2")
    request.continue_()

    expect(replies(page).last).to_contain_text("未能填写：表单在我提出修改前已被你改动（现在是第 2 版）")
    result = page.locator(".tool-call[data-tool-name=update_form_draft] .tool-result")
    expect(result).to_contain_text('"applied": false')
    expect(result).to_contain_text('"code": "VERSION_CONFLICT"')
    expect(page.locator("#draft-quantity")).to_have_value("5")
    expect(page.locator("#draft-region option:checked")).to_have_text("上海")
    expect(page.get_by_test_id("draft-version")).to_have_text("v2")


def test_invalid_proposals_are_refused_with_a_reason(page: Page) -> None:
    say(page, "0 servers please")

    expect(replies(page).last).to_have_text("I could not fill the form: quantity must be at least 1.")
    expect(page.get_by_test_id("draft-version")).to_have_text("v1")


def test_the_draft_survives_a_reload(page: Page) -> None:
    say(page, "用途：压测")
    expect(page.locator("#draft-purpose")).to_have_value("压测")
    run_ended(page)  # the reply and the draft are stored only when the run ends
    set_quantity(page, "4")
    expect(page.get_by_test_id("draft-version")).to_have_text("v3")

    page.reload()

    expect(page.locator("#draft-purpose")).to_have_value("压测")
    expect(page.locator("#draft-quantity")).to_have_value("4")
    expect(page.get_by_test_id("draft-version")).to_have_text("v3")
    expect(replies(page).last).to_contain_text("已填写：用途 压测")
