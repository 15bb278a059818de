"""Cases about the resume gate: inputs that must not close an open approval, or must not run its tool.

Each input here is sent with the thread's history, which carries the gated call with neither a result nor an entry
answering it: AG-UI 1.1 says a producer that can tell an interrupt is open, by its own record or by such a history,
keeps it open. So these fail for a stateless target too, unlike a replay (`Probe.unless_stateless`).
"""

from __future__ import annotations

import json
from typing import Any

from adapter.conformance._client import new_id, resolved
from adapter.conformance._grader import schema_issues
from adapter.conformance._probe import Probe, Skip, Verdict, case, held, refused


@case("new-message-while-open", "RES-7", "RES-6", part="approvals")
async def new_message_while_open(probe: Probe) -> Verdict:
    """A new user message while an approval is open is refused, or the interrupt is issued again."""
    approval = await probe.approval()
    open_ids = {str(i.get("id")) for i in approval.interrupts}
    watch = await probe.watch(approval.thread, approval.gate())
    reply = await approval.thread.say("Something else, while the approval waits.")
    ran = await watch.ran(reply)
    if ran.count:
        return "fail", f"the gated tool ran without an answer ({reply.ending()}; {ran})"
    if ran.answers:
        return "fail", f"a new message answered the open call ({reply.ending()}; {ran}): it must stay open"
    verdict = held(reply, open_ids) or ("fail", f"the open interrupt was silently dropped: {reply.ending()}")
    return verdict[0], f"{verdict[1]}; {ran}"


@case("unknown-interrupt", "RES-8", "RES-6", part="approvals")
async def unknown_interrupt(probe: Probe) -> Verdict:
    """A resume naming an interrupt the server never raised has no effect."""
    approval = await probe.approval()
    watch = await probe.watch(approval.thread, approval.gate())
    reply = await approval.thread.resume(resolved(new_id("no-such-interrupt"), probe.answer(approval.first)))
    ran = await watch.ran(reply)
    if ran.count:
        return "fail", f"an unknown interrupt id approved the open call: the gated tool ran ({ran})"
    if ran.answers:
        return "fail", f"an unknown interrupt id answered the open call ({reply.ending()}; {ran}): it must stay open"
    open_ids = {str(i.get("id")) for i in approval.interrupts}
    verdict = held(reply, open_ids) or ("fail", f"the open interrupt was dropped: {reply.ending()}")
    return verdict[0], f"{verdict[1]}; {ran}"


@case("foreign-interrupt", "RES-8", "RES-9", "INT-3", part="approvals")
async def foreign_interrupt(probe: Probe) -> Verdict:
    """Another thread's interrupt id does not approve anything on this thread."""
    mine = await probe.approval()
    theirs = await probe.approval()
    foreign = str(theirs.first.get("id"))
    if foreign == mine.first.get("id"):  # the foreign id is this thread's own: nothing to tell apart
        return "warn", f"both threads got the interrupt id {foreign}: ids are not unique across threads"
    watch = await probe.watch(mine.thread, mine.gate())
    reply = await mine.thread.resume(resolved(foreign, probe.answer(theirs.first)))
    ran = await watch.ran(reply)
    if ran.count:
        return "fail", f"thread B's interrupt {foreign} approved thread A's call: the gated tool ran ({ran})"
    if ran.answers:
        return "fail", f"thread B's interrupt {foreign} answered thread A's open call ({reply.ending()}; {ran})"
    open_ids = {str(i.get("id")) for i in mine.interrupts}
    verdict = held(reply, open_ids) or ("fail", f"the open interrupt was dropped: {reply.ending()}")
    return verdict[0], f"{verdict[1]}; {ran}"


