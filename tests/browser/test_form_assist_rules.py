"""The scripted agent behind seed 003's page: its phrases, its `update_form_draft` calls and its replies."""

from __future__ import annotations

import json
from typing import Any

import pytest
from agui import cancelled, resolved, run_events, run_input, user

from adapter import Adapter
from adapter.backends import ScriptedBackend
from examples import form_assist
from examples.form_assist._phrases import to_int

UPDATE_FORM_DRAFT = {"name": "update_form_draft", "description": "Change the draft.", "parameters": {"type": "object"}}


@pytest.mark.parametrize(
    ("text", "changes"),
    [
        pytest.param("申请两台云服务器，地域选北京", {"quantity": 2, "region": "Beijing"}, id="seed"),
        pytest.param("要 2台，放在广州", {"quantity": 2, "region": "Guangzhou"}, id="digits-zh"),
        pytest.param("十二台上海的机器", {"quantity": 12, "region": "Shanghai"}, id="twelve-zh"),
        pytest.param("2 servers in Beijing", {"quantity": 2, "region": "Beijing"}, id="en"),
        pytest.param("three instances, shanghai", {"quantity": 3, "region": "Shanghai"}, id="en-word"),
        pytest.param("数量改为5", {"quantity": 5}, id="quantity-field"),
        pytest.param("用途：模型训练", {"purpose": "模型训练"}, id="purpose-zh"),
        pytest.param("Purpose: load testing.", {"purpose": "load testing"}, id="purpose-en"),
        pytest.param("用途：在北京跑 3 台压测", {"purpose": "在北京跑 3 台压测"}, id="purpose-keeps-its-words"),
        pytest.param("refund order A100", {}, id="unrelated"),
    ],
)
def test_phrases_become_draft_changes(text: str, changes: dict[str, Any]) -> None:
    assert form_assist.parse_changes(text) == changes


@pytest.mark.parametrize(
    ("number", "value"),
    [
        ("两", 2),
        ("十", 10),
        ("十五", 15),
        ("二十", 20),
        ("九十九", 99),
        ("7", 7),
        ("ten", 10),
        ("十十", None),
        ("", None),
    ],
)
def test_numbers_in_chinese_and_english(number: str, value: int | None) -> None:
    assert to_int(number) == value


def form_context(version: int, **extra: Any) -> list[dict[str, str]]:
    values = {"quantity": 1, "region": "Shanghai", "purpose": ""}
    context = {"formId": "compute-request", "expectedVersion": version, "values": values, **extra}
    return [{"description": "formContext", "value": json.dumps(context)}]


def said(events: list[dict[str, Any]]) -> str:
    return "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")


async def ask(adapter: Adapter, text: str, *, context: list[dict[str, str]]) -> tuple[dict[str, Any], dict[str, Any]]:
    events = await run_events(adapter, run_input("t", [user(text)], tools=[UPDATE_FORM_DRAFT], context=context))
    (interrupt,) = events[-1]["outcome"]["interrupts"]
    call = next(e for e in events if e["type"] == "TOOL_CALL_ARGS")
    return interrupt, json.loads(call["delta"])


@pytest.fixture
def adapter() -> Adapter:
    return Adapter(ScriptedBackend(form_assist.RULES), tools=form_assist.TOOLS, frontend_outcome="interrupt")


async def test_the_call_is_made_for_the_version_the_page_sent_and_the_reply_says_what_was_filled(
    adapter: Adapter,
) -> None:
    interrupt, arguments = await ask(adapter, "申请两台云服务器，地域选北京", context=form_context(7))
    answer = {"applied": True, "reason": None, "version": 8, "fields": ["quantity", "region"]}
    resume = run_input("t", [], resume=[resolved(interrupt["id"], answer)], context=form_context(8))
    done = await run_events(adapter, resume, resumed=True)

    assert arguments == {
        "formId": "compute-request",
        "expectedVersion": 7,
        "changes": {"quantity": 2, "region": "Beijing"},
    }
    assert interrupt["reason"] == "tool_call"
    assert said(done) == "已填写：数量 2，地域 北京（草稿第 8 版）。请检查右侧表单，确认无误后点击“确认提交”。"


@pytest.mark.parametrize(
    ("text", "answer", "reply"),
    [
        pytest.param(
            "两台，北京",
            {"applied": False, "code": "VERSION_CONFLICT", "reason": "stale", "version": 4, "fields": []},
            "未能填写：表单在我提出修改前已被你改动（现在是第 4 版），你的修改已保留，我没有覆盖。"
            "如仍需要，请再告诉我一次。",
            id="conflict-zh",
        ),
        pytest.param(
            "2 servers in Beijing",
            {"applied": False, "code": "VERSION_CONFLICT", "reason": "stale", "version": 4, "fields": []},
            "I could not fill the form: you changed it before my change arrived (it is now at version 4). "
            "Your values are kept; ask me again if you still want the change.",
            id="conflict-en",
        ),
        pytest.param(
            "0 servers",
            {"applied": False, "code": "INVALID_VALUE", "reason": "quantity must be at least 1", "version": 1},
            "I could not fill the form: quantity must be at least 1.",
            id="invalid",
        ),
        pytest.param("purpose: tests", "not json", "The page did not return a result I can read.", id="unreadable"),
    ],
)
async def test_a_refusal_is_explained(adapter: Adapter, text: str, answer: Any, reply: str) -> None:
    interrupt, _ = await ask(adapter, text, context=form_context(1))
    done = await run_events(adapter, run_input("t", [], resume=[resolved(interrupt["id"], answer)]), resumed=True)

    assert said(done) == reply


async def test_a_cancelled_call_changes_nothing_and_says_so(adapter: Adapter) -> None:
    interrupt, _ = await ask(adapter, "用途：压测", context=form_context(1))
    done = await run_events(adapter, run_input("t", [], resume=[cancelled(interrupt["id"])]), resumed=True)

    assert said(done) == "表单没有修改（cancelled）。"


async def test_without_a_form_context_the_call_names_the_form_and_version_zero(adapter: Adapter) -> None:
    _, arguments = await ask(adapter, "2 servers", context=[])

    assert arguments == {"formId": "compute-request", "expectedVersion": 0, "changes": {"quantity": 2}}


async def test_the_submission_is_acknowledged_with_the_submitted_values(adapter: Adapter) -> None:
    context = form_context(5, status="submitted")
    done = await run_events(adapter, run_input("t", [user("确认提交：数量 1，地域 上海")], context=context))
    early = await run_events(adapter, run_input("t2", [user("确认提交")], context=form_context(5)))

    assert said(done).startswith("已收到提交（第 5 版）：数量 1，地域 上海，用途 。")
    assert said(early) == "还没有收到已提交的表单。请在右侧检查后点击“确认提交”。"
