from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from schema_tools_samples import FORMS, TOOLS

from schema_tools import (
    DEFAULT_POLICY,
    STRICT_TOOL_POLICY,
    SchemaPolicy,
    SchemaPolicyError,
    check_schema,
)
from schema_tools._validate import META_VALIDATOR  # private on purpose: the meta-schema check_schema applies


def obj(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


def nested(depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "array", "items": schema}
    return schema


DEEP_POINTER = "/items" * 32
LONG = "x" * 20_000
LOOP_DEFS = {"$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"$ref": "#/$defs/A"}}, "$ref": "#/$defs/A"}
BIG_TOOL = {
    "type": "object",
    "properties": {f"p{i}": {"type": "string", "description": "d" * 3_900} for i in range(20)},
}
HOSTILE = [
    pytest.param({"title": "<script>alert(1)</script>"}, [("/title", "markup")], id="script-in-title"),
    pytest.param(
        obj(name={"type": "string", "description": "<img src=x onerror=alert(1)>"}),
        [("/properties/name/description", "markup")],
        id="img-tag-in-description",
    ),
    pytest.param(
        obj(a={"enum": ["ok", "<iframe src=//evil>"]}), [("/properties/a/enum/1", "markup")], id="iframe-enum-label"
    ),
    pytest.param({"title": "&lt;script&gt;x()&lt;/script&gt;"}, [("/title", "markup")], id="entity-encoded-tag"),
    pytest.param(
        {"description": 'x" onmouseover="alert(1)'}, [("/description", "markup")], id="event-handler-without-tag"
    ),
    pytest.param(
        obj(url={"type": "string", "default": "JavaScript:alert(1)"}),
        [("/properties/url/default", "markup")],
        id="javascript-default",
    ),
    pytest.param(
        obj(url={"examples": ["java\tscript:alert(1)"]}),
        [("/properties/url/examples/0", "markup")],
        id="whitespace-split-javascript-example",
    ),
    pytest.param({"x-help": "data:text/html;base64,PHNjcmlwdD4="}, [("/x-help", "markup")], id="data-html-in-x-key"),
    pytest.param({"$comment": "vbscript:msgbox(1)"}, [("/$comment", "markup")], id="vbscript-in-comment"),
    pytest.param(
        obj(**{"<b>name</b>": {"type": "string"}}), [("/properties/<b>name<~1b>", "markup")], id="tag-in-property-name"
    ),
    pytest.param(
        obj(kind={"const": "<svg onload=alert(1)>"}), [("/properties/kind/const", "markup")], id="tag-in-const"
    ),
    pytest.param({"x-ui": {"help": ["fine", "<a href=x>"]}}, [("/x-ui/help/1", "markup")], id="tag-nested-in-x-value"),
    pytest.param(
        obj(a={"$ref": "https://evil.example/schema.json"}), [("/properties/a/$ref", "ref-remote")], id="remote-ref"
    ),
    pytest.param(
        obj(a={"$ref": "other.json#/$defs/a"}), [("/properties/a/$ref", "ref-remote")], id="relative-file-ref"
    ),
    pytest.param(obj(a={"$ref": "#/$defs/missing"}), [("/properties/a/$ref", "ref-unresolvable")], id="dangling-ref"),
    pytest.param(obj(a={"$ref": "#/properties"}), [("/properties/a/$ref", "ref-unresolvable")], id="ref-to-non-schema"),
    pytest.param(obj(a={"$ref": "#nowhere"}), [("/properties/a/$ref", "ref-unresolvable")], id="unknown-anchor"),
    pytest.param(LOOP_DEFS, [("/$defs/A/$ref", "ref-loop")], id="ref-loop-a-b-a"),
    pytest.param({"$ref": "#"}, [("/$ref", "ref-loop")], id="ref-self-loop"),
    pytest.param(
        {"anyOf": [{"$ref": "#"}, {"type": "null"}]}, [("/anyOf/0/$ref", "ref-loop")], id="ref-loop-via-anyof"
    ),
    pytest.param({"$dynamicRef": "#meta"}, [("/$dynamicRef", "dynamic-ref")], id="dynamic-ref"),
    pytest.param({"$id": "https://evil.example/s.json"}, [("/$id", "id")], id="remote-id"),
    pytest.param(obj(a={"$id": "urn:nested", "type": "string"}), [("/properties/a/$id", "id")], id="nested-id"),
    pytest.param(
        {"$schema": "http://json-schema.org/draft-07/schema#"}, [("/$schema", "schema-dialect")], id="other-dialect"
    ),
    pytest.param(
        {"$schema": []}, [("/$schema", "metaschema"), ("/$schema", "schema-dialect")], id="dialect-not-a-string"
    ),
    pytest.param({"$vocabulary": {}}, [("/$vocabulary", "vocabulary")], id="vocabulary"),
    pytest.param(
        obj(a={"type": "string", "widget": "html"}), [("/properties/a/widget", "unknown-keyword")], id="unknown"
    ),
    pytest.param({"definitions": {"a": {}}}, [("/definitions", "unknown-keyword")], id="draft-7-definitions"),
    pytest.param(nested(40), [(DEEP_POINTER, "max-depth")], id="depth-bomb"),
    pytest.param(obj(**{f"p{i}": {} for i in range(12_000)}), [("", "max-nodes")], id="node-bomb"),
    pytest.param(obj(a={"enum": list(range(100_000))}), [("/properties/a/enum", "max-enum")], id="enum-100k"),
    pytest.param(obj(a={"pattern": "(unclosed"}), [("/properties/a/pattern", "pattern-invalid")], id="bad-regex"),
    pytest.param(obj(a={"pattern": "^(a+)+$"}), [("/properties/a/pattern", "pattern-redos")], id="nested-plus"),
    pytest.param(obj(a={"pattern": "^(a*)*$"}), [("/properties/a/pattern", "pattern-redos")], id="nested-star"),
    pytest.param(obj(a={"pattern": "^(a|a)*$"}), [("/properties/a/pattern", "pattern-redos")], id="same-alternatives"),
    pytest.param(obj(a={"pattern": "(.*a){20}"}), [("/properties/a/pattern", "pattern-redos")], id="counted-dot-star"),
    pytest.param(
        {"patternProperties": {"^(x+x+)+y$": {}}}, [("/patternProperties/^(x+x+)+y$", "pattern-redos")], id="pp-redos"
    ),
    pytest.param({"patternProperties": {"[": {}}}, [("/patternProperties/[", "pattern-invalid")], id="pp-invalid"),
    pytest.param(obj(a={"pattern": "a" * 2_000}), [("/properties/a/pattern", "max-pattern-length")], id="long-pattern"),
    pytest.param({"description": LONG}, [("/description", "max-string-length")], id="long-description"),
    pytest.param(obj(**{LONG: {}}), [("/properties/" + LONG, "max-string-length")], id="long-property-name"),
    pytest.param({"type": "integr"}, [("/type", "metaschema")], id="bad-type-name"),
    pytest.param({"required": "name"}, [("/required", "metaschema")], id="required-not-a-list"),
    pytest.param({"default": float("nan")}, [("/default", "not-json")], id="nan"),
    pytest.param({"properties": {1: {}}}, [("/properties", "not-json")], id="non-string-key"),
    pytest.param([{"type": "string"}], [("", "root-type")], id="list-root"),
    pytest.param("string", [("", "root-type")], id="string-root"),
    pytest.param(True, [("", "root-type")], id="boolean-root"),
]
HOSTILE_STRICT = [
    pytest.param({"type": "array", "items": {"type": "string"}}, [("", "root-object")], id="strict-array-root"),
    pytest.param({"properties": {"a": {}}}, [("", "root-object")], id="strict-untyped-root"),
    pytest.param(BIG_TOOL, [("", "max-bytes")], id="strict-64k"),
    pytest.param(obj(**{f"p{i}": {} for i in range(2_500)}), [("", "max-nodes")], id="strict-nodes"),
    pytest.param(
        {"type": "object", "properties": {"a": {"enum": list(range(300))}}},
        [("/properties/a/enum", "max-enum")],
        id="strict-enum",
    ),
]


def refusal(schema: Any, policy: SchemaPolicy = DEFAULT_POLICY) -> list[tuple[str, str]]:
    with pytest.raises(SchemaPolicyError) as caught:
        check_schema(schema, policy=policy)
    return [(violation.pointer, violation.rule) for violation in caught.value.violations]


@pytest.mark.parametrize(("schema", "expected"), HOSTILE)
def test_hostile_schemas_are_refused(schema: Any, expected: list[tuple[str, str]]) -> None:
    assert refusal(schema) == expected


@pytest.mark.parametrize(("schema", "expected"), HOSTILE_STRICT)
def test_the_strict_preset_is_stricter(schema: Any, expected: list[tuple[str, str]]) -> None:
    check_schema(schema)
    assert refusal(schema, STRICT_TOOL_POLICY) == expected


@pytest.mark.parametrize(("schema", "expected"), HOSTILE)
def test_hostile_schemas_are_refused_by_the_strict_preset_too(schema: Any, expected: list[tuple[str, str]]) -> None:
    assert refusal(schema, STRICT_TOOL_POLICY)


@pytest.mark.parametrize("schema", [pytest.param(schema, id=name) for name, schema in {**FORMS, **TOOLS}.items()])
def test_real_world_schemas_pass(schema: dict[str, Any]) -> None:
    check_schema(schema)


@pytest.mark.parametrize("schema", [pytest.param(schema, id=name) for name, schema in TOOLS.items()])
def test_real_world_tool_schemas_pass_the_strict_preset(schema: dict[str, Any]) -> None:
    check_schema(schema, policy=STRICT_TOOL_POLICY)


@pytest.mark.parametrize(
    "text",
    [
        "Use a < b comparisons",
        "x<3",
        "Preis < 10 € und > 5",
        "one = two",
        "see https://example.com/data:1",
        "mailto:help@example.com",
        "data:image/png;base64,AAAA",
        "会议主题",
    ],
)
def test_plain_text_is_not_markup(text: str) -> None:
    check_schema({"title": text, "description": text, "enum": [text], "x-note": text})


@pytest.mark.parametrize(
    "pattern",
    [r"^[A-Za-z0-9_./-]+$", r"^([a-z0-9-]+\.)+[a-z]{2,}$", r"^[a-z]+(?:-[a-z]+)*$", r"^(\d{3}-)+\d{4}$", r"(ab|cd)*"],
)
def test_safe_repetition_passes(pattern: str) -> None:
    check_schema({"type": "string", "pattern": pattern})


def test_every_violation_is_reported_at_once() -> None:
    schema = {
        "title": "<b>hi</b>",
        "properties": {"a": {"$ref": "https://x.example/a"}, "b": {"pattern": "(a+)+"}, "c": {"widget": 1}},
        "type": "objekt",
    }

    assert sorted(refusal(schema)) == [
        ("/properties/a/$ref", "ref-remote"),
        ("/properties/b/pattern", "pattern-redos"),
        ("/properties/c/widget", "unknown-keyword"),
        ("/title", "markup"),
        ("/type", "metaschema"),
    ]


def test_error_message_lists_pointers_and_rules() -> None:
    with pytest.raises(SchemaPolicyError, match=r"/title: markup"):
        check_schema({"title": "<script>"})


def test_limits_are_configurable() -> None:
    schema = obj(a={"enum": ["a", "b", "c"]})

    check_schema(schema)
    assert refusal(schema, SchemaPolicy(max_enum=2)) == [("/properties/a/enum", "max-enum")]
    assert refusal(schema, SchemaPolicy(max_depth=2)) == [("/properties/a", "max-depth")]
    assert refusal(schema, SchemaPolicy(max_bytes=10)) == [("", "max-bytes")]


def test_recursive_refs_through_structure_are_fine() -> None:
    check_schema({"type": "object", "properties": {"next": {"$ref": "#"}}})
    check_schema({"$defs": {"a": {"items": {"$ref": "#/$defs/a"}}}, "$ref": "#/$defs/a"})


def test_ref_pointers_are_unescaped() -> None:
    check_schema({"$defs": {"a/b": {"type": "string"}, "c~d": {}, "e f": {}}, "anyOf": [
        {"$ref": "#/$defs/a~1b"}, {"$ref": "#/$defs/c~0d"}, {"$ref": "#/$defs/e%20f"},
    ]})  # fmt: skip


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=30,
)
KEYWORDS = st.sampled_from(
    ["type", "properties", "items", "$ref", "$defs", "enum", "pattern", "anyOf", "allOf", "not", "required",
     "patternProperties", "title", "default", "$id", "$anchor", "x-ui", "const", "prefixItems", "if", "then"]
)  # fmt: skip
SCHEMA_LIKE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.sampled_from(["#", "#/$defs/a", "(a+)+", "<b>", "object", "a"]),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(KEYWORDS | st.text(max_size=4), children, max_size=4)
    ),
    max_leaves=25,
)


@settings(max_examples=200)
@given(JSON)
def test_check_schema_raises_only_policy_errors_on_arbitrary_json(value: Any) -> None:
    try:
        check_schema(value)
    except SchemaPolicyError:
        pass


@settings(max_examples=200)
@given(SCHEMA_LIKE)
def test_check_schema_raises_only_policy_errors_on_schema_like_json(value: Any) -> None:
    for policy in (DEFAULT_POLICY, STRICT_TOOL_POLICY):
        try:
            check_schema(json.loads(json.dumps(value)), policy=policy)
        except SchemaPolicyError:
            pass


@settings(max_examples=300)
@given(st.dictionaries(KEYWORDS | st.text(max_size=4), SCHEMA_LIKE, max_size=5))
def test_metaschema_rule_agrees_with_the_official_meta_schema(value: dict[str, Any]) -> None:
    value = json.loads(json.dumps(value))
    official = next(iter(META_VALIDATOR.iter_errors(value)), None) is not None
    try:
        check_schema(value)
        ours = False
    except SchemaPolicyError as caught:
        ours = any(violation.rule == "metaschema" for violation in caught.violations)

    assert ours == official
