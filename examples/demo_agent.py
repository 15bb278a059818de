"""The demo's agent: a ScriptedBackend whose rules call server tools, page tools, approvals and forms.

No model and no key: each rule matches the latest user message and makes the tool calls a model
would make, then answers from the tool results it was given, in sentences (never raw JSON).
`LongAnswers` adds one answer streamed slowly, long enough that a reload of the page lands in its middle.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from typing import Annotated, Final

from ag_ui.core import UserMessage
from pydantic import Field

from adapter import InputRequired, ToolContext, tool
from adapter.backends import (
    Backend,
    BackendItem,
    Call,
    ModelRequest,
    Progress,
    Rule,
    ScriptedBackend,
    TextDelta,
    split_deltas,
)

from .meeting_room import MEETING_FORM, reserve_meeting_room
from .meeting_room import RULES as MEETING_RULES
from .support_ticket import RULES as TICKET_RULES
from .support_ticket import create_support_ticket

ORDERS = {
    "A100": {"orderId": "A100", "item": "keyboard", "amount": 59.0, "status": "delivered"},
    "B200": {"orderId": "B200", "item": "monitor", "amount": 189.0, "status": "shipped"},
}


@tool
def lookup_order(order_id: str) -> dict[str, object]:
    """Look up an order by its id.

    Args:
        order_id: The order id, e.g. A100.
    """
    return ORDERS.get(order_id.upper(), {"orderId": order_id, "status": "not found"})


@tool(requires_approval=True)
def refund_order(order_id: str, amount: Annotated[float, Field(gt=0)], ctx: ToolContext) -> dict[str, object]:
    """Refund an order. A person approves every refund before it happens.

    Args:
        order_id: The order to refund.
        amount: How much to refund; more than 0.
    """
    return {"orderId": order_id, "refunded": amount, "reference": f"RF-{ctx.idempotency_key[:8]}"}


@tool
def track_parcel(ctx: ToolContext) -> dict[str, object]:
    """Track a parcel. Asks for the order number, as one line of text, before looking anything up."""
    if not ctx.answered:
        raise InputRequired("请提供订单号 (What is the order number?)")
    found = re.search(r"[A-Za-z]+-?\d+", str(ctx.answer))
    order_id = found[0].upper() if found else str(ctx.answer).strip()
    return {"orderId": order_id, "parcel": "in transit", "eta": "tomorrow"}


def _lookup_reply(progress: Progress) -> str:
    order = progress.result("lookup_order")
    if not isinstance(order, dict) or order.get("status") == "not found":
        return f"I could not find an order {progress.match[1].upper()}."
    return f"Order {order['orderId']} ({order['item']}, {order['amount']:.2f}) is {order['status']}."


def _refund_reply(progress: Progress) -> str:
    refund = next((o for o in progress.outcomes if o.name == "refund_order"), None)
    if refund is None or not refund.ok:
        reason = refund.error if refund else "not requested"
        return f"OK, I did not refund order {progress.match[1].upper()} ({reason}). Nothing was changed."
    done = progress.result("refund_order")
    if not isinstance(done, dict):  # a person's note before the result (an edit with a reason): not JSON
        return f"Done: order {progress.match[1].upper()} was refunded."
    return (
        f"Done: order {progress.match[1].upper()} was refunded. {done['refunded']:.2f} goes back to the customer "
        f"(reference {done['reference']})."
    )


def _parcel_reply(progress: Progress) -> str:
    parcel = progress.result("track_parcel")
    if not isinstance(parcel, dict):
        return "OK, I did not track anything."
    return f"The parcel for order {parcel['orderId']} is {parcel['parcel']}; it should arrive {parcel['eta']}."


def _navigate_reply(progress: Progress) -> str:
    answer = progress.outcomes[0] if progress.outcomes else None
    result = progress.result("navigate")
    reason = answer.error if answer and not answer.ok else isinstance(result, dict) and result.get("error")
    if answer is None or reason:
        return f"I could not open the {progress.match[1]} page ({reason or 'the page did not answer'})."
    return f"I opened the {progress.match[1]} page for you."


def _confirm_reply(progress: Progress) -> str:
    answer = progress.outcomes[0] if progress.outcomes else None
    declined = isinstance(result := progress.result("confirm_action"), dict) and result.get("confirmed") is False
    if answer is None or not answer.ok or declined:
        return f"Understood, I will not {progress.match[1]}."
    return f"Confirmed: I will {progress.match[1]} now."


RULES = [
    # A backend lookup, then a refund that waits for approval (or is declined).
    Rule(
        r"refund (?:order )?(\w+)",
        steps=[
            [Call("lookup_order", {"order_id": "{1}"})],
            [Call("refund_order", lambda p: {"order_id": p.match[1].upper(), "amount": _amount(p.match[1])})],
        ],
        reply=_refund_reply,
        say="Let me look that order up first. ",
    ),
    # A backend tool answered within one run.
    Rule(
        r"(?:look ?up|status of|check) (?:order )?(\w+)",
        steps=[[Call("lookup_order", {"order_id": "{1}"})]],
        reply=_lookup_reply,
    ),
    # Client tools the page runs at once.
    Rule(
        r"(?:go to|open|navigate to) (?:the )?(\w+)",
        steps=[[Call("navigate", {"page": "{1}"})]],
        reply=_navigate_reply,
    ),
    Rule(r"(?:toast|notify)(?: me)?:? (.+)", steps=[[Call("show_toast", {"message": "{1}"})]], reply="Done."),
    # A human-in-the-loop confirmation the page asks for.
    Rule(
        r"(?:confirm|please) (delete .+|archive .+)",
        steps=[[Call("confirm_action", {"action": "{1}"})]],
        reply=_confirm_reply,
    ),
    # A form the model asks for, a form a tool asks for, and one line of text a tool asks for.
    *MEETING_RULES,
    *TICKET_RULES,
    Rule(r"track my parcel|查询包裹", steps=[[Call("track_parcel")]], reply=_parcel_reply),
]


def _amount(order_id: str) -> float:
    amount = ORDERS.get(order_id.upper(), {}).get("amount", 0.0)
    return float(amount) if isinstance(amount, int | float) else 0.0


HELP = (
    "Try: 'look up order A100' (a backend tool), 'go to settings' or 'toast: hello' (client tools), "
    "'confirm delete report.pdf' (a confirmation), 'refund order A100' (lookup, then an approval), "
    "'book a meeting room' (a form, then the booking), 'create a high priority login incident ticket' "
    "(a tool asks for a form), 'track my parcel' (a tool asks for one line of text) or 'tell me a long story' "
    "(a long answer, streamed slowly: reload the page while it streams)."
)

LONG_PROMPT: Final = r"long story|长故事"
"""What asks `LongAnswers` for its long answer (anywhere in the latest user message, any case)."""
LONG_ANSWER: Final = " ".join(
    f"({n}) The parcel {what}."
    for n, what in enumerate(
        [
            "leaves the warehouse in Shenzhen at dawn",
            "crosses the river on a slow ferry",
            "waits at the border while a form is stamped",
            "rides a night train north",
            "is sorted by a robot that hums",
            "gets a new label in Lisbon",
            "flies over the sea in a cargo plane",
            "is scanned twice, for luck",
            "sits in a van behind a bakery",
            "is carried up four flights of stairs",
        ]
        * 6,
        start=1,
    )
)
"""The long answer: 60 numbered sentences, so a piece shown twice (or missing) is easy to spot."""
PAUSE: Final = 0.02
"""Seconds `LongAnswers` waits before each word of the long answer (588 words: about twelve seconds in all)."""


class LongAnswers:
    """The scripted agent, except for `LONG_PROMPT`: `LONG_ANSWER`, one word at a time, `pause` seconds apart.

    The pauses are the model being slow: a reload, a stop or a switch of replica lands in the middle of the answer.
    """

    def __init__(self, backend: Backend, *, pause: float = PAUSE) -> None:
        self.backend = backend
        self.pause = pause

    async def stream(self, request: ModelRequest) -> AsyncIterator[BackendItem]:
        """The long answer when the latest message (a user's) asks for it, else what `backend` streams."""
        last = request.messages[-1] if request.messages else None
        text = last.content if isinstance(last, UserMessage) else None
        if not (isinstance(text, str) and re.search(LONG_PROMPT, text, re.IGNORECASE)):
            async for item in self.backend.stream(request):
                yield item
            return
        for delta in split_deltas(LONG_ANSWER):
            await asyncio.sleep(self.pause)
            yield TextDelta(delta)


backend = ScriptedBackend(RULES, fallback=HELP)
tools = [lookup_order, refund_order, reserve_meeting_room, create_support_ticket, track_parcel]
forms = [MEETING_FORM]
