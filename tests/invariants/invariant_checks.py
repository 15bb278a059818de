"""The invariants, over what the machine saw: every input sent, every answer received, the store, the ledger."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

import httpx
from agui import TERMINAL, assert_clean_stream, parse_sse
from invariant_world import Execution, Policy

# private on purpose: every code the adapter may answer with, to check that each refusal carries a known one
from adapter._errors import HTTP_CODES, RUN_CODES
from adapter.stores import StoredThread


@dataclass
class Seen:
    """One answer a principal received, about a thread (the one it asked about)."""

    principal: str
    thread_id: str
    body: bytes


@dataclass
class Journal:
    """What every principal sent and received, and what the store held at the last check."""

    sent: defaultdict[tuple[str, str], set[str]] = field(default_factory=lambda: defaultdict(set))
    """User message ids each principal sent to each thread."""
    texts: defaultdict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    """The texts each principal wrote (unique markers): never a secret from their author."""
    seen: list[Seen] = field(default_factory=list)
    stored: dict[str, list[str]] = field(default_factory=dict)
    owners: dict[str, str | None] = field(default_factory=dict)
    produced: defaultdict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    """Message ids that answers about each thread carried (what its runs produced, as far as a client saw)."""
    forged: set[str] = field(default_factory=set)
    """Ids of the ToolMessages clients wrote themselves."""

    def note_answer(self, principal: str, thread_id: str, body: bytes) -> None:
        self.seen.append(Seen(principal, thread_id, body))
        for event in parse_sse(body)[0]:
            for key in ("messageId", "parentMessageId"):
                if isinstance(event.get(key), str):
                    self.produced[thread_id].add(event[key])


@dataclass
class Observed:
    """The store as one check read it."""

    threads: dict[str, StoredThread | None]
    client_kept: bool
    """history="client": the owner's client holds the conversation and may rewrite it."""


def check_answer(status: int, headers: httpx.Headers, body: bytes, *, resumed: bool) -> None:
    """Every answer is one clean stream ending in exactly one terminal event with a known code, or a coded 4xx."""
    if status == 200 and headers.get("content-type", "").startswith("text/event-stream"):
        events = assert_clean_stream(body, resumed=resumed)
        assert [e["type"] for e in events].count("RUN_FINISHED") + [e["type"] for e in events].count("RUN_ERROR") == 1
        assert events[-1]["type"] in TERMINAL
        if events[-1]["type"] == "RUN_ERROR":
            assert events[-1].get("code") in RUN_CODES, events[-1]
        return
    assert 400 <= status < 500, (status, body[:300])
    assert json.loads(body)["error"]["code"] in HTTP_CODES, body[:300]


def check_growth(journal: Journal, thread_id: str, stored: StoredThread | None) -> None:
    """Stored messages only grow, by the owner's own messages and what the thread's runs made; the owner stays."""
    before = journal.stored.get(thread_id, [])
    if stored is None:
        assert not before, f"{thread_id} lost its messages"
        return
    ids = [m.id for m in stored.messages]
    # no client's history rewrites the record, in either history mode: a branch only appends (issue 27)
    assert ids[: len(before)] == before, f"{thread_id}: {before} rewritten as {ids}"
    owner = stored.head.owner
    assert journal.owners.setdefault(thread_id, owner) == owner, f"{thread_id} changed owner"
    others = set().union(*(ids_ for (_, t), ids_ in journal.sent.items() if t != thread_id))
    others |= set().union(*(made for t, made in journal.produced.items() if t != thread_id))
    for message in stored.messages:
        assert message.id not in others, f"{thread_id} holds {message.id} of another thread"
        if message.role == "user":
            assert message.id in journal.sent[(owner or "", thread_id)], f"{thread_id} holds a foreign {message.json}"
    journal.stored[thread_id] = ids


def secrets_of(stored: StoredThread) -> set[str]:
    """What a reader of the thread learns: message ids, what people wrote, what the tool returned."""
    found: set[str] = set()
    for message in stored.messages:
        found.add(message.id)
        content = json.loads(message.json).get("content")
        if message.role == "user" or (message.role == "tool" and str(content).startswith("paid")):
            found.add(str(content))
    return found


