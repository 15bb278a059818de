"""The provisional results a resumed turn starts with: what stands for a deferred call unless the backend answers it.

Two sources: the results the backend reported before its interrupt (kept in the open turn), and, for a
confirmation call the upstream opened only to ask (`_gated.confirmation_call_id`), the person's answer
itself. A result the backend sends after the resume replaces either; `_translate.settle_deferred`
answers what is left once the backend ends a step without an interrupt.

A call an interrupt named by `toolCallId` is answered by the person's answer to it (`decided_answers`)
when the backend ends its step without a word of its own on it: never sent to the backend as a result
(it would take it for the tool's), only recorded as what the person decided.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from ag_ui.core import ToolMessage

from adapter._gate import Answer
from adapter._gated import confirmation_call_id, gated_call_ids
from adapter._ids import new_id
from adapter._record import OpenTurn


def resumed_provisional(turn: OpenTurn, answers: Sequence[Answer]) -> dict[str, ToolMessage]:
    """The held turn's provisional results, by call id, with the answers to its confirmation calls."""
    provisional = {message.tool_call_id: message for message in turn.provisional_results}
    for answer in answers:
        if answer.call.kind != "backend":
            continue
        call_id = confirmation_call_id(answer.call.interrupt())
        if call_id is not None and call_id in turn.deferred_calls and call_id not in provisional:
            said = answer.payload if answer.status == "resolved" else {"cancelled": True}
            provisional[call_id] = ToolMessage(id=new_id("msg"), tool_call_id=call_id, content=json.dumps(said))
    return provisional


def decided_answers(turn: OpenTurn, answers: Sequence[Answer]) -> dict[str, ToolMessage]:
    """The person's answer to each backend interrupt, for each deferred call it names, by that call's id."""
    decided: dict[str, ToolMessage] = {}
    for answer in answers:
        if answer.call.kind != "backend":
            continue
        interrupt = answer.call.interrupt()
        named = {*gated_call_ids(interrupt), *([interrupt.tool_call_id] if interrupt.tool_call_id else [])}
        said = json.dumps(answer.payload if answer.status == "resolved" else {"cancelled": True})
        for call_id in sorted(named & set(turn.deferred_calls)):
            decided[call_id] = ToolMessage(id=new_id("msg"), tool_call_id=call_id, content=said)
    return decided
