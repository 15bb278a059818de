"""A form a tool asks for: a business tool finds details missing and raises `FormRequired`.

`python -m examples.support_ticket [--port 8000]` serves it at http://127.0.0.1:8000/agui; say "create a
high priority login incident ticket" (or "创建一个高优先级的登录故障工单"), then resume with the form's data.
The tool runs again from the start with the data, under the same idempotency key.
"""

from __future__ import annotations

from typing import Literal, TypeAlias

from starlette.applications import Starlette

from adapter import Adapter, FormDefinition, FormRequired, ToolContext, create_app, mount, tool
from adapter.backends import Call, Progress, Rule, ScriptedBackend
from adapter.stores import TurnStore

from . import serving

Priority: TypeAlias = Literal["LOW", "MEDIUM", "HIGH"]

SUPPORT_TICKET_FORM = FormDefinition(
    "support_ticket_details",
    "Asked for when an incident ticket lacks the affected system or the impact scope.",
    {
        "type": "object",
        "title": "补充故障信息",
        "description": "工单还缺两项：哪个系统出了问题，影响了多少用户。(Which system, and how many users?)",
        "properties": {
            "affectedSystem": {"type": "string", "title": "受影响系统", "minLength": 1},
            "impactScope": {
                "type": "string",
                "title": "影响范围",
                # Each code with a label for the person: the page shows the title, the tool gets the code.
                "oneOf": [
                    {"const": "ONE_USER", "title": "单个用户 (one user)"},
                    {"const": "PARTIAL_USERS", "title": "部分用户 (some users)"},
                    {"const": "ALL_USERS", "title": "全部用户 (all users)"},
                ],
            },
        },
        "required": ["affectedSystem", "impactScope"],
    },
)


@tool
def create_support_ticket(title: str, priority: Priority, ctx: ToolContext) -> dict[str, object]:
    """Create an incident ticket. Asks for the affected system and the impact scope before anything is written."""
    details = ctx.submitted_form_data
    if details is None:
        raise FormRequired(SUPPORT_TICKET_FORM)
    return {
        "ticketId": f"INC-{ctx.idempotency_key[:8]}",
        "title": title,
        "priority": priority,
        "affectedSystem": details["affectedSystem"],
        "impactScope": details["impactScope"],
    }


def _created(progress: Progress) -> str:
    ticket = progress.result("create_support_ticket")
    if not isinstance(ticket, dict):
        return "OK, no ticket was created."
    return f"Created {ticket['priority']} ticket {ticket['ticketId']} for {ticket['affectedSystem']}."


RULES = [
    Rule(
        r"high[- ]priority login incident ticket|高优先级的?登录故障工单",
        steps=[[Call("create_support_ticket", {"title": "Login failure", "priority": "HIGH"})]],
        reply=_created,
    ),
]


def build_adapter(store: TurnStore | None = None) -> Adapter:
    """No `forms=` needed: the form travels with the `FormRequired` the tool raises."""
    return Adapter(ScriptedBackend(RULES), tools=[create_support_ticket], store=store)


app = Starlette(routes=[mount("/agui", create_app(build_adapter()))])

if __name__ == "__main__":
    serving.serve(app, description="Serve the support-ticket example (a tool that raises FormRequired).")
