"""The limits on what a run takes in (docs/security.md, "Limits"): nesting, ids and client tools.

Each is refused at the edge with a coded 4xx before any event, the same for every store, and an input
just inside each limit still runs. The id rule is checked against every store with generated ids.
"""

from __future__ import annotations

import asyncio
import json
import math
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from ag_ui.core import Message, RunAgentInput, ToolMessage
from agui import Client, Reply, new_id, resolved, run_input, user
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pg import every_store as store_params
from pg import fresh_schema_dsn

import adapter._run._tools  # private on purpose: a spy counts the schema checks the cache saves
import schema_tools
from adapter import Adapter, LimitExceeded, Limits
from adapter import tool as adapter_tool

# Private on purpose: each limit's value, so the tests sit just inside and just past it; the byte scan's
# first pass and what it keeps, held equal to the scan before it.
from adapter._limits import (
    _NOT_MARKS,
    _NOT_MARKS_OR_CONSTANTS,
    MAX_DEPTH,
    MAX_ID_CHARS,
    STATE_DEPTH,
    _brackets_outside_strings,
    bad_input_id,
    body_depth_and_constants,
    body_depth_exceeds,
    depth_exceeds,
    id_problem,
    ids_hold,
    input_ids,
    repeated_message_id,
)
from adapter.backends import BackendItem, Call, ModelRequest, Rule, ScriptedBackend, TextDelta, ToolCall
from adapter.stores import MemoryStore, PostgresStore, SQLiteStore, StoredMessage, ThreadChange, TurnStore
from schema_tools import SchemaPolicy

if TYPE_CHECKING:
    from conftest import Serve

STORES = store_params()
RULES = [Rule(r"navigate", steps=[[Call("navigate", {"path": "/cart"})]])]


@pytest.fixture(params=STORES)
async def client(request: pytest.FixtureRequest, tmp_path: Path, serve: Serve) -> AsyncIterator[Client]:
    """A served adapter over each store."""
    store: TurnStore = request.param(tmp_path)
    served = await serve(Adapter(ScriptedBackend(RULES, fallback="ok"), store=store))
    yield served.client


def nested(levels: int) -> Any:
    """A JSON value of exactly `levels` levels of nesting: an object around arrays."""
    value: Any = "leaf"
    for _ in range(levels - 1):
        value = [value]
    return {"k": value}


def with_deep_state(body: dict[str, Any], levels: int) -> bytes:
    """`body` as JSON with `nested(levels)` as its state, written by hand: json.dumps gives up near 1000 levels."""
    deep = '{"k":' + "[" * (levels - 1) + '"leaf"' + "]" * (levels - 1) + "}"
    return (json.dumps(body)[:-1] + f', "state": {deep}}}').encode()


def refused(reply: Reply, status: int, code: str) -> dict[str, Any]:
    assert (reply.status, reply.events) == (status, []), reply.body[:300]
    error: dict[str, Any] = json.loads(reply.body)["error"]
    assert error["code"] == code, error
    return error


def tool(name: str, **parameters: Any) -> dict[str, Any]:
    return {"name": name, "description": "a client tool", "parameters": {"type": "object", **parameters}}


# Nesting: one rule for the whole input, wherever the depth is.


@pytest.mark.parametrize("levels", [STATE_DEPTH + 1, 254, 989])
async def test_deep_state_is_refused_at_the_edge_on_every_store(client: Client, levels: int) -> None:
    reply = await client.post(with_deep_state(run_input("t1", [user("hi")]), levels), clean=False)

    refused(reply, 422, "INPUT_TOO_DEEP")


PLACES: dict[str, Callable[[Any], dict[str, Any]]] = {
    "forwardedProps": lambda deep: {"forwardedProps": deep},
    "a message member": lambda deep: {"messages": [{**user("hi"), "extra": deep}]},
    "a content part": lambda deep: {"messages": [{**user("x"), "content": [{"type": "text", "text": "t", "x": deep}]}]},
    "a tool schema": lambda deep: {"tools": [tool("t", properties={"a": deep})]},
    "context": lambda deep: {"context": [{"description": "d", "value": "v", "more": deep}]},
    "a resume payload": lambda deep: {"resume": [resolved("int_1", deep)]},
    "the body itself": lambda deep: {"unknown": deep},
}


