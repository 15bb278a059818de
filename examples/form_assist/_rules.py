"""The form-fill agent's rules: read the form's context, propose changes, then report the result."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from adapter.backends import Call, ModelRequest, Progress, Rule

from ._phrases import LABELS, PATTERN, is_chinese, parse_changes

FORM_ID: Final = "compute-request"
CONTEXT_KEY: Final = "formContext"
"""The `description` of the context entry that carries the form: `{"formId", "expectedVersion", "values"}`."""
TOOL_NAME: Final = "update_form_draft"

_FIELDS_ZH: Final = {"quantity": "数量", "region": "地域", "purpose": "用途"}


def form_context(request: ModelRequest | None) -> dict[str, Any]:
    """The `formContext` entry of the request's context, parsed; empty when the page sent none."""
    for entry in request.context if request else ():
        if entry.description == CONTEXT_KEY:
            try:
                value = json.loads(entry.value)
            except ValueError:
                return {}
            return value if isinstance(value, dict) else {}
    return {}


def propose(progress: Progress) -> dict[str, Any]:
    """The `update_form_draft` call: the changes the message asks for, against the version the page sent."""
    form = form_context(progress.request)
    return {
        "formId": form.get("formId", FORM_ID),
        "expectedVersion": form.get("expectedVersion", 0),
        "changes": parse_changes(progress.match.string),
    }


def describe(changes: Mapping[str, Any], *, chinese: bool) -> str:
    """Field values the way a person reads them: "数量 2，地域 北京" or "quantity 2, region Beijing"."""
    if chinese:
        return "，".join(f"{_FIELDS_ZH.get(k, k)} {_label(k, v)}" for k, v in changes.items())
    return ", ".join(f"{k} {v}" for k, v in changes.items())


def _label(field: str, value: Any) -> Any:
    return LABELS.get(value, value) if field == "region" else value


def report(progress: Progress) -> str:
    """What the agent says once the page answered: what was filled in, or why nothing was."""
    chinese = is_chinese(progress.match.string)
    outcome = next((o for o in reversed(progress.outcomes) if o.name == TOOL_NAME), None)
    if outcome is None or not outcome.ok:
        why = outcome.error if outcome else "no answer"
        return f"表单没有修改（{why}）。" if chinese else f"The form was not changed ({why})."
    result = progress.result(TOOL_NAME)
    if not isinstance(result, dict):
        return "页面没有返回可读的结果。" if chinese else "The page did not return a result I can read."
    version = result.get("version")
    if result.get("applied"):
        changes = {k: v for k, v in outcome.arguments.get("changes", {}).items() if k in result.get("fields", [])}
        if chinese:
            filled = describe(changes, chinese=True)
            return f"已填写：{filled}（草稿第 {version} 版）。请检查右侧表单，确认无误后点击“确认提交”。"
        filled = describe(changes, chinese=False)
        return f"Filled in {filled} (draft version {version}). Check the form, then press 确认提交."
    return _refusal(result, chinese=chinese)


def _refusal(result: Mapping[str, Any], *, chinese: bool) -> str:
    version, reason = result.get("version"), result.get("reason") or "unknown"
    if result.get("code") == "VERSION_CONFLICT":
        if chinese:
            return (
                f"未能填写：表单在我提出修改前已被你改动（现在是第 {version} 版），你的修改已保留，我没有覆盖。"
                "如仍需要，请再告诉我一次。"
            )
        return (
            f"I could not fill the form: you changed it before my change arrived (it is now at version {version}). "
            "Your values are kept; ask me again if you still want the change."
        )
    return f"未能填写：{reason}。" if chinese else f"I could not fill the form: {reason}."


def acknowledge(progress: Progress) -> str:
    """The reply to the page's submission message: the submitted values, from the form's context."""
    form = form_context(progress.request)
    values = form.get("values")
    if form.get("status") != "submitted" or not isinstance(values, dict):
        return "还没有收到已提交的表单。请在右侧检查后点击“确认提交”。"
    return (
        f"已收到提交（第 {form.get('expectedVersion')} 版）：{describe(values, chinese=True)}。"
        "这是本地演示，没有创建真实资源。 Submitted locally; no real resource was created."
    )


RULES: Final = [
    Rule(r"^\s*确认提交", reply=acknowledge),
    Rule(PATTERN, steps=[[Call(TOOL_NAME, propose)]], reply=report),
]
"""Put them before other rules: the submission message and any message about quantity, region or purpose."""
