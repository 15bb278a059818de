"""What a new user meets first: each mistake gets a message that says what to do, at the line that made it."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from agui import run_events, run_input, user
from hypothesis import example, given
from hypothesis import strategies as st
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Mount, Route

from adapter import Adapter, ConfigurationError, ScriptedBackend, create_app, mount, tool
from adapter.backends import BackendItem, ModelRequest, OpenAIChatBackend, TextDelta
from adapter.backends._openai_errors import not_found_error  # private on purpose: the 404 rule alone
from adapter.client import AGUIClient, RequestRefused
from adapter.stores import SQLiteStore, StoreUnavailable


def lookup_order(order_id: str) -> str:
    """Find an order."""
    return order_id


OPENAI_STYLE = {"type": "function", "function": {"name": "lookup_order", "parameters": {"type": "object"}}}


@pytest.mark.parametrize(
    ("given", "says"),
    [
        pytest.param(lookup_order, "(lookup_order) is a plain function: decorate it with @tool", id="function"),
        pytest.param(OPENAI_STYLE, "is a dict, as OpenAI declares tools", id="openai-dict"),
        pytest.param("lookup_order", "is a str, not a tool", id="name"),
    ],
)
def test_a_tool_that_is_not_a_tool_is_refused_with_what_to_do(given: Any, says: str) -> None:
    with pytest.raises(ConfigurationError, match="tools\\[1\\]") as refused:
        Adapter(ScriptedBackend(), tools=[tool(lookup_order), given])

    assert says in str(refused.value)


def test_a_tool_without_a_docstring_warns_at_its_decorator() -> None:
    def undocumented(order_id: str) -> str:
        return order_id

    with pytest.warns(UserWarning, match="'undocumented' has no docstring or description") as warned:
        tool(undocumented)

    assert warned[0].filename == __file__


def test_an_untyped_parameter_warns_and_names_it() -> None:
    with pytest.warns(UserWarning, match=r"without a type annotation \('order_id', 'qty'\)") as warned:

        @tool(description="Reserve stock.")
        def reserve(order_id, qty, note: str = "") -> str:  # type: ignore[no-untyped-def]
            return str(order_id)

    assert warned[0].filename == __file__


def test_a_typed_documented_tool_warns_nothing(recwarn: pytest.WarningsRecorder) -> None:
    def note(text: Any) -> str:
        """Keep a note of any kind: `Any` is a type chosen, not one forgotten."""
        return str(text)

    tool(lookup_order)
    tool(note)

    assert [str(w.message) for w in recwarn] == []


# A backend that is not a backend, or that yields what is not a backend item


class NoStream:
    async def run(self, request: ModelRequest) -> AsyncIterator[BackendItem]:
        yield TextDelta("hi")


class SyncStream:
    def stream(self, request: ModelRequest) -> Iterator[TextDelta]:
        yield TextDelta("hi")


class ReturnsItems:
    async def stream(self, request: ModelRequest) -> list[TextDelta]:
        return [TextDelta("hi")]


class StreamIsAName:
    stream = "gpt-4o"


class ReturnsAnIterator:
    """A plain `def` that returns an async iterator is a backend (examples/dojo_features.py is one)."""

    def stream(self, request: ModelRequest) -> AsyncIterator[BackendItem]:
        return ScriptedBackend().stream(request)


@pytest.mark.parametrize(
    ("given", "says"),
    [
        pytest.param(NoStream(), "backend (NoStream) has no stream(request) method", id="no-stream"),
        pytest.param(ScriptedBackend, "backend is the class ScriptedBackend, not a backend", id="a-class"),
        pytest.param(SyncStream(), "(SyncStream).stream is a generator: write it `async def`", id="sync-generator"),
        pytest.param(ReturnsItems(), "(ReturnsItems).stream is `async def` without `yield`", id="async-return"),
        pytest.param("gpt-4o", "backend (str) has no stream(request) method", id="a-model-name"),
        pytest.param(StreamIsAName(), "backend (StreamIsAName) has a stream attribute that is not a method", id="attr"),
    ],
)
def test_a_backend_that_is_not_a_backend_is_refused_when_the_adapter_is_built(given: Any, says: str) -> None:
    with pytest.raises(ConfigurationError) as refused:
        Adapter(given)

    assert says in str(refused.value)


async def test_a_stream_that_returns_an_async_iterator_is_a_backend() -> None:
    events = await run_events(Adapter(ReturnsAnIterator()), run_input("t-plain-def", [user("hi")]))

    assert events[-1]["type"] == "RUN_FINISHED"


@dataclass
class Said:
    text: str


class Words(str):
    """Text of a class of its own: no more a backend item than a bare `str` (never taken for a piece of text)."""


@pytest.mark.parametrize(
    ("item", "named"),
    [
        pytest.param("Hello", "a str", id="str"),
        pytest.param(Words("Hello"), f"a {__name__}.Words", id="str-subclass"),
        pytest.param({"type": "text", "text": "Hello"}, "a dict", id="dict"),
        pytest.param(None, "a NoneType", id="none"),
        pytest.param(Said("Hello"), f"a {__name__}.Said", id="own-class"),
    ],
)
async def test_an_item_that_is_not_a_backend_item_ends_the_run_naming_its_type(
    item: object, named: str, caplog: pytest.LogCaptureFixture
) -> None:
    class Yields:
        async def stream(self, request: ModelRequest) -> AsyncIterator[object]:
            yield TextDelta("Before it. ")
            yield item

    events = await run_events(Adapter(Yields()), run_input("t-unknown-item", [user("hi")]))  # type: ignore[arg-type]

    assert [e["type"] for e in events][-3:] == ["TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "RUN_ERROR"]
    assert events[-1]["code"] == "UNKNOWN_BACKEND_ITEM"
    assert f"The agent backend yielded {named}, which is not a backend item" in events[-1]["message"]
    assert f"yielded {named}, which is not a backend item" in caplog.text


# A 404 from the model server: an unknown model, or a `base_url` that misses the API's path

MODEL_NAMES = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._:/-]{0,24}[A-Za-z0-9]", fullmatch=True)
NAMING_THE_MODEL: list[Callable[[str], bytes]] = [
    lambda m: json.dumps(
        {"error": {"message": f"The model `{m}` does not exist or you do not have access to it.", "type": "x"}}
    ).encode(),  # OpenAI
    lambda m: json.dumps({"object": "error", "message": f"The model `{m}` does not exist.", "code": 404}).encode(),
    lambda m: json.dumps({"error": {"message": f'model "{m}" not found, try pulling it first'}}).encode(),  # Ollama
    lambda m: json.dumps({"error": f"Model {m}."}).encode(),
]
A_PATH_PROBLEM: list[bytes] = [
    b"",
    b"404 page not found",  # Ollama, llama.cpp
    b"<!DOCTYPE html><html><body><h1>Not Found</h1></body></html>",
    b'{"detail":"Not Found"}',  # FastAPI (vLLM, LiteLLM)
    b'{"error":{"message":"Invalid URL (POST /chat/completions)","type":"invalid_request_error"}}',  # OpenAI
]
UNKNOWN_MODEL = "does not know the model"
WRONG_PATH = "check `base_url`"


@given(model=MODEL_NAMES, body=st.sampled_from(NAMING_THE_MODEL))
def test_a_404_that_names_the_model_says_the_model_is_unknown(model: str, body: Callable[[str], bytes]) -> None:
    message = not_found_error(body(model), model).message

    assert UNKNOWN_MODEL in message
    assert repr(model) in message
    assert WRONG_PATH not in message


@given(model=MODEL_NAMES, body=st.sampled_from(A_PATH_PROBLEM) | st.binary(max_size=200), other=st.booleans())
@example(model="do", body=b"", other=True).via("a draw that failed: 'do' in the message's prose, not as its model")
@example(model="access", body=b"", other=True)
def test_a_404_that_does_not_name_the_model_says_to_check_base_url(model: str, body: bytes, other: bool) -> None:
    if other:  # another model's name that starts with this one's does not name it
        body = NAMING_THE_MODEL[0](model + "-mini")
    elif model.encode() in body:
        body = b""

    message = not_found_error(body, model).message

    assert WRONG_PATH in message
    assert "/v1" in message
    assert UNKNOWN_MODEL not in message


PROSE: list[Callable[[str], str]] = [
    lambda m: f"you {m} not have access to it",
    lambda m: f"Did you mean {m}? It is not served at this path.",
    lambda m: f"{m}: no such route",
]


@given(model=MODEL_NAMES, prose=st.sampled_from(PROSE))
def test_a_404_whose_message_has_the_name_only_in_its_prose_says_to_check_base_url(
    model: str, prose: Callable[[str], str]
) -> None:
    """The rule: a provider names the model right after the word "model"; the same letters elsewhere are prose."""
    body = json.dumps({"error": {"message": prose(model)}}).encode()

    message = not_found_error(body, model).message

    assert WRONG_PATH in message


async def test_a_base_url_without_v1_ends_the_run_saying_the_path_was_not_found() -> None:
    seen: list[str] = []

    def ollama(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        return httpx.Response(404, text="404 page not found", headers={"content-type": "text/plain"})

    async with httpx.AsyncClient(transport=httpx.MockTransport(ollama)) as http:
        backend = OpenAIChatBackend("http://models.internal:11434", "fake-1", api_key="", client=http)
        events = await run_events(Adapter(backend), run_input("t-404", [user("hi")]))

    assert seen == ["/chat/completions"]
    assert events[-1]["type"] == "RUN_ERROR"
    assert "no chat completions endpoint" in events[-1]["message"]
    assert WRONG_PATH in events[-1]["message"]
    assert "models.internal" not in events[-1]["message"]  # the client is never told where the model server is


# `AGUIClient(app)` on a whole app that mounts the adapter's sub-app somewhere

MOUNT_PATHS = st.from_regex(r"/[a-z]{1,8}(/[a-z]{1,8})?", fullmatch=True)


def whole_app(at: str) -> Starlette:
    """An app with its own home page and the adapter's sub-app mounted at `at`."""
    home = Route("/", lambda request: PlainTextResponse("home"))
    return Starlette(routes=[home, mount(at, create_app(Adapter(ScriptedBackend())))])