@pytest.mark.parametrize("place", PLACES)
async def test_deep_input_anywhere_is_refused_at_the_edge(serve: Serve, place: str) -> None:
    client = (await serve(Adapter(ScriptedBackend(fallback="ok"), client_tool_policy=None))).client
    body = {**run_input("t1", [user("hi")]), **PLACES[place](nested(300))}

    reply = await client.post(body, clean=False)

    refused(reply, 422, "INPUT_TOO_DEEP")


async def test_a_body_too_deep_to_parse_is_refused_with_the_same_code(serve: Serve) -> None:
    client = (await serve(Adapter(ScriptedBackend(fallback="ok")))).client

    reply = await client.post(b"[" * 100_000 + b"]" * 100_000, clean=False)

    refused(reply, 422, "INPUT_TOO_DEEP")


async def test_the_deepest_accepted_state_runs_and_comes_back(serve: Serve) -> None:
    served = await serve(Adapter(ScriptedBackend(RULES, fallback="ok"), frontend_outcome="interrupt"))
    thread = served.client.thread(tools=[tool("navigate", properties={"path": {"type": "string"}})])
    deepest = nested(STATE_DEPTH)

    asked = await thread.say("navigate", state=deepest)  # suspends: the state is stored and snapshotted
    (interrupt,) = asked.interrupts
    done = await thread.resume(resolved(interrupt["id"], "done"), state=asked.of("STATE_SNAPSHOT")[-1]["snapshot"])

    assert asked.of("STATE_SNAPSHOT")[-1]["snapshot"] == deepest
    assert done.outcome == {"type": "success"}


# Ids: one rule for every id that is stored or looked up, on every store.

BAD_IDS = {"NUL": "t\x00x", "100 KB": "t" * 100_000, "a newline": "a\nb", "DEL": "a\x7f", "C1": "a\x85"}


@pytest.mark.parametrize("bad", BAD_IDS.values(), ids=BAD_IDS.keys())
async def test_a_thread_id_no_store_can_keep_is_refused_on_every_store(client: Client, bad: str) -> None:
    reply = await client.post(run_input(bad, [user("hi")]), clean=False)

    error = refused(reply, 422, "INVALID_ID")
    assert error["details"][0]["pointer"] == "/threadId"


WHERE: dict[str, Callable[[str], dict[str, Any]]] = {
    "/runId": lambda bad: {"runId": bad},
    "/parentRunId": lambda bad: {"parentRunId": bad},
    "/messages/0/id": lambda bad: {"messages": [{**user("hi"), "id": bad}]},
    "/messages/1/toolCalls/0/id": lambda bad: {
        "messages": [
            user("hi"),
            {
                "id": "a1",
                "role": "assistant",
                "toolCalls": [{"id": bad, "type": "function", "function": {"name": "f", "arguments": "{}"}}],
            },
        ]
    },
    "/messages/1/toolCallId": lambda bad: {
        "messages": [user("hi"), {"id": "t1", "role": "tool", "toolCallId": bad, "content": "x"}]
    },
    "/resume/0/interruptId": lambda bad: {"resume": [resolved(bad, True)]},
}


@pytest.mark.parametrize("pointer", WHERE)
async def test_every_stored_id_follows_the_same_rule(client: Client, pointer: str) -> None:
    body = {**run_input(new_id("thread"), [user("hi")]), **WHERE[pointer]("x\x00y")}

    reply = await client.post(body, clean=False)

    assert refused(reply, 422, "INVALID_ID")["details"][0]["pointer"] == pointer


