from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Callable
from importlib import metadata
from typing import TYPE_CHECKING, Any

import anyio
import httpx
import pytest
from ag_ui.core import (
    AgentCapabilities,
    RunAgentInput,
    TextPart,
    UserMessage,
)
from agui import FRONTEND_TOOLS, extras_in, http_scope, new_id, nulls_in, run_input, user
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.types import Message

from adapter import Adapter, ConfigurationError, Limits, create_app
from adapter._limits import CheckedInput  # private on purpose: what the edge starts a run with, recorded
from adapter._sessions._journal import RunEvents  # private on purpose: what `Adapter.start` returns, overridden here
from adapter.backends import ScriptedBackend
from adapter.client import parse_sse
from adapter.stores import MemoryStore, SQLiteStore

MINIMAL: dict[str, Any] = {"threadId": "t1", "runId": "r1", "messages": []}


if TYPE_CHECKING:
    from conftest import Connect, Kit


class RecordingAdapter(Adapter):
    """A scripted adapter that keeps the inputs the edge started it with."""

    def __init__(self, **options: Any) -> None:
        super().__init__(ScriptedBackend(fallback="ok"), **options)
        self.received: list[RunAgentInput] = []

    async def start(self, run_input: RunAgentInput | CheckedInput, *, principal: str | None = None) -> RunEvents:
        self.received.append(run_input.input if isinstance(run_input, CheckedInput) else run_input)
        return await super().start(run_input, principal=principal)


@pytest.fixture
def handler() -> RecordingAdapter:
    return RecordingAdapter()


def client_of(adapter: Adapter, **options: Any) -> httpx.AsyncClient:
    """A client for `create_app(adapter, **options)`."""
    return httpx.AsyncClient(transport=httpx.ASGITransport(create_app(adapter, **options)), base_url="http://test")


@pytest.fixture
def client_for(handler: RecordingAdapter) -> Callable[..., httpx.AsyncClient]:
    """Builds a client for a recording adapter within `max_body_bytes`, or the `handler` fixture's without it."""

    def build(max_body_bytes: int | None = None) -> httpx.AsyncClient:
        if max_body_bytes is None:
            return client_of(handler)
        return client_of(RecordingAdapter(limits=Limits(max_body_bytes=max_body_bytes)))

    return build


@pytest.fixture
async def client(client_for: Callable[..., httpx.AsyncClient]) -> AsyncIterator[httpx.AsyncClient]:
    async with client_for() as instance:
        yield instance


def events_of(response: httpx.Response) -> list[dict[str, Any]]:
    return parse_sse(response.content).events


def body_with_user_text(escaped: str) -> str:
    """A run body whose one user message is the JSON string literal `"<escaped>"`, written verbatim."""
    return '{"threadId": "t1", "runId": "r1", "messages": [{"id": "m1", "role": "user", "content": "' + escaped + '"}]}'


