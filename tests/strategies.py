"""Hypothesis strategies for hostile input: JSON with planted values, fuzzed messages, tools, resumes and bodies.

What tests/edge/test_http_fuzz.py throws at the HTTP edge, and what tests/edge/test_input_parse.py and
tests/history/test_history_reuse.py reuse: run inputs built from the protocol's shapes with hostile values planted
in them (deep nesting, long numbers, lone surrogates, patterns that backtrack), plain JSON, and raw bytes.
"""

from __future__ import annotations

import json
import os
from typing import Any

from hypothesis import strategies as st

STRESSED = os.environ.get("AGUI_STRESS") == "1"
"""`AGUI_STRESS=1 bash .ci/run`: the deeper run, where a property test may spend a larger example budget."""


def nested(depth: int, leaf: Any = 1) -> Any:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.just(10**4299)  # the most digits Python writes back as JSON
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=12,
)
HOSTILE = st.one_of(
    st.integers(250, 400).map(nested),
    st.integers(250, 400).map(lambda depth: nested(depth, {"a": "b"})),
    st.integers(1, 5000).map(lambda n: "1." + "9" * n),
    st.integers(1, 5000).map(lambda n: "9" * n + ".1"),
    st.sampled_from(["", "\u0000", "\ud800", "<script>alert(1)</script>", "a" * 70_000, "1.0", "2.0", "0.0"]),
    JSON,
)
VALUES = st.one_of(HOSTILE, JSON)
SCHEMAS = st.one_of(
    st.just({"type": "object", "properties": {"x": {"type": "string", "pattern": "^(a+)+$"}}}),
    st.just({"type": "object", "properties": {"x": {"$ref": "https://evil.example/s.json"}}}),
    st.just({"type": "object", "properties": {"x": {"$ref": "#/$defs/missing"}}}),
    st.just({"type": "object", "$defs": {"a": {"$ref": "#/$defs/a"}}, "properties": {"x": {"$ref": "#/$defs/a"}}}),
    st.just({"type": 5}),
    st.just({"type": "object", "properties": {}}),
    st.integers(20, 300).map(lambda depth: {"type": "object", "properties": {"x": nested(depth, {})}}),
    VALUES,
)


def mostly(good: st.SearchStrategy[Any], bad: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """`good` nine times in ten: a fuzzed input must stay valid often enough to reach the engine."""
    return st.integers(0, 9).flatmap(lambda roll: bad if roll == 0 else good)


TEXTS = st.one_of(
    st.sampled_from(["refund A100", "look up order A100", "go to settings", "toast: hi", "confirm delete x"]),
    st.sampled_from(["track my parcel", "book a meeting room", "hello", "open a ticket"]),
    st.text(max_size=30),
)


@st.composite
def messages(draw: st.DrawFn) -> Any:
    role = draw(mostly(st.just("user"), st.sampled_from(["assistant", "tool", "system", "activity", "robot"])))
    message: dict[str, Any] = {"id": draw(st.text(min_size=1, max_size=8)), "role": role}
    if role == "tool":
        message |= {"toolCallId": draw(st.text(max_size=12)), "content": draw(mostly(st.text(max_size=20), VALUES))}
    elif role == "assistant":
        call = {"id": "c1", "type": "function", "function": {"name": draw(TEXTS), "arguments": draw(st.text())}}
        message |= {"content": draw(TEXTS), "toolCalls": draw(mostly(st.just([call]), VALUES))}
    else:
        message["content"] = draw(mostly(TEXTS, VALUES))
    return message


@st.composite
def client_tools(draw: st.DrawFn) -> Any:
    tool: dict[str, Any] = {"name": draw(st.sampled_from(["navigate", "show_toast", "pick", "lookup_order"]))}
    tool |= {
        "description": draw(st.text(max_size=10)),
        "parameters": draw(mostly(st.just({"type": "object"}), SCHEMAS)),
    }
    if draw(st.booleans()):
        tool["metadata"] = {"resultSchema": draw(SCHEMAS)}
    return tool


ANSWER = st.tuples(
    mostly(st.sampled_from(["resolved", "cancelled"]), st.text(max_size=3)),
    st.one_of(
        st.fixed_dictionaries({"approved": st.booleans()}, optional={"editedArgs": VALUES}),
        st.fixed_dictionaries({"approved": st.booleans(), "editedArgs": st.just({})}),
        st.fixed_dictionaries({"confirmed": st.booleans()}),
        VALUES,
    ),
    st.booleans(),
    st.integers(0, 3),
)
"""An answer to an interrupt not yet known: status, payload, whether to send it, which interrupt."""


def resume_entries(answers: list[Any], interrupts: list[Any]) -> list[Any]:
    """Address each drawn answer to one of the interrupts really open (or to a made-up id when none is)."""
    entries = []
    for status, payload, with_payload, target in answers:
        interrupt_id = interrupts[target % len(interrupts)].get("id") if interrupts else f"int_{target}"
        entries.append({"interruptId": interrupt_id, "status": status} | ({"payload": payload} if with_payload else {}))
    return entries


@st.composite
def run_inputs(draw: st.DrawFn, thread: str, interrupts: list[Any]) -> Any:
    resuming = draw(mostly(st.booleans(), st.just(True)))
    body: dict[str, Any] = {
        "threadId": draw(mostly(st.just(thread), VALUES)),
        "runId": draw(st.text(min_size=1, max_size=8)),
        "messages": draw(st.lists(messages(), max_size=2)),
    }
    if resuming:
        body["messages"] = body["messages"][:0] if draw(mostly(st.just(True), st.just(False))) else body["messages"]
        body["resume"] = resume_entries(draw(st.lists(ANSWER, max_size=3)), interrupts)
    for key, values in {
        "tools": st.lists(client_tools(), max_size=2),
        "context": st.lists(st.fixed_dictionaries({"description": st.text(), "value": st.text()}), max_size=2),
        "state": VALUES,
        "forwardedProps": VALUES,
        "protocolVersion": mostly(st.sampled_from(["1.0", "1.1"]), HOSTILE),
    }.items():
        if draw(st.integers(0, 3)) == 0:
            body[key] = draw(values)
    if draw(st.integers(0, 4)) == 0:  # plant a hostile value in a known field
        body[draw(st.sampled_from([*body, "resume", "parentRunId"]))] = draw(HOSTILE)
    return body


@st.composite
def requests(draw: st.DrawFn, thread: str, interrupts: list[Any]) -> tuple[str, bytes]:
    kind = draw(st.integers(0, 19))
    if kind == 0:
        return draw(st.sampled_from(["application/json", "text/plain", ""])), draw(st.binary(max_size=200))
    body = draw(JSON | HOSTILE) if kind == 1 else draw(run_inputs(thread, interrupts))
    text = json.dumps(body, ensure_ascii=draw(st.booleans()))
    return "application/json", text.encode("utf-8", "surrogatepass")