async def test_reading_a_thread_whose_id_no_store_can_keep_is_a_404(client: Client) -> None:
    for bad in ("t%00x", "t" * (MAX_ID_CHARS + 1)):
        response = await client.http.get(f"{client.base_url}/threads/{bad}")

        assert response.status_code == 404
        assert response.json()["error"]["code"] == "THREAD_NOT_FOUND"


async def test_the_longest_accepted_id_runs_on_every_store(client: Client) -> None:
    thread_id = "🙂" * MAX_ID_CHARS  # four UTF-8 bytes each

    reply = await client.post(run_input(thread_id, [user("hi")], runId="r" * MAX_ID_CHARS))
    found = await client.http.get(f"{client.base_url}/threads/{thread_id}")

    assert reply.outcome == {"type": "success"}
    assert found.status_code == 200


_ODD = st.sampled_from(["\x00", "\x1f", "\x7f", "\x85", "\x9f", "\ud800", "\udfff", "~", "/", "%", "'", "é", "🙂"])
IDS = st.one_of(
    st.text(st.one_of(_ODD, st.characters(codec=None, exclude_categories=())), max_size=40),
    st.text(st.sampled_from("a🙂"), min_size=MAX_ID_CHARS - 2, max_size=MAX_ID_CHARS + 2),
)


class Stores:
    """One store of each kind, on its own event loop, for a synchronous property test."""

    def __init__(self, stores: list[TurnStore]) -> None:
        self.loop = asyncio.new_event_loop()
        self.stores = stores

    def keeps(self, value: str) -> None:
        """Save a thread and a message under `value` in every store, and read them back unchanged."""
        message = StoredMessage(value, "user", json.dumps({"id": value, "role": "user", "content": "x"}))
        for store in self.stores:
            self.loop.run_until_complete(store.save(value, ThreadChange(append=[message]), expected_version=0))
            loaded = self.loop.run_until_complete(store.load(value))
            assert loaded is not None, type(store).__name__
            assert [m.id for m in loaded.messages] == [value], type(store).__name__

    def close(self) -> None:
        for store in self.stores:
            self.loop.run_until_complete(store.close())
        self.loop.close()


@pytest.fixture(scope="module")
def every_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stores]:
    kinds: list[TurnStore] = [MemoryStore(), SQLiteStore(tmp_path_factory.mktemp("ids") / "turns.db")]
    stores = Stores(kinds)
    yield stores
    stores.close()


@pytest.fixture(scope="module")
def postgres_store() -> Iterator[Stores]:
    stores = Stores([PostgresStore(fresh_schema_dsn())])
    yield stores
    stores.close()


def check_the_rule(stores: Stores, value: str) -> None:
    problem = id_problem(value)
    encodable = not any("\ud800" <= char <= "\udfff" for char in value)
    control = any(ord(char) < 0x20 or 0x7F <= ord(char) <= 0x9F for char in value)
    assert (problem is None) == (len(value) <= MAX_ID_CHARS and encodable and not control), (value, problem)
    if problem is None:
        stores.keeps(value)


@settings(
    max_examples=150, suppress_health_check=[*settings().suppress_health_check, HealthCheck.function_scoped_fixture]
)
@given(value=IDS)
def test_an_id_the_rule_accepts_is_kept_by_every_store(every_store: Stores, value: str) -> None:
    check_the_rule(every_store, value)


@pytest.mark.postgres
@settings(
    max_examples=60, suppress_health_check=[*settings().suppress_health_check, HealthCheck.function_scoped_fixture]
)
@given(value=IDS)
def test_an_id_the_rule_accepts_is_kept_by_postgres(postgres_store: Stores, value: str) -> None:
    check_the_rule(postgres_store, value)


# Client tools: bounded in number and size, large declarations checked off the loop, each schema once.


