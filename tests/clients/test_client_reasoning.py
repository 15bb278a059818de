"""`fold_messages` builds reasoning messages, with their encrypted values, as `@ag-ui/client` 1.0 does.

A run's REASONING_* events add a reasoning message (triads or chunks); a REASONING_ENCRYPTED_VALUE sets the
`encryptedValue` of the message or tool call it names. The streams are generated; the same streams folded by the
TypeScript client (tests/node/client-1.0/fold-events.mjs) give the same messages.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from ag_ui.core import ReasoningMessage
from externals import missing_node
from hypothesis import given
from hypothesis import strategies as st
from ts_clients import NODE_DIR, TIMEOUT

from adapter import Adapter, create_app
from adapter.backends import BackendItem, ModelRequest, ReasoningDelta, TextDelta
from adapter.client import SERVER_ROLES, AGUIClient, fold_messages

Event = dict[str, Any]
WORDS = ["Let", " me", " think", ".", " The", " user", " greets", " me", "", " ✓"]


def reasoning_runs(rng: random.Random) -> list[list[Event]]:
    """One thread's runs: each reasons in triads or chunks, says something, maybe calls a tool, and signs some of it.

    Each encrypted value names a reasoning message, a tool call, or nothing the thread has (ignored by both clients).
    """
    runs: list[list[Event]] = []
    for run in range(rng.randint(1, 3)):
        events: list[Event] = [{"type": "RUN_STARTED", "threadId": "t1", "runId": f"r{run}"}]
        named: list[tuple[str, str]] = [("message", f"nothing-{run}")]
        for thought in range(rng.randint(0, 2)):
            message_id = f"think-{run}-{thought}"
            deltas = [rng.choice(WORDS) for _ in range(rng.randint(0, 4))]
            events.append({"type": "REASONING_START", "messageId": f"span-{run}-{thought}"})
            if rng.random() < 0.5:
                events.append({"type": "REASONING_MESSAGE_START", "messageId": message_id, "role": "reasoning"})
                events += [
                    {"type": "REASONING_MESSAGE_CONTENT", "messageId": message_id, "delta": d} for d in deltas if d
                ]
                events.append({"type": "REASONING_MESSAGE_END", "messageId": message_id})
            else:
                chunks = [{"type": "REASONING_MESSAGE_CHUNK", "delta": d} for d in deltas or [""]]
                chunks[0]["messageId"] = message_id
                events += chunks
            events.append({"type": "REASONING_END", "messageId": f"span-{run}-{thought}"})
            named.append(("message", message_id))
        answer = f"answer-{run}"
        events.append({"type": "TEXT_MESSAGE_START", "messageId": answer, "role": "assistant"})
        events.append({"type": "TEXT_MESSAGE_CONTENT", "messageId": answer, "delta": "Hello!"})
        events.append({"type": "TEXT_MESSAGE_END", "messageId": answer})
        if rng.random() < 0.5:
            call = f"call-{run}"
            events.append(
                {"type": "TOOL_CALL_START", "toolCallId": call, "toolCallName": "look", "parentMessageId": answer}
            )
            events.append({"type": "TOOL_CALL_ARGS", "toolCallId": call, "delta": "{}"})
            events.append({"type": "TOOL_CALL_END", "toolCallId": call})
            named.append(("tool-call", call))
        for subtype, entity in rng.sample(named, rng.randint(0, len(named))):
            value = f"sig-{entity}-{rng.randint(0, 9)}=="
            events.append(
                {"type": "REASONING_ENCRYPTED_VALUE", "subtype": subtype, "entityId": entity, "encryptedValue": value}
            )
        events.append({"type": "RUN_FINISHED", "threadId": "t1", "runId": f"r{run}"})
        runs.append(events)
    return runs


def folded(runs: Sequence[Sequence[Event]], *, drop_roles: frozenset[str] = frozenset()) -> list[list[Event]]:
    """The thread's messages after each run, as the Python client keeps them."""
    after: list[list[Event]] = []
    messages: list[Event] = []
    for events in runs:
        messages = fold_messages(messages, events, drop_roles=drop_roles)
        after.append(messages)
    return after


