"""Chat-assisted form fill: the agent fills a form draft that the page owns.

The page keeps ONE draft (a compute-resource request: quantity, region, purpose) with a version that
every change increments, its own edits and the agent's alike. Each message carries the draft as a
`formContext` context entry; the agent proposes changes with the page's `update_form_draft` tool; the
page checks and applies them (or refuses) and answers the call with
`{"applied", "reason", "code", "version", "fields", "values"}`; the agent then says what happened.
Submitting the form ("确认提交") is a separate step the page reports with its own message.

These rules play the agent without a model. With a real model, the same tool and context do the job:
an OpenAI-compatible backend gets the context in its client data block (a user message, as data).
"""

from ._phrases import parse_changes
from ._rules import CONTEXT_KEY, FORM_ID, RULES, TOOL_NAME, form_context

HELP = (
    "For the form on the right, try '申请两台云服务器，地域选北京', '用途：模型训练' "
    "or '3 servers in Guangzhou, purpose: load testing'."
)
TOOLS: tuple[()] = ()
"""Server tools the form needs: none. `update_form_draft` is the page's own tool (examples/web/tools.js)."""

__all__ = ["CONTEXT_KEY", "FORM_ID", "HELP", "RULES", "TOOLS", "TOOL_NAME", "form_context", "parse_changes"]