async def test_too_many_client_tools_are_refused_before_any_event(serve: Serve) -> None:
    client = (await serve(Adapter(ScriptedBackend(fallback="ok"), limits=Limits(max_client_tools=3)))).client

    ok = await client.post(run_input("t1", [user("hi")], tools=[tool(f"t{i}") for i in range(3)]))
    over = await client.post(run_input("t2", [user("hi")], tools=[tool(f"t{i}") for i in range(4)]), clean=False)

    assert ok.outcome == {"type": "success"}
    refused(over, 413, "TOO_MANY_TOOLS")


async def test_the_python_api_raises_the_same_refusal_before_any_event() -> None:
    adapter = Adapter(ScriptedBackend(fallback="ok"), limits=Limits(max_client_tools=1))
    body = RunAgentInput.model_validate(run_input("t1", [user("hi")], tools=[tool("a"), tool("b")]))

    with pytest.raises(LimitExceeded) as refused:
        await anext(adapter.run(body))

    assert (refused.value.code, refused.value.status_code) == ("TOO_MANY_TOOLS", 413)
    assert await adapter.store.load("t1") is None


async def test_the_default_bounds_the_4400_tools_that_stalled_the_server(serve: Serve) -> None:
    client = (await serve(Adapter(ScriptedBackend(fallback="ok")))).client
    tools = [tool(f"tool_{i}", properties={"x": {"type": "string"}}) for i in range(4400)]

    reply = await client.post(run_input("t1", [user("hi")], tools=tools), clean=False)

    refused(reply, 413, "TOO_MANY_TOOLS")