def assert_refused(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status
    assert response.headers["content-type"] == "application/json"
    error: dict[str, Any] = response.json()["error"]
    assert error["code"] == code
    return error


def assert_served(response: httpx.Response) -> None:
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream"
    types = [event["type"] for event in events_of(response)]
    assert (types[0], types[-1]) == ("RUN_STARTED", "RUN_FINISHED")


@pytest.mark.parametrize(
    "content_type",
    [
        pytest.param("text/plain", id="text"),
        pytest.param("application/x-www-form-urlencoded", id="form"),
        pytest.param("application/json; charset=latin-1", id="non-utf8-charset"),
        pytest.param("application/jsonx", id="lookalike"),
    ],
)
async def test_non_json_content_type_is_415(
    client: httpx.AsyncClient, handler: RecordingAdapter, content_type: str
) -> None:
    response = await client.post("/", content=json.dumps(MINIMAL), headers={"content-type": content_type})

    assert_refused(response, 415, "UNSUPPORTED_MEDIA_TYPE")
    assert handler.received == []


async def test_missing_content_type_is_415(client: httpx.AsyncClient) -> None:
    response = await client.post("/", content=json.dumps(MINIMAL).encode())

    assert_refused(response, 415, "UNSUPPORTED_MEDIA_TYPE")


@pytest.mark.parametrize("content_type", ["application/json; charset=utf-8", 'Application/JSON; charset="UTF-8"'])
async def test_json_with_a_utf8_charset_is_served(client: httpx.AsyncClient, content_type: str) -> None:
    response = await client.post("/", content=json.dumps(MINIMAL), headers={"content-type": content_type})

    assert_served(response)


async def test_body_over_the_limit_is_413(client_for: Callable[..., httpx.AsyncClient]) -> None:
    body = {**MINIMAL, "state": {"padding": "x" * 200}}
    async with client_for(max_body_bytes=100) as client:
        response = await client.post("/", json=body)

    assert_refused(response, 413, "CONTENT_TOO_LARGE")


async def test_chunked_body_over_the_limit_is_413() -> None:
    handler = RecordingAdapter(limits=Limits(max_body_bytes=300))

    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"threadId": "t1", "runId": "r1", "messages": [], "state": "'
        for _ in range(10):
            yield b"x" * 50
        yield b'"}'

    async with client_of(handler) as client:
        response = await client.post("/", content=chunks(), headers={"content-type": "application/json"})

    assert "content-length" not in response.request.headers
    assert_refused(response, 413, "CONTENT_TOO_LARGE")
    assert handler.received == []


async def test_body_at_the_limit_is_served(client_for: Callable[..., httpx.AsyncClient]) -> None:
    body = json.dumps(MINIMAL).encode()
    async with client_for(max_body_bytes=len(body)) as client:
        response = await client.post("/", content=body, headers={"content-type": "application/json"})

    assert_served(response)


async def test_declared_oversize_is_refused_before_reading() -> None:
    app = create_app(RecordingAdapter(limits=Limits(max_body_bytes=100)))
    sent: list[Message] = []

    async def receive() -> Message:
        raise AssertionError("the body was read")

    async def send(message: Message) -> None:
        sent.append(message)

    scope = http_scope([(b"content-type", b"application/json"), (b"content-length", b"1000000")])
    with anyio.fail_after(2):
        await app(scope, receive, send)

    assert sent[0]["status"] == 413


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b"{", id="truncated-json"),
        pytest.param(b"", id="empty"),
        pytest.param(b'{"threadId": "t1", "runId": "r1", "messages": [], "state": NaN}', id="nan-literal"),
        pytest.param(b'{"threadId": "t1", "runId": "r1", "messages": [], "x": "\xff"}', id="not-utf8"),
        pytest.param(b"[]", id="not-an-object"),
        pytest.param(json.dumps({"runId": "r1", "messages": []}).encode(), id="missing-threadId"),
        pytest.param(json.dumps({"threadId": "t1", "messages": []}).encode(), id="missing-runId"),
        pytest.param(json.dumps({"threadId": "t1", "runId": "r1"}).encode(), id="missing-messages"),
        pytest.param(json.dumps({**MINIMAL, "threadId": 123}).encode(), id="threadId-number"),
        pytest.param(json.dumps({**MINIMAL, "messages": "x"}).encode(), id="messages-string"),
        pytest.param(
            json.dumps({**MINIMAL, "messages": [{"role": "user", "content": "hi"}]}).encode(), id="message-without-id"
        ),
        pytest.param(
            json.dumps({**MINIMAL, "messages": [{"id": "m1", "content": "hi"}]}).encode(), id="message-without-role"
        ),
        pytest.param(
            json.dumps({**MINIMAL, "resume": [{"interruptId": 7, "status": "resolved"}]}).encode(),
            id="resume-interruptId-number",
        ),
        pytest.param(
            json.dumps({**MINIMAL, "resume": [{"interruptId": "i1", "status": "later"}]}).encode(),
            id="resume-unknown-status",
        ),
        pytest.param(json.dumps({**MINIMAL, "protocolVersion": 1.0}).encode(), id="protocolVersion-number"),
        pytest.param(
            json.dumps({**MINIMAL, "messages": [{"id": "m1", "role": "user", "content": [{"text": "hi"}]}]}).encode(),
            id="part-without-type",
        ),
    ],
)
async def test_malformed_input_is_422_without_a_stream(
    client: httpx.AsyncClient, handler: RecordingAdapter, body: bytes
) -> None:
    response = await client.post("/", content=body, headers={"content-type": "application/json"})

    error = assert_refused(response, 422, "INVALID_INPUT")
    assert error["details"]
    assert handler.received == []