def check_reads(journal: Journal, threads: dict[str, StoredThread | None], policy: Policy) -> None:
    """No principal ever received a message of a thread it may not read."""
    for thread_id, stored in threads.items():
        if stored is None:
            continue
        secrets = secrets_of(stored)
        for seen in journal.seen:
            if policy(seen.principal, stored.head.owner, "read"):
                continue
            own = journal.texts[seen.principal]
            leaked = [s for s in secrets - own if s.encode() in seen.body]
            assert not leaked, f"{seen.principal} received {leaked} of {thread_id}: {seen.body[:400]!r}"


def tool_answers(stored: StoredThread) -> dict[str, list[tuple[str, str]]]:
    """The stored ToolMessages (id, content) of every `pay` call, by call id."""
    pays = set()
    answers: defaultdict[str, list[tuple[str, str]]] = defaultdict(list)
    for message in stored.messages:
        body = json.loads(message.json)
        for call in body.get("toolCalls") or []:
            if call["function"]["name"] == "pay":
                pays.add(call["id"])
        if message.role == "tool" and body["toolCallId"] in pays:
            answers[body["toolCallId"]].append((message.id, str(body.get("content"))))
    return answers


def check_executions(
    journal: Journal, executions: list[Execution], dead: set[int], world: Observed, policy: Policy
) -> None:
    """Each approved call runs at most once on a live replica, and its stored answer says what happened."""
    by_call: defaultdict[str, list[Execution]] = defaultdict(list)
    for execution in executions:
        by_call[execution.call_id].append(execution)
        owner = journal.owners.get(execution.thread_id)
        assert policy(execution.principal, owner, "approve"), f"{execution.principal} approved on {owner}'s thread"
    for call_id, runs in by_call.items():
        assert len({run.key for run in runs}) == 1, f"{call_id} ran under different keys"
        live = [run for run in runs if run.result is not None and run.generation not in dead]
        assert len(live) <= 1, f"{call_id} ran {len(live)} times"
    for stored in world.threads.values():
        for call_id, answers in tool_answers(stored).items() if stored is not None else ():
            assert len(answers) == 1, f"{call_id} answered {answers}"
            (message_id, content), results = answers[0], {run.result for run in by_call[call_id]}
            if message_id in journal.forged:
                # with history="client" the owner's history is the truth (docs/security.md); never with "server"
                assert world.client_kept, f"{call_id}: a client's answer {content!r} was stored"
            elif content.startswith("paid"):
                assert content in results, f"{call_id} stored {content} but ran {results}"
            else:
                assert not by_call[call_id], f"{call_id} stored {content!r} but ran {len(by_call[call_id])}x"


# Issue 27: one record of what happened.

INVENTED = ("No result was recorded", "returned no result", "no result for this call")
"""What an adapter writes when it answers a call in its owner's place: never stored (AG-UI FE-1)."""


def wire(stored: StoredThread | None) -> list[dict[str, Any]]:
    """The stored messages as wire JSON."""
    return [json.loads(message.json) for message in stored.messages] if stored is not None else []


def check_one_call_one_answer(thread_id: str, messages: list[dict[str, Any]]) -> None:
    """Every call id of the thread is one call, in one assistant message, with at most one ToolMessage answer."""
    calls: Counter[str] = Counter()
    for message in messages:
        if message["role"] == "assistant":
            calls.update(call["id"] for call in message.get("toolCalls") or [])
    answers = Counter(message["toolCallId"] for message in messages if message["role"] == "tool")
    twice = {call: count for call, count in calls.items() if count > 1}
    assert not twice, f"{thread_id}: one id, several calls {twice}: {_brief(messages)}"
    answered_twice = {call: count for call, count in answers.items() if count > 1}
    assert not answered_twice, f"{thread_id}: calls answered more than once {answered_twice}: {_brief(messages)}"
    ids = Counter(message["id"] for message in messages)
    assert all(count == 1 for count in ids.values()), f"{thread_id}: message ids repeat {ids.most_common(2)}"