async def test_tool_declarations_over_the_byte_limit_are_refused(serve: Serve) -> None:
    client = (await serve(Adapter(ScriptedBackend(fallback="ok")))).client
    described = {"type": "string", "description": "x" * 3_000}
    tools = [tool(f"tool_{i}", properties={f"p{j}": described for j in range(10)}) for i in range(10)]  # ~300 KB

    reply = await client.post(run_input("t1", [user("hi")], tools=tools), clean=False)

    refused(reply, 413, "TOOLS_TOO_LARGE")


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The thread each client schema check runs on, in order."""
    seen: list[str] = []
    real = schema_tools.check_schema  # what adapter._run._tools calls, by the name it imported it under

    def spy(schema: Any, **options: Any) -> None:
        seen.append(threading.current_thread().name)
        real(schema, **options)

    monkeypatch.setattr(adapter._run._tools, "check_schema", spy)
    return seen


async def test_a_large_declaration_is_checked_off_the_loop_and_each_schema_once(
    serve: Serve, checks: list[str]
) -> None:
    served = await serve(Adapter(ScriptedBackend(fallback="ok")))
    described = {"type": "string", "description": "a long description " * 40}
    large = [tool(f"tool_{i}", title=f"tool {i}", properties={f"p{j}": described for j in range(5)}) for i in range(20)]
    small = [tool("small", properties={"x": {"type": "integer"}})]

    first = await served.client.post(run_input("t1", [user("hi")], tools=large))
    again = await served.client.post(run_input("t2", [user("hi")], tools=large))
    smaller = await served.client.post(run_input("t3", [user("hi")], tools=small))

    assert first.outcome == again.outcome == smaller.outcome == {"type": "success"}
    assert len(checks) == len(large) + 1  # the resent tools were not checked again
    assert served.thread.name not in checks[:-1]  # the large declaration: on a worker thread
    assert checks[-1] == served.thread.name  # a small one is checked inline, on the server's loop


async def test_a_refused_schema_is_remembered_and_refused_again(serve: Serve, checks: list[str]) -> None:
    client = (await serve(Adapter(ScriptedBackend(fallback="ok")))).client
    bad = [tool("bad", properties={"x": {"type": 5}})]

    first = await client.post(run_input("t1", [user("hi")], tools=bad))
    again = await client.post(run_input("t2", [user("hi")], tools=bad))

    assert refused(first, 422, "INVALID_TOOL_SCHEMA") == refused(again, 422, "INVALID_TOOL_SCHEMA")
    assert len(checks) == 1


def test_the_schema_cache_is_bounded() -> None:
    cache = adapter._run._tools.SchemaCache(entries=3)
    policy = SchemaPolicy()

    for index in range(10):
        assert cache.violations({"type": "object", "title": str(index)}, policy) == ()

    assert len(cache) == 3


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(st.sampled_from('[]{}"\\ab\u00e9')),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(st.sampled_from('[]{"\\')), inner, max_size=3),
    max_leaves=30,
)


@settings(max_examples=300)
@given(value=_JSON, limit=st.integers(0, 8), ascii_only=st.booleans())
def test_the_nesting_rule_on_a_bodys_bytes_agrees_with_the_rule_on_its_value(
    value: Any, limit: int, ascii_only: bool
) -> None:
    body = json.dumps(value, ensure_ascii=ascii_only).encode()

    assert body_depth_exceeds(body, limit) == depth_exceeds(value, limit)


@settings(max_examples=300)
@given(value=_JSON, limit=st.integers(0, 8), spaced=st.booleans())
def test_the_nesting_rule_holds_for_arrays_of_siblings_and_escapes(value: Any, limit: int, spaced: bool) -> None:
    """Siblings (`},{`: the dips the byte scan drops) and escaped quotes and backslashes next to brackets."""
    siblings = [value, [value, {"k\\": value}], '\\"[', {'"}': [value]}]
    body = json.dumps(siblings, indent=1 if spaced else None).encode()

    assert body_depth_exceeds(body, limit) == depth_exceeds(siblings, limit)


_ESCAPING_TEXT = st.text(st.sampled_from('[]{}"\\/bfnrtuNI\n\t\x01\x7f\u00e9\u2028\U0001f600'), max_size=6)
_ESCAPING_JSON = st.recursive(
    st.none() | st.floats() | _ESCAPING_TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_ESCAPING_TEXT, inner, max_size=3),
    max_leaves=30,
)


def _brackets_before_the_first_pass(body: bytes, others: bytes) -> bytes:
    """`_brackets_outside_strings` as it was before its first pass (which keeps escapes whole) was added."""
    marks = body.replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, others).replace(b'""', b"")
    return b"".join(marks.split(b'"')[::2])


@settings(max_examples=300)
@given(value=_ESCAPING_JSON, limit=st.integers(0, 8), ascii_only=st.booleans(), constants=st.booleans())
def test_the_scan_that_drops_what_no_escape_holds_first_agrees_with_the_scan_before(
    value: Any, limit: int, ascii_only: bool, constants: bool
) -> None:
    """Every escape JSON writes (`\\n`, `\\u0001`, `\\"`, `\\\\`, non-ASCII as `\\u`) next to quotes and brackets."""
    body = json.dumps(value, ensure_ascii=ascii_only).encode()
    others = _NOT_MARKS_OR_CONSTANTS if constants else _NOT_MARKS

    assert _brackets_outside_strings(body, others) == _brackets_before_the_first_pass(body, others)
    assert body_depth_exceeds(body, limit) == depth_exceeds(value, limit)


_CONSTANT_TEXT = st.lists(st.sampled_from(["[", '"', "\\", "N", "I", "NaN", "Infinity", "-Infinity"]), max_size=4)
_WITH_CONSTANTS = st.recursive(
    st.floats(allow_nan=True, allow_infinity=True) | _CONSTANT_TEXT.map("".join),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_CONSTANT_TEXT.map("".join), inner, max_size=3),
    max_leaves=20,
)


def _non_finite(value: Any) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else []
    return any(_non_finite(child) for child in children)


@settings(max_examples=300)
@given(value=_WITH_CONSTANTS, limit=st.integers(0, 4))
def test_the_depth_scan_finds_nan_and_infinity_outside_strings_only(value: Any, limit: int) -> None:
    """The edge's one scan of a long body: the nesting rule as alone, and a constant only where one is a value."""
    body = json.dumps(value).encode()  # Python's json writes NaN, Infinity and -Infinity

    too_deep, constants = body_depth_and_constants(body, limit)

    assert too_deep == body_depth_exceeds(body, limit)
    assert constants is None or constants == _non_finite(value)