async def test_validation_details_echo_no_nested_input(client: httpx.AsyncClient) -> None:
    deep: Any = 1
    for _ in range(90):  # within the nesting limit, so that validation judges it
        deep = [deep]
    response = await client.post("/", json={**MINIMAL, "messages": deep, "threadId": "t" * 1000, "runId": 7})

    details = assert_refused(response, 422, "INVALID_INPUT")["details"]
    assert sorted((detail["loc"][0], detail.get("input")) for detail in details) == [("messages", None), ("runId", 7)]


async def test_validation_details_are_pydantic_errors_without_urls(client: httpx.AsyncClient) -> None:
    response = await client.post("/", json={**MINIMAL, "threadId": 123})

    details = assert_refused(response, 422, "INVALID_INPUT")["details"]
    assert details == [
        {"type": "string_type", "loc": ["threadId"], "msg": "Input should be a valid string", "input": 123}
    ]


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(r"\ud800", id="lone-high"),
        pytest.param(r"x\udc00", id="lone-low"),
        pytest.param(r"\udc00\ud800", id="reversed-pair"),
    ],
)
async def test_unpaired_surrogate_escape_is_422(client: httpx.AsyncClient, text: str) -> None:
    body = body_with_user_text(text)

    response = await client.post("/", content=body, headers={"content-type": "application/json"})

    error = assert_refused(response, 422, "INVALID_INPUT")
    assert error["details"][0]["type"] == "json_invalid"


@pytest.mark.parametrize(
    "text", [pytest.param(r"\ud83d\udc4d", id="escaped-pair"), pytest.param(r"\\ud800", id="escaped-backslash")]
)
async def test_paired_surrogates_and_escaped_backslashes_are_served(
    client: httpx.AsyncClient, handler: RecordingAdapter, text: str
) -> None:
    body = body_with_user_text(text)

    response = await client.post("/", content=body, headers={"content-type": "application/json"})

    assert_served(response)
    assert handler.received[0].messages[0].content in ("👍", "\\ud800")


async def test_large_body_is_parsed_and_served(client: httpx.AsyncClient, handler: RecordingAdapter) -> None:
    response = await client.post("/", json={**MINIMAL, "state": {"blob": "x" * 200_000}})

    assert_served(response)
    assert handler.received[0].state == {"blob": "x" * 200_000}


async def test_client_gone_while_sending_the_body_starts_no_run(handler: RecordingAdapter) -> None:
    inbox: list[Message] = [
        {"type": "http.request", "body": b'{"threadId": ', "more_body": True},
        {"type": "http.disconnect"},
    ]

    async def receive() -> Message:
        return inbox.pop(0)

    async def send(message: Message) -> None:
        pass

    with anyio.fail_after(2):
        await create_app(handler)(http_scope([(b"content-type", b"application/json")]), receive, send)

    assert handler.received == []


@pytest.mark.parametrize("version", ["2.0", "0.9", "10.1", "9" * 5000 + ".0", "0" * 5000 + "2.0"])
async def test_another_major_version_is_400(client: httpx.AsyncClient, handler: RecordingAdapter, version: str) -> None:
    response = await client.post("/", json={**MINIMAL, "protocolVersion": version})

    assert_refused(response, 400, "UNSUPPORTED_PROTOCOL_VERSION")
    assert handler.received == []


@pytest.mark.parametrize(
    ("version", "warned"),
    [
        pytest.param("1.0", False, id="ours"),
        pytest.param("1.7", True, id="newer-minor"),
        pytest.param("1.10", True, id="newer-minor-two-digits"),
        pytest.param("1." + "9" * 5000, True, id="newer-minor-past-the-int-conversion-limit"),
        pytest.param("0001.0", False, id="leading-zeros"),
        pytest.param("banana", True, id="uninterpretable"),
        pytest.param("1", True, id="one-component"),
        pytest.param(None, False, id="absent"),
    ],
)
async def test_same_major_or_uninterpretable_version_is_served(
    client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture, version: str | None, warned: bool
) -> None:
    body = MINIMAL if version is None else {**MINIMAL, "protocolVersion": version}

    with caplog.at_level(logging.WARNING, logger="adapter"):
        response = await client.post("/", json=body)

    assert_served(response)
    assert any("protocolVersion" in record.getMessage() for record in caplog.records) is warned