def check_kept(kept: dict[str, list[tuple[str, str]]], thread_id: str, messages: list[dict[str, Any]]) -> None:
    """The stored thread only grows: each message it held it still holds, at its place, as it was.

    An activity message (a form card, an approval's record) is the engine's to replace under its id; its
    id stays at its place.
    """
    before = kept.get(thread_id, [])
    now = [(message["id"], json.dumps(message, sort_keys=True)) for message in messages]
    assert [i for i, _ in now[: len(before)]] == [i for i, _ in before], (
        f"{thread_id}: the record lost or moved messages: {[i for i, _ in before]} became {[i for i, _ in now]}"
    )
    for (message_id, was), (_, is_now), message in zip(before, now, messages, strict=False):
        if message["role"] != "activity":
            assert was == is_now, f"{thread_id}: {message_id} was rewritten: {was} became {is_now}"
    kept[thread_id] = now


PERSON_SAID = ("cancelled", "declined")
"""The `error` of an answer that records a person's decision on a call (the engine words it, the person said it)."""


@dataclass
class Authors:
    """Who wrote what a ToolMessage may say: the upstream (for its own calls), a client, a person deciding."""

    upstream: defaultdict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    """The results the upstream sent for its own calls, by call id."""
    client: set[str] = field(default_factory=set)
    """ToolMessage contents clients wrote."""
    decided: list[Any] = field(default_factory=list)
    """What people answered interrupts with (resume payloads), as JSON values."""
    own: set[str] = field(default_factory=set)
    """The names of the upstream's own tools."""


def check_not_invented(thread_id: str, messages: list[dict[str, Any]], authors: Authors) -> None:
    """No stored answer is one the adapter made up: an own call's answer is the upstream's, a client's or a person's."""
    names = {
        call["id"]: call["function"]["name"]
        for message in messages
        if message["role"] == "assistant"
        for call in message.get("toolCalls") or []
    }
    for message in messages:
        if message["role"] != "tool":
            continue
        content, call_id = str(message.get("content")), message["toolCallId"]
        assert not any(words in content for words in INVENTED), f"{thread_id}: an invented answer {message}"
        assert "FORGED" not in content, f"{thread_id}: the upstream's result for a call it did not defer {message}"
        if names.get(call_id) in authors.own and message.get("error") not in PERSON_SAID:
            said = content in authors.upstream[call_id] or content in authors.client or _decided(content, authors)
            assert said, f"{thread_id}: nobody said {message} ({call_id} answered by the adapter?)"


def _decided(content: str, authors: Authors) -> bool:
    try:
        value = json.loads(content)
    except ValueError:
        return False
    return value in authors.decided or value == {"cancelled": True}


def check_server_said(thread_id: str, sent: list[dict[str, Any]], messages: list[dict[str, Any]]) -> None:
    """What the server said reaches the model as stored: the upstream saw each stored call and answer as kept."""
    stored = {message["id"]: message for message in messages}
    for message in sent:
        kept = stored.get(message["id"])
        if kept is None or kept["role"] not in ("assistant", "tool") or kept["role"] != message["role"]:
            continue  # another role: the upstream named a new message after one it was sent (a provisional answer)
        for key in ("content", "toolCallId"):
            assert message.get(key) == kept.get(key), f"{thread_id}: the model saw {message}, the record holds {kept}"
        calls = [call["id"] for call in message.get("toolCalls") or []]
        assert calls == [call["id"] for call in kept.get("toolCalls") or []], f"{thread_id}: {message} vs {kept}"


def _brief(messages: list[dict[str, Any]]) -> list[str]:
    """The thread in one line per message: role, id, and what it calls or answers."""
    lines = []
    for message in messages:
        calls = [f"{c['id']}:{c['function']['name']}" for c in message.get("toolCalls") or []]
        answer = message.get("toolCallId")
        lines.append(f"{message['role']} {message['id']} {calls or answer or ''}".strip())
    return lines