_ID_CHARS = st.sampled_from(["a", "\x00", "\x1f", "\x7f", "\x9f", "\xa0", "\ud800", "\udfff", "\U0001f600", "é"])


@settings(max_examples=300)
@given(ids=st.lists(st.text(_ID_CHARS, max_size=4) | st.integers(250, 260).map(lambda n: "a" * n), max_size=6))
def test_the_ids_checked_at_once_give_the_first_bad_id_the_rule_gives(ids: list[str]) -> None:
    messages: list[Message] = [ToolMessage(id=f"m{n}", tool_call_id=value, content="x") for n, value in enumerate(ids)]
    checked = RunAgentInput.model_construct(
        thread_id="t", run_id="r", parent_run_id=None, messages=messages, resume=None
    )

    walked = next(((p, id_problem(v)) for p, v in input_ids(checked) if id_problem(v) is not None), None)

    assert bad_input_id(checked) == walked


@settings(max_examples=300)
@given(
    ids=st.lists(st.text(_ID_CHARS, max_size=3) | st.integers(255, 257).map(lambda n: "a" * n), max_size=6),
    thread_id=st.sampled_from(["t", ".", "..", "t\x00"]),
)
def test_the_ids_held_at_once_agree_with_both_rules_walked(ids: list[str], thread_id: str) -> None:
    """`ids_hold`, one listing for both id rules, against each rule's own walk: ids that repeat, break or both."""
    messages: list[Message] = [ToolMessage(id=value, tool_call_id=f"c{value}", content="x") for value in ids]
    checked = RunAgentInput.model_construct(
        thread_id=thread_id, run_id="r", parent_run_id=None, messages=messages, resume=None
    )

    assert ids_hold(checked) == (bad_input_id(checked) is None and repeated_message_id(checked) is None)


def test_the_depth_rule_leaves_room_inside_pydantic() -> None:
    assert STATE_DEPTH < MAX_DEPTH < 200  # pydantic's serializer gives up near 255 levels


# JSON text inside an input or from a model: the same nesting rule, measured before it is parsed.

DEEP_TEXT = "[" * 5_000 + "]" * 5_000


async def test_a_tool_message_holding_json_too_deep_to_parse_is_kept_as_text(serve: Serve) -> None:
    backend = ScriptedBackend(RULES, fallback="ok")
    thread = (await serve(Adapter(backend, frontend_outcome="interrupt"))).client.thread(tools=[tool("navigate")])
    asked = await thread.say("navigate")
    (interrupt,) = asked.interrupts  # answered by a ToolMessage: the path older clients take

    done = await thread.answer(interrupt["toolCallId"], DEEP_TEXT)

    assert done.outcome == {"type": "success"}
    seen = [m.content for m in backend.requests[-1].messages if isinstance(m, ToolMessage)]
    assert seen == [DEEP_TEXT]


class DeepArguments:
    """A model that calls a server tool with arguments nested far too deeply, then answers."""

    async def stream(self, request: ModelRequest) -> AsyncIterator[BackendItem]:
        if any(isinstance(message, ToolMessage) for message in request.messages):
            yield TextDelta("done")
            return
        yield ToolCall("call_1", "echo", '{"x": ' + DEEP_TEXT + "}")


async def test_model_arguments_too_deep_to_parse_are_invalid_arguments(serve: Serve) -> None:
    ran: list[Any] = []

    @adapter_tool
    def echo(x: Any) -> str:
        """Echo."""
        ran.append(x)
        return "echoed"

    client = (await serve(Adapter(DeepArguments(), tools=[echo]))).client

    reply = await client.thread().say("go")

    assert reply.outcome == {"type": "success"}
    assert ran == []
    assert "nest too deeply" in reply.results()["call_1"]["content"]