async def test_unknown_members_are_kept_and_served(client: httpx.AsyncClient, handler: RecordingAdapter) -> None:
    message = {"id": "m1", "role": "user", "content": "hi", "futureField": {"x": 1}}
    body = {**MINIMAL, "messages": [message], "futureField": {"x": 1}, "parentRunId": "r0"}

    response = await client.post("/", json=body)

    assert_served(response)
    (received,) = handler.received
    assert received.model_extra == {"futureField": {"x": 1}}
    assert received.parent_run_id == "r0"
    assert received.messages[0].model_extra == {"futureField": {"x": 1}}


async def test_unknown_role_message_is_dropped_with_a_warning(
    client: httpx.AsyncClient, handler: RecordingAdapter, caplog: pytest.LogCaptureFixture
) -> None:
    messages = [
        {"id": "m1", "role": "user", "content": "before"},
        {"id": "m9", "role": "narrator", "content": "x"},
        {"id": "m2", "role": "user", "content": "after"},
    ]

    with caplog.at_level(logging.WARNING, logger="adapter"):
        response = await client.post("/", json={**MINIMAL, "messages": messages})

    assert_served(response)
    assert [message.id for message in handler.received[0].messages] == ["m1", "m2"]
    assert "narrator" in caplog.text


async def test_unknown_content_parts_are_dropped_with_a_warning(
    client: httpx.AsyncClient, handler: RecordingAdapter, caplog: pytest.LogCaptureFixture
) -> None:
    content = [
        {"type": "text", "text": "look"},
        {"type": "hologram", "uri": "h://1"},
        {"type": "image", "source": {"type": "s3", "bucket": "b"}},
        {"type": "image", "source": {"type": "url", "value": "https://example.com/a.png"}},
    ]

    with caplog.at_level(logging.WARNING, logger="adapter"):
        response = await client.post(
            "/", json={**MINIMAL, "messages": [{"id": "m1", "role": "user", "content": content}]}
        )

    assert_served(response)
    (message,) = handler.received[0].messages
    assert isinstance(message, UserMessage)
    assert isinstance(message.content, list)
    assert [part.type for part in message.content] == ["text", "image"]
    assert isinstance(message.content[0], TextPart)
    assert "hologram" in caplog.text
    assert "s3" in caplog.text


async def test_accept_header_is_ignored(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/", json=MINIMAL, headers={"accept": "application/vnd.ag-ui.event+proto, application/json;q=0.1"}
    )

    assert_served(response)


async def test_app_works_mounted_under_a_prefix(handler: RecordingAdapter) -> None:
    outer = Starlette(routes=[Mount("/agui", app=create_app(handler))])

    async with httpx.AsyncClient(transport=httpx.ASGITransport(outer), base_url="http://test") as client:
        run = await client.post("/agui/", json=MINIMAL)
        capabilities = await client.get("/agui/capabilities")
        health = await client.get("/agui/health")

    assert_served(run)
    assert capabilities.status_code == health.status_code == 200


async def test_capabilities_are_camel_case_json_without_nulls() -> None:
    async with client_of(RecordingAdapter(name="fake")) as client:
        response = await client.get("/capabilities")

    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert body["identity"]["name"] == "fake"
    assert body["humanInTheLoop"]["approveWithEdits"] is True
    assert nulls_in(body) == []
    assert AgentCapabilities.model_validate(body).model_extra == {}


async def test_health(client: httpx.AsyncClient) -> None:
    response = await client.get("/health")

    assert (response.status_code, response.json()) == (200, {"status": "ok"})


class PingedStore(MemoryStore):
    """A memory store whose `ping` fails, hangs or answers, as a test says."""

    def __init__(self, error: Exception | None, *, hangs: bool = False) -> None:
        super().__init__()
        self.error = error
        self.hangs = hangs

    async def ping(self, *, write: bool = False) -> None:
        if self.hangs:
            await anyio.sleep_forever()
        if self.error is not None:
            raise self.error