@given(at=MOUNT_PATHS)
async def test_a_whole_app_is_refused_with_its_mount_path_and_served_at_it(at: str) -> None:
    app = whole_app(at)

    async with AGUIClient(app) as client:
        with pytest.raises(RequestRefused) as refused:
            await client.thread().say("hi")
    async with AGUIClient(app, path=at) as client:
        reply = await client.thread().say("hi")

    assert "wants the adapter's sub-app" in str(refused.value)
    assert 'AGUIClient(app, path="/agui")' in str(refused.value)
    assert f"this app mounts {at!r}" in str(refused.value)
    assert reply.text == "You said: hi"


async def test_a_plain_mount_that_redirects_says_where_to_post() -> None:
    app = Starlette(routes=[Mount("/agui", create_app(Adapter(ScriptedBackend())))])

    async with AGUIClient(app, path="/agui") as client:
        with pytest.raises(RequestRefused, match="redirects '/agui' to '/agui/'"):
            await client.thread().say("hi")
    async with AGUIClient(app, path="/agui/") as client:
        assert (await client.thread().say("hi")).text == "You said: hi"


async def test_a_url_that_serves_no_run_says_to_check_the_url() -> None:
    answered: list[str] = []

    def server(request: httpx.Request) -> httpx.Response:
        answered.append(str(request.url))
        return httpx.Response(404, text="Not Found")

    async with httpx.AsyncClient(transport=httpx.MockTransport(server)) as http:
        client = AGUIClient("http://127.0.0.1:8000", path="/agui", http=http)
        with pytest.raises(RequestRefused, match="check the URL: it is where the adapter's sub-app is mounted"):
            await client.thread().say("hi")

    assert answered == ["http://127.0.0.1:8000/agui"]


