"""Cases about the client tool the kit declares: how its call ends a run, and how an answer comes back."""

from __future__ import annotations

import json

from adapter.conformance._client import Reply, cancelled, new_id, resolved
from adapter.conformance._probe import Frontend, Probe, Verdict, case, refused


@case("frontend-call", "FE-1", "FE-2", "FE-3", "INT-1", "INT-6", part="client tools")
async def frontend_call(probe: Probe) -> Verdict:
    """A client-tool call ends the run with an interrupt, or with success and `pendingToolCallIds`."""
    call = await probe.frontend()
    if call.reply.results(call.call_id):
        return "fail", f"the server answered the client's own call {call.call_id} (TOOL_CALL_RESULT)"
    if call.interrupt is not None:
        return "warn", (
            f"interrupt outcome: {call.interrupt.get('id')} about {call.call_id}. FE-2: a run that calls a client"
            " tool MUST NOT be reported as interrupted; this is only compatible with clients that resume"
        )
    outcome = call.reply.outcome or {}
    if outcome.get("type") != "success":
        return "fail", f"the call {call.call_id} ended the run with {call.reply.ending()}"
    pending = outcome.get("pendingToolCallIds")
    if pending is None:
        return "warn", f"success outcome without pendingToolCallIds; {call.call_id} is pending only by omission"
    if call.call_id not in pending:
        return "fail", f"pendingToolCallIds {pending} leaves out the unanswered call {call.call_id}"
    return "pass", f"success outcome with pendingToolCallIds {pending}"


@case("frontend-resolved", "FE-4", "FE-5", "RES-1", "RES-2", part="client tools")
async def frontend_resolved(probe: Probe) -> Verdict:
    """A resolved answer becomes the ToolMessage for the original call, which is not streamed again."""
    call = await probe.frontend()
    nonce = new_id("answer")
    reply = await answer_call(call, payload={"conformance": nonce})
    if refused(reply):
        return "fail", f"the answer was refused: {reply.ending()}"
    restreamed = [
        e["type"] for e in reply.wire if e.get("toolCallId") == call.call_id and e["type"] != "TOOL_CALL_RESULT"
    ]
    if restreamed:
        return "fail", f"the answered call {call.call_id} was streamed again: {', '.join(restreamed)}"
    if call.call_id in {str(i.get("toolCallId")) for i in reply.wire_interrupts}:
        return "fail", f"the answered call {call.call_id} was interrupted again"
    if call.interrupt is None:  # the client's own ToolMessage: the server must not echo it (FE-5)
        return "pass", f"the ToolMessage for {call.call_id} was taken as the answer; {reply.ending()}"
    if _carries(reply, call.call_id, nonce):
        return "pass", f"the answer became the ToolMessage for {call.call_id}; {reply.ending()}"
    return "warn", f"accepted ({reply.ending()}), but no event shows a ToolMessage for {call.call_id}"


@case("frontend-cancelled", "RES-4", "FE-6", part="client tools")
async def frontend_cancelled(probe: Probe) -> Verdict:
    """A cancelled answer is an answer: the run goes on, without RUN_ERROR."""
    call = await probe.frontend()
    reply = await answer_call(call, payload=None)
    how = "status cancelled" if call.interrupt is not None else "a ToolMessage with error"
    if refused(reply):
        return "fail", f"a cancellation ({how}) was refused: {reply.ending()}"
    return "pass", f"cancelled with {how}; {reply.ending()}"


async def answer_call(call: Frontend, *, payload: object) -> Reply:
    """Answer the call the way the run asked: a resume entry, or a ToolMessage; None cancels."""
    if call.interrupt is not None:
        interrupt_id = str(call.interrupt.get("id"))
        entry = cancelled(interrupt_id) if payload is None else resolved(interrupt_id, payload)
        return await call.thread.resume(entry)
    if payload is None:
        return await call.thread.answer(call.call_id, "The user cancelled this.", error="cancelled")
    return await call.thread.answer(call.call_id, json.dumps(payload))


def _carries(reply: Reply, call_id: str, nonce: str) -> bool:
    """Whether the reply shows a tool message for `call_id` that holds `nonce`."""
    results = [json.dumps(result.get("content")) for result in reply.results(call_id)]
    snapshots = [
        json.dumps(message.get("content"))
        for snapshot in reply.of("MESSAGES_SNAPSHOT")
        for message in snapshot.get("messages", [])
        if message.get("role") == "tool" and message.get("toolCallId") == call_id
    ]
    return any(nonce in text for text in results + snapshots)
