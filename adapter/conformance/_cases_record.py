"""Cases about the record of what happened: nothing invented for a call nobody answered, one answer per call.

An answered call keeps its one answer whatever history a client sends later.

What a server reports is read from the events (`TOOL_CALL_RESULT`, `MESSAGES_SNAPSHOT`), from its thread read when
it has one (`--thread-url`, or this adapter's `GET <url>/threads/{id}`), and from what its model was sent when the
reply quotes it (inferred).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from adapter.conformance._cases_frontend import answer_call
from adapter.conformance._client import Reply, Thread, new_id, resolved
from adapter.conformance._evidence import content_of, tool_answers
from adapter.conformance._probe import Probe, Skip, Verdict, case, refused
from adapter.conformance._report import Status

Part = Callable[[Probe], Awaitable[tuple[str, str]]]
"""One way to leave a call unanswered: returns (what was invented, "" for nothing; what was looked at)."""


@case("invented-answer", "FE-1", "RES-6", "TOOL-4")
async def invented_answer(probe: Probe) -> Verdict:
    """No result is reported for a call nobody answered: a client-tool call left open, an approval still waiting."""
    looked: list[str] = []
    skipped: list[str] = []
    parts: Sequence[Part] = (_open_client_call, _open_approval, _unanswered_in_history)
    for part in parts:
        try:
            invented, how = await part(probe)
        except Skip as skip:
            skipped.append(str(skip))
            continue
        if invented:
            return "fail", invented
        looked.append(how)
    if not looked:
        raise Skip("; ".join(dict.fromkeys(skipped)))
    also = f" (not checked: {'; '.join(dict.fromkeys(skipped))})" if skipped else ""
    return "pass", f"no answer was reported for {', '.join(looked)}{also}"


async def _open_client_call(probe: Probe) -> tuple[str, str]:
    """The client-tool call the run left to the client, and a new message that leaves it unanswered."""
    call = await probe.frontend()
    reply = await call.thread.say("Something else; that call stays unanswered.")
    what = f"the {probe.options.frontend_tool} call {call.call_id} left for the client"
    return await _invented(probe, what, call.thread.id, call.call_id, call.reply, reply)


async def _open_approval(probe: Probe) -> tuple[str, str]:
    """The call an open approval gates, and a new message while it waits."""
    approval = await probe.approval()
    call_id = approval.call_of()
    if call_id is None:
        raise Skip("the approval interrupt names no call to look for")
    reply = await approval.thread.say("Something else, while the approval waits.")
    return await _invented(probe, f"the call {call_id} waiting for approval", approval.thread.id, call_id, reply)


async def _unanswered_in_history(probe: Probe) -> tuple[str, str]:
    """A client-tool call the client's history holds with no answer (a client that never ran it)."""
    thread = probe.thread()
    call_id = new_id("unanswered-call")
    call = {"id": call_id, "type": "function", "function": {"name": probe.options.frontend_tool, "arguments": "{}"}}
    thread.messages = [
        {"id": new_id("user"), "role": "user", "content": probe.options.frontend_message},
        {"id": new_id("assistant"), "role": "assistant", "toolCalls": [call]},
    ]
    reply = await thread.say("Something else; that call was never answered.")
    what = f"the call {call_id} left unanswered in the client's history"
    return await _invented(probe, what, thread.id, call_id, reply)


async def _invented(probe: Probe, what: str, thread_id: str, call_id: str, *replies: Reply) -> tuple[str, str]:
    """Any answer the replies or the thread read report for `call_id`, which nobody answered."""
    for reply in replies:
        for where, message in tool_answers(reply, call_id):
            return f"{where} answers {what}, which nobody answered: {_quote(message)} ({reply.ending()})", ""
    read = await probe.read_thread(thread_id)
    for message in _answers_in(read, call_id):
        return f"the thread read holds an answer to {what}, which nobody answered: {_quote(message)}", ""
    channels = "events and thread read" if read is not None else "events; no thread read"
    ending = f"{replies[-1].ending()}; " if refused(replies[-1]) else ""
    return "", f"{what} ({ending}{channels})"


@dataclass(slots=True)
class Answered:
    """A call that has its answer: the thread, the call, and the answer as the client keeps it (None: not seen)."""

    thread: Thread
    call_id: str
    stored: dict[str, Any] | None
    what: str


Variant = Callable[[Answered, str], list[dict[str, Any]] | None]
"""The history of a next run that answers the call again, carrying `nonce`; None when it cannot be built."""


def _second(answered: Answered, nonce: str) -> list[dict[str, Any]] | None:
    message = {"id": new_id("tool"), "role": "tool", "toolCallId": answered.call_id, "content": _payload(nonce)}
    return [*answered.thread.messages, message]


def _rewritten(answered: Answered, nonce: str) -> list[dict[str, Any]] | None:
    stored = answered.stored
    if stored is None:
        return None
    return [{**m, "content": _payload(nonce)} if m is stored else m for m in answered.thread.messages]


def _declined(answered: Answered, nonce: str) -> list[dict[str, Any]] | None:
    content = f"The user declined this call ({nonce})."
    decline = {"id": new_id("tool"), "role": "tool", "toolCallId": answered.call_id, "content": content}
    decline["error"] = "declined"
    messages = answered.thread.messages
    if answered.stored is None:
        return [*messages, decline]
    return [decline if m is answered.stored else m for m in messages]


