"""The invariants, over what the machine saw: every input sent, every answer received, the store, the ledger."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field

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
    rewrites: defaultdict[str, list[list[str]]] = field(default_factory=lambda: defaultdict(list))
    """Threads whose owner sent, since the last check, a client-kept history that does not extend the stored one."""

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
    rewrites = journal.rewrites.pop(thread_id, [])
    if not rewrites or ids[: len(before)] == before:
        assert ids[: len(before)] == before, f"{thread_id}: {before} rewritten as {ids}"
    else:  # with history="client" the owner's own history is the new base (docs/security.md)
        assert any(ids[: len(sent)] == sent for sent in rewrites), f"{thread_id}: {ids} is none of {rewrites}"
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
