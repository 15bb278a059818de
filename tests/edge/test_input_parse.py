"""The edge's one-pass parse (pydantic's JSON parser on the body) builds exactly what the checked path builds.

The checked path (JSON's rules, unknown kinds dropped, then validation) is the definition; the fast
path may only decline. For any body both accept, the input is the same, value for value and type for
type; for any body the checked path refuses, the answer is the same refusal.
"""

from __future__ import annotations

import json
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import HOSTILE, JSON, requests

# private on purpose: the edge's two parse paths are compared with each other, body by body
from adapter._edge._input import _validate_checked, _validate_json, parse_run_input
from adapter._errors import InputRejected


def outcome(parse: Any, body: bytes) -> tuple[str, Any]:
    try:
        parsed = parse(body)
    except InputRejected as refused:
        return "refused", (refused.status_code, refused.code, refused.message, refused.details)
    return "parsed", repr(parsed.model_dump(by_alias=True))


def same_as_checked(body: bytes) -> None:
    fast = _validate_json(body)
    checked = outcome(_validate_checked, body)
    if fast is not None:
        assert checked == ("parsed", repr(fast.model_dump(by_alias=True)))
    assert outcome(edge, body) == outcome(checked_only, body)


def edge(body: bytes) -> Any:
    return parse_run_input(body).input


def checked_only(body: bytes) -> Any:
    """The edge with the checked path alone: every check before and after the parse as it is."""
    with mock.patch("adapter._edge._input._validate_json", return_value=None):
        return parse_run_input(body).input


@settings(max_examples=300)
@given(requests("thread-1", []))
def test_fuzzed_bodies_parse_as_the_checked_path_does(request: tuple[str, bytes]) -> None:
    same_as_checked(request[1])


@settings(max_examples=200)
@given(st.sampled_from(["state", "forwardedProps", "threadId", "messages"]), HOSTILE | JSON, st.booleans())
def test_hostile_values_parse_as_the_checked_path_does(field: str, value: Any, ascii_only: bool) -> None:
    body = {"threadId": "t", "runId": "r", "messages": [], "tools": [], "context": [], field: value}
    same_as_checked(json.dumps(body, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass"))


BASE = '{"threadId":"t","runId":"r","messages":%s,"tools":[],"context":[],"state":%s}'


@pytest.mark.parametrize(
    ("messages", "state"),
    [
        ("[]", "NaN"),
        ("[]", "-Infinity"),
        ("[]", "9" * 5000),
        ("[]", "9" * 5000 + ".1"),
        ("[]", "1e400"),
        ("[]", '"\\ud800"'),
        ("[]", '"\\ud83d\\ude00"'),
        ("[]", '{"a": 1, "a": 2}'),
        ("[]", '"a\x01b"'),
        ("[]", "[" * 300 + "]" * 300),
        ('[{"id": "1", "role": "robot"}, {"id": "2", "role": "user", "content": "hi"}]', "null"),
        ('[{"id": "1", "role": "user", "content": [{"type": "hologram"}, {"type": "text", "text": "hi"}]}]', "null"),
        ('[{"id": "1", "role": "user", "content": "\\u00e9 \xc3\xa9"}]', "0"),
    ],
)
def test_edge_cases_parse_as_the_checked_path_does(messages: str, state: str) -> None:
    same_as_checked((BASE % (messages, state)).encode("utf-8", "surrogatepass"))


def test_the_common_body_takes_the_fast_path() -> None:
    body = BASE % ('[{"id": "1", "role": "user", "content": "hi"}]', '{"n": 1.5}')
    assert _validate_json(body.encode()) is not None


@pytest.mark.parametrize("padding", [0, 100_000])
@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_refused_however_long_the_body(padding: int, constant: str) -> None:
    messages = json.dumps([{"id": "1", "role": "user", "content": "x" * padding}])
    body = (BASE % (messages, constant)).encode()
    assert _validate_json(body) is None
    with pytest.raises(InputRejected) as refused:
        parse_run_input(body)
    assert (refused.value.status_code, refused.value.code) == (422, "INVALID_INPUT")


@pytest.mark.parametrize("padding", [0, 100_000])
def test_nan_inside_a_string_is_text(padding: int) -> None:
    messages = json.dumps([{"id": "1", "role": "user", "content": "NaN Infinity " + "x" * padding}])
    content = parse_run_input((BASE % (messages, "1")).encode()).input.messages[0].content
    assert isinstance(content, str)
    assert content.startswith("NaN Infinity")