def test_a_path_that_is_not_a_mount_path_is_refused() -> None:
    with pytest.raises(ValueError, match="path must start with '/'"):
        AGUIClient(whole_app("/agui"), path="agui")


# An SQLite file that cannot be opened: its path for the app author, never for the client

Unopenable = Callable[[Path], Path]
UNOPENABLE: list[Any] = [
    pytest.param(lambda tmp: tmp / "missing" / "turns.db", "its directory", id="no-directory"),
    pytest.param(lambda tmp: tmp, "it is a directory", id="a-directory"),
    pytest.param(lambda tmp: _written(tmp / "notes.txt", b"not a database" * 100), "", id="not-a-database"),
]


def _written(path: Path, content: bytes) -> Path:
    path.write_bytes(content)
    return path


@pytest.mark.parametrize(("where", "why"), UNOPENABLE)
async def test_an_sqlite_file_that_cannot_be_opened_is_named_to_the_app_author(
    tmp_path: Path, where: Unopenable, why: str
) -> None:
    path = str(where(tmp_path))
    store = SQLiteStore(path)

    with pytest.raises(StoreUnavailable) as unavailable:
        await store.load("t1")
    await store.close()

    assert path not in str(unavailable.value)  # what a client may be told (STORE_UNAVAILABLE)
    assert f"the SQLite file {path!r}" in str(unavailable.value.__cause__)
    assert why in str(unavailable.value.__cause__)


@pytest.mark.parametrize(("where", "why"), UNOPENABLE)
async def test_a_served_run_on_an_unopenable_file_logs_its_path_and_never_tells_the_client(
    tmp_path: Path, where: Unopenable, why: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = str(where(tmp_path))
    store = SQLiteStore(path)
    app = create_app(Adapter(ScriptedBackend(), store=store))

    with caplog.at_level(logging.WARNING):
        async with AGUIClient(app, strict=False) as client:
            run = await client.run(run_input("t1", [user("hi")]))
    await store.close()

    assert run.status == 503
    assert path not in run.body.decode()
    assert f"the SQLite file {path!r}" in caplog.text
