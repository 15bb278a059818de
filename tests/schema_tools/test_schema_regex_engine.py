"""Patterns are matched by RE2: linear in the text, so a hostile pattern cannot stall the caller."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from schema_tools import SchemaPolicyError, avalidate, check_schema, validate
from schema_tools._validate import INLINE_WEIGHT  # private on purpose: where validation moves to a thread

EVIL = "^(a+)+$"
ATTACK = "a" * 16 + "!"  # short enough that a backtracking engine finishes too: these tests check results


def keywords(schema: Any, instance: Any) -> list[tuple[str, str]]:
    return [(issue.pointer, issue.keyword) for issue in validate(instance, schema)]


@pytest.mark.parametrize(
    ("schema", "instance", "expected"),
    [
        pytest.param({"type": "string", "pattern": EVIL}, ATTACK, [("", "pattern")], id="pattern"),
        pytest.param(
            {"type": "object", "patternProperties": {EVIL: {"type": "integer"}}},
            {ATTACK: "x", "aaa": "y"},
            [("/aaa", "type")],
            id="patternProperties",
        ),
        pytest.param(
            {"type": "object", "patternProperties": {EVIL: {}}, "additionalProperties": False},
            {ATTACK: 1},
            [("", "additionalProperties")],
            id="additionalProperties",
        ),
        pytest.param(
            {"type": "object", "allOf": [{"patternProperties": {EVIL: {}}}], "unevaluatedProperties": False},
            {ATTACK: 1, "aa": 2},
            [("", "unevaluatedProperties")],
            id="unevaluatedProperties",
        ),
        pytest.param({"type": "string", "format": "regex"}, "(a)\\1", [("", "format")], id="format-regex"),
    ],
)
def test_hostile_patterns_are_matched_in_linear_time(schema: Any, instance: Any, expected: Any) -> None:
    assert keywords(schema, instance) == expected


HOSTILE = [
    ({"type": "string", "pattern": EVIL}, "a" * 4096 + "!"),
    ({"type": "object", "patternProperties": {EVIL: {}}, "additionalProperties": False}, {"a" * 4096 + "!": 1}),
    (
        {"type": "object", "allOf": [{"patternProperties": {EVIL: {}}}], "unevaluatedProperties": False},
        {"a" * 99 + "!": 1},
    ),
]


def test_hostile_patterns_do_not_stall_the_caller() -> None:
    """Each case would backtrack for longer than the universe's age; the child process must finish at all."""
    script = "import json, sys\nfrom schema_tools import validate\nfor schema, instance in json.load(sys.stdin):\n"
    script += "    assert validate(instance, schema)\n"
    subprocess.run([sys.executable, "-c", script], input=json.dumps(HOSTILE), text=True, check=True, timeout=120)


def test_a_pattern_re2_cannot_run_is_a_policy_error_in_validate_and_check_schema() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string", "pattern": "^(?=x)x$"}}}

    with pytest.raises(SchemaPolicyError) as at_validation:
        validate({"a": "x"}, schema)
    with pytest.raises(SchemaPolicyError) as at_check:
        check_schema(schema)

    assert at_validation.value.violations[0].rule == "pattern-invalid"
    assert [(v.pointer, v.rule) for v in at_check.value.violations] == [("/properties/a/pattern", "pattern-invalid")]


@pytest.mark.parametrize(
    ("pattern", "text", "matches"),
    [
        pytest.param("^[0-9]+$", "٣", False, id="digits-are-ascii-as-in-ecma-262"),
        pytest.param("^\\p{L}+$", "日本", True, id="unicode-classes"),
        pytest.param("^.$", "é", True, id="dot-is-one-character"),
        pytest.param("b", "abc", True, id="unanchored"),
    ],
)
def test_pattern_semantics(pattern: str, text: str, matches: bool) -> None:
    assert (validate(text, {"pattern": pattern}) == []) is matches


async def test_avalidate_runs_a_large_instance_on_a_worker_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    import schema_tools._validate as module  # private on purpose: a spy on where validation runs

    seen: list[bool] = []
    real = module.validate

    def spy(instance: Any, schema: Any, **options: Any) -> Any:
        seen.append(threading.current_thread() is threading.main_thread())
        return real(instance, schema, **options)

    monkeypatch.setattr(module, "validate", spy)
    await avalidate([1] * 10, {"type": "array"})
    await avalidate([1] * (INLINE_WEIGHT + 1), {"type": "array"})
    await avalidate("x" * 256 * (INLINE_WEIGHT + 1), {"type": "string"})

    assert seen == [True, False, False]


PATTERNS = st.sampled_from(["^a", "b$", "^[a-c]+$", "x|y", "^$", "[0-9]{2}", "^(ab)*$", "é"])
NAMES = st.text(alphabet="abcxy09é", max_size=5)
COVERING = st.fixed_dictionaries({"patternProperties": st.dictionaries(PATTERNS, st.just({"type": "integer"}))})
"""A subschema whose patterns evaluate some properties (for `unevaluatedProperties` around it)."""
SCHEMAS = st.fixed_dictionaries(
    {"type": st.just("object"), "$defs": st.fixed_dictionaries({"covering": COVERING})},
    optional={
        "properties": st.dictionaries(NAMES, st.just({"type": "integer"}), max_size=2),
        "patternProperties": st.dictionaries(PATTERNS, st.just({"type": "integer"}), max_size=2),
        "additionalProperties": st.booleans() | st.just({"type": "integer"}),
        "unevaluatedProperties": st.booleans() | st.just({"type": "integer"}),
        "allOf": st.lists(COVERING, min_size=1),
        "anyOf": st.lists(COVERING | st.just({"required": ["a"]}), min_size=1),
        "$ref": st.just("#/$defs/covering"),
        "if": COVERING | st.just({"required": ["a"]}),
        "then": COVERING,
        "else": COVERING,
        "dependentSchemas": st.dictionaries(NAMES, COVERING, max_size=2),
        "propertyNames": st.fixed_dictionaries({"pattern": PATTERNS}),
    },
)
INSTANCES = st.dictionaries(NAMES, st.integers(0, 2) | NAMES, max_size=4)


@settings(max_examples=300)
@given(SCHEMAS, INSTANCES)
def test_re2_keywords_agree_with_jsonschema_on_ordinary_patterns(schema: dict[str, Any], instance: Any) -> None:
    schema = json.loads(json.dumps(schema))
    reference = Draft202012Validator(schema)

    assert (validate(instance, schema) == []) == reference.is_valid(instance)