@pytest.mark.parametrize(
    ("store", "status"),
    [
        pytest.param(lambda: PingedStore(None), 200, id="up"),
        pytest.param(lambda: PingedStore(OSError("connection refused")), 503, id="down"),
        pytest.param(lambda: PingedStore(None, hangs=True), 503, id="hung"),  # a store that never answers is not up
    ],
)
async def test_health_reports_whether_the_store_answers(
    store: Callable[[], PingedStore], status: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("adapter._edge._http._PING_TIMEOUT", 0.2)  # private: how long /health waits (5 s by default)

    async with client_of(RecordingAdapter(store=store())) as client:
        response = await client.get("/health")

    assert response.status_code == status
    assert response.json()["status"] == ("ok" if status == 200 else "unavailable")


async def test_run_route_only_accepts_post(client: httpx.AsyncClient) -> None:
    response = await client.get("/")

    assert response.status_code == 405


@pytest.mark.parametrize("interval", [0, -1.0, float("nan")])
def test_keepalive_interval_must_be_positive(handler: RecordingAdapter, interval: float) -> None:
    with pytest.raises(ValueError, match="positive"):
        create_app(handler, keepalive_interval=interval)


def test_the_body_limit_must_be_positive() -> None:
    with pytest.raises(ConfigurationError, match="max_body_bytes"):
        Limits(max_body_bytes=0)


def test_the_body_limit_moved_into_limits(handler: RecordingAdapter) -> None:
    with pytest.raises(TypeError, match=r"limits=Limits\(max_body_bytes=\.\.\.\)"):
        create_app(handler, max_body_bytes=100)  # type: ignore[call-arg]


def test_only_an_adapter_is_served() -> None:
    with pytest.raises(TypeError, match="Adapter"):
        create_app(object())  # type: ignore[arg-type]


@pytest.mark.parametrize("declared", [None, "1.0", "1.3"], ids=["absent", "1.0", "1.3"])
async def test_run_started_declares_the_servers_protocol_version(connect: Connect, declared: str | None) -> None:
    client = await connect()
    body = run_input(new_id("thread"), [user("hello")])
    if declared is None:
        del body["protocolVersion"]
    else:
        body["protocolVersion"] = declared

    reply = await client.post(body)

    assert reply.started["protocolVersion"] == "1.0"
    assert reply.outcome == {"type": "success"}


async def test_capabilities_declare_interrupts_and_only_server_tools(connect: Connect, kit: Kit) -> None:
    client = await connect()
    await client.thread(tools=FRONTEND_TOOLS).say("go to orders")

    response = await client.get("/capabilities")

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    body: dict[str, Any] = response.json()
    assert nulls_in(body) == []
    capabilities = AgentCapabilities.model_validate(body)
    assert extras_in(capabilities) == []
    hitl = body["humanInTheLoop"]
    assert (hitl["interrupts"], hitl["approvals"], hitl["approveWithEdits"]) == (True, True, True)
    assert body["tools"]["clientProvided"] is True
    assert [item["name"] for item in body["tools"]["items"]] == [t.name for t in kit.tools]
    assert body["transport"]["streaming"] is True


@pytest.mark.parametrize(
    ("options", "identity", "persistent"),
    [
        pytest.param({}, {"name": "ScriptedBackend", "type": "agui-adapter"}, False, id="defaults-in-memory"),
        pytest.param(
            {"name": "orders", "description": "Finds orders.", "store": SQLiteStore(":memory:")},
            {"name": "orders", "type": "agui-adapter", "description": "Finds orders."},
            True,
            id="named-durable",
        ),
    ],
)
async def test_capabilities_say_who_answers_and_whether_state_persists(
    connect: Connect, options: dict[str, Any], identity: dict[str, Any], persistent: bool
) -> None:
    client = await connect(**options)

    body = (await client.get("/capabilities")).json()

    assert {key: body["identity"][key] for key in identity} == identity
    assert body["identity"]["version"] == metadata.version("agui-adapter")
    assert body["state"].get("persistentState", False) is persistent
    assert body["reasoning"] == {"supported": True, "streaming": True, "encrypted": True}
    assert set(body["multimodal"]["input"]) == {"image", "audio", "video", "pdf", "file"}


async def test_capabilities_follow_the_approve_with_edits_option(connect: Connect) -> None:
    client = await connect(approve_with_edits=False)
    (interrupt,) = (await client.thread().say("email ceo@x.io")).interrupts

    body = (await client.get("/capabilities")).json()

    assert body["humanInTheLoop"]["approveWithEdits"] is False
    assert "editedArgs" not in interrupt["responseSchema"]["properties"]