def expected_reasoning(runs: Sequence[Sequence[Event]]) -> dict[str, str]:
    """Each reasoning message's text: its deltas, in order."""
    texts: dict[str, str] = {}
    for events in runs:
        current = ""
        for event in events:
            if event["type"] in ("REASONING_MESSAGE_START", "REASONING_MESSAGE_CONTENT", "REASONING_MESSAGE_CHUNK"):
                current = event.get("messageId", current)
                texts[current] = texts.get(current, "") + event.get("delta", "")
    return texts


def expected_values(runs: Sequence[Sequence[Event]], messages: Sequence[Event]) -> dict[str, str]:
    """The last encrypted value each message or tool call of the thread was sent."""
    ids = {m["id"] for m in messages} | {c["id"] for m in messages for c in m.get("toolCalls", [])}
    sent = [e for events in runs for e in events if e["type"] == "REASONING_ENCRYPTED_VALUE"]
    return {e["entityId"]: e["encryptedValue"] for e in sent if e["entityId"] in ids}


@given(st.randoms(use_true_random=False))
def test_reasoning_events_fold_into_reasoning_messages_with_their_encrypted_values(rng: random.Random) -> None:
    runs = reasoning_runs(rng)

    messages = folded(runs)[-1]

    reasoning = {m["id"]: m["content"] for m in messages if m["role"] == "reasoning"}
    assert reasoning == expected_reasoning(runs)
    signed = {m["id"]: m["encryptedValue"] for m in messages if "encryptedValue" in m}
    signed |= {c["id"]: c["encryptedValue"] for m in messages for c in m.get("toolCalls", []) if "encryptedValue" in c}
    assert signed == expected_values(runs, messages)
    assert all(m["role"] == "reasoning" for m in messages if m["id"].startswith("think-"))


@given(st.randoms(use_true_random=False))
def test_a_client_that_leaves_reasoning_to_the_server_builds_none(rng: random.Random) -> None:
    runs = reasoning_runs(rng)

    messages = folded(runs, drop_roles=SERVER_ROLES)[-1]

    assert [m for m in messages if m["role"] == "reasoning"] == []
    assert not any("encryptedValue" in c for m in messages for c in m.get("toolCalls", []))


@pytest.mark.needs_node
def test_the_typescript_client_folds_the_same_streams_into_the_same_messages() -> None:
    problem = missing_node()
    assert problem is None, problem
    node = shutil.which("node")
    assert node is not None
    threads = [reasoning_runs(random.Random(seed)) for seed in range(200)]
    script = NODE_DIR / "client-1.0" / "fold-events.mjs"

    done = subprocess.run(
        [node, script.name],
        cwd=script.parent,
        input=json.dumps(threads),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    assert not done.stderr, done.stderr
    for runs, by_typescript in zip(threads, json.loads(done.stdout), strict=True):
        assert folded(runs) == by_typescript, json.dumps(runs)


class Thinks:
    """A model that reasons, signed, before it answers; it keeps what each request gave it."""

    def __init__(self) -> None:
        self.given: list[list[ReasoningMessage]] = []

    async def stream(self, request: ModelRequest) -> AsyncIterator[BackendItem]:
        self.given.append([m for m in request.messages if isinstance(m, ReasoningMessage)])
        yield ReasoningDelta("The user ", encrypted_value="c2ln+/==")
        yield ReasoningDelta("greets me.")
        yield TextDelta("Hello!")


async def test_the_client_keeps_the_adapter_s_reasoning_and_sends_it_back() -> None:
    model = Thinks()

    async with AGUIClient(create_app(Adapter(model))) as client:
        thread = client.thread()
        await thread.say("hi")
        kept = [m for m in thread.messages if m["role"] == "reasoning"]
        await thread.say("again")

    assert [{k: m[k] for k in ("role", "content", "encryptedValue")} for m in kept] == [
        {"role": "reasoning", "content": "The user greets me.", "encryptedValue": "c2ln+/=="}
    ]
    assert [m["role"] for m in thread.messages] == ["user", "reasoning", "assistant"] * 2
    assert [[(m.id, m.content, m.encrypted_value) for m in given] for given in model.given] == [
        [],
        [(kept[0]["id"], "The user greets me.", "c2ln+/==")],
    ]