@case("partial-resume", "RES-6", "RES-5", "RES-13", part="approvals")
async def partial_resume(probe: Probe) -> Verdict:
    """Answering one of two open interrupts is refused, or the other is issued again; nothing runs for it."""
    message = probe.options.parallel_approval_message
    if message is None:
        raise Skip("needs --parallel-approval-message (a message that opens two interrupts)")
    approval = await probe.approval(message, at_least=2)
    answered, *rest = approval.interrupts
    watches = [await probe.watch(approval.thread, approval.gate(i)) for i in (answered, *rest)]
    reply = await approval.thread.resume(resolved(str(answered.get("id")), probe.answer(answered)))
    ran = [await watch.ran(reply) for watch in watches]
    rest_ids = {str(i.get("id")) for i in rest}
    if ran[0].exact:  # one count for the thread: more than the answered call, or anything before a refusal
        limit = 0 if refused(reply) else 1
        if ran[0].count > limit:
            return "fail", f"the partial resume ran {ran[0].count} tool(s) ({reply.ending()}; {ran[0]})"
    elif any(each.count for each in ran[1:]):
        return "fail", f"an unanswered interrupt's tool ran ({ran[1]})"
    elif refused(reply) and ran[0].count:
        return "fail", f"refused ({reply.ending()}) after running the answered call: the batch was not checked first"
    if any(each.answers for each in ran[1:]):
        return "fail", f"an unanswered interrupt's call got an answer ({reply.ending()}; {ran[1]}): it must stay open"
    verdict = held(reply, rest_ids) or ("fail", f"a partial resume was accepted: {reply.ending()}")
    return verdict[0], f"{verdict[1]}; {ran[0]}"


@case("duplicate-entry", "RES-14", part="approvals")
async def duplicate_entry(probe: Probe) -> Verdict:
    """Two entries for one interrupt are refused, and never run the tool twice."""
    approval = await probe.approval()
    entry = resolved(str(approval.first.get("id")), probe.answer(approval.first))
    watch = await probe.watch(approval.thread, approval.gate())
    reply = await approval.thread.resume(entry, entry)
    ran = await watch.ran(reply)
    if ran.count > 1:
        return "fail", f"the tool ran {ran.count} times ({ran})"
    if refused(reply):
        return "pass", f"refused: {reply.ending()}; {ran}"
    return "warn", f"accepted the duplicate (the tool ran {ran.count} time(s); {ran}): {reply.ending()}"


@case("invalid-payload", "RES-11", "RES-13", part="approvals")
async def invalid_payload(probe: Probe) -> Verdict:
    """A payload that violates `responseSchema` is refused; a corrected one then works."""
    approval = await probe.approval()
    interrupt = approval.first
    schema = interrupt.get("responseSchema")
    if not isinstance(schema, dict) or not schema:
        raise Skip("the interrupt has no responseSchema to violate")
    bad = _violating(schema)
    watch = await probe.watch(approval.thread, approval.gate())
    reply = await approval.thread.resume(resolved(str(interrupt.get("id")), bad))
    ran = await watch.ran(reply)
    if ran.count:
        return "fail", f"the payload {_json(bad)} violates responseSchema, yet the tool ran ({ran})"
    if ran.answers:
        return "fail", f"the payload {_json(bad)} violates responseSchema, yet it answered the call ({ran})"
    if not refused(reply):
        return "warn", f"the payload {_json(bad)} violates responseSchema and was accepted ({reply.ending()})"
    first = reply.ending()
    corrected = await approval.thread.resume(resolved(str(interrupt.get("id")), probe.answer(interrupt)))
    ran = await watch.ran(reply, corrected)
    if refused(corrected) or ran.count != 1:
        return "fail", f"refused ({first}), but the corrected resume then failed: {corrected.ending()}; {ran}"
    return "pass", f"refused ({first}); the corrected resume ran the tool once ({ran})"


def _json(value: Any) -> str:
    return json.dumps(value)


def _violating(schema: dict[str, Any]) -> Any:
    """A payload the schema rejects: a non-boolean `approved`, or failing that a bare string.

    The target's schema is checked within a step budget (`schema_tools.validate`): a schema that costs 2^n
    to evaluate, or refers to itself without end, makes the case a skip, not a stall or a traceback.
    """
    for candidate in ({"approved": "not a boolean"}, {}, "not an object"):
        issues = schema_issues(candidate, schema)
        if isinstance(issues, str):
            raise Skip(issues)
        if issues:
            return candidate
    raise Skip("the interrupt's responseSchema accepts any payload")