_VARIANTS: dict[str, Variant] = {
    "a second answer": _second,
    "the stored answer's id with other text": _rewritten,
    "the answer replaced by a decline": _declined,
}


@case("one-answer-per-call", "FE-4", "RES-9", "RES-14")
async def one_answer_per_call(probe: Probe) -> Verdict:
    """An answered call keeps its one answer: a history that answers it again or rewrites the answer changes nothing."""
    plans: list[tuple[Callable[[Probe], Awaitable[Answered]], dict[str, Variant]]] = [
        (_answered_client_call, _VARIANTS),
        (_denied_approval, {"a result for it": _second}),
    ]
    verdicts: list[Verdict] = []
    skipped: list[str] = []
    for setup, variants in plans:
        for label, variant in variants.items():
            try:
                answered = await setup(probe)
            except Skip as skip:
                skipped.append(str(skip))
                break
            verdict = await _answer_again(probe, answered, label, variant)
            if verdict[0] == "fail":
                return verdict
            verdicts.append(verdict)
    if not verdicts:
        raise Skip("; ".join(dict.fromkeys(skipped)))
    status: Status = "warn" if any(s == "warn" for s, _ in verdicts) else "pass"
    also = f"; not checked: {'; '.join(dict.fromkeys(skipped))}" if skipped else ""
    return status, "; ".join(detail for _, detail in verdicts) + also


async def _answered_client_call(probe: Probe) -> Answered:
    """A client-tool call the client answered, the way the run asked (a resume entry, or a ToolMessage)."""
    call = await probe.frontend()
    reply = await answer_call(call, payload={"conformance": new_id("first-answer")})
    if refused(reply):
        raise Skip(f"the answer to the {probe.options.frontend_tool} call was refused: {reply.ending()}")
    what = f"the answered {probe.options.frontend_tool} call {call.call_id}"
    return Answered(call.thread, call.call_id, _held(call.thread, call.call_id), what)


async def _denied_approval(probe: Probe) -> Answered:
    """A gated call the approver denied: its answer says so."""
    approval = await probe.approval()
    call_id = approval.call_of()
    if call_id is None:
        raise Skip("the approval interrupt names no call to answer again")
    reply = await approval.thread.resume(resolved(str(approval.first.get("id")), probe.answer(approval.first, False)))
    if refused(reply):
        raise Skip(f"the denial was refused: {reply.ending()}")
    return Answered(approval.thread, call_id, _held(approval.thread, call_id), f"the denied call {call_id}")


async def _answer_again(probe: Probe, answered: Answered, label: str, variant: Variant) -> Verdict:
    """Send a next run whose history answers the call again; refused or ignored passes, stored or echoed fails."""
    nonce = new_id("second-answer")
    messages = variant(answered, nonce)
    if messages is None:
        return "pass", f"{label}: not sent (no event gave the stored answer's message id)"
    before = await probe.read_thread(answered.thread.id)
    reply = await probe.client.post(answered.thread.input(messages=messages))
    after = await probe.read_thread(answered.thread.id)
    where = f"{label} for {answered.what}"
    echoed = [w for w, message in tool_answers(reply, answered.call_id) if nonce in content_of(message)]
    if echoed:
        return await probe.unless_stateless(
            f"{where} came back as the call's answer: {echoed[0]} carries it ({reply.ending()})"
        )
    kept, now = _answers_in(before, answered.call_id), _answers_in(after, answered.call_id)
    if before is not None and after is not None and _pairs(now) != _pairs(kept):
        shown = "; ".join(_quote(m) for m in now) or "none"
        return await probe.unless_stateless(f"{where} was stored: the thread read now holds {shown} ({reply.ending()})")
    if nonce in reply.text:
        return await probe.unless_stateless(
            f"{where} was sent to the model as the call's answer: the reply quotes it (inferred)"
        )
    if refused(reply):
        code = reply.error.get("code") if reply.error is not None else None
        if code or 400 <= reply.status < 500:
            return "pass", f"{label}: refused ({reply.ending()})"
        return "warn", f"{label}: refused without a code ({reply.ending()}): a client cannot tell it from a failure"
    if after is not None:
        return "pass", f"{label}: ignored ({reply.ending()}, and the thread read keeps the one answer)"
    return "pass", f"{label}: ignored ({reply.ending()}, and no event carries it; inferred: no thread read)"


def _held(thread: Thread, call_id: str) -> dict[str, Any] | None:
    """The answer to `call_id` the client keeps, if any."""
    return next((m for m in thread.messages if m.get("role") == "tool" and m.get("toolCallId") == call_id), None)


def _answers_in(messages: list[dict[str, Any]] | None, call_id: str) -> list[dict[str, Any]]:
    return [m for m in messages or [] if m.get("role") == "tool" and m.get("toolCallId") == call_id]


def _pairs(messages: list[dict[str, Any]]) -> list[tuple[Any, str]]:
    return [(m.get("id"), content_of(m)) for m in messages]


def _payload(nonce: str) -> str:
    return json.dumps({"conformance": nonce})


def _quote(message: dict[str, Any] | Any) -> str:
    text = content_of(message)
    return json.dumps(text if len(text) <= 80 else text[:77] + "...")
