"""Every route of the sub-app answers with or without its trailing slash, never with a redirect."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from agui import assert_clean_stream, new_id, run_input, user
from fastapi import FastAPI
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.testclient import TestClient

from adapter import Adapter, create_app, mount
from adapter.backends import ScriptedBackend

if TYPE_CHECKING:
    from conftest import MakeAdapter, Serve


def starlette_app(adapter: Adapter) -> Starlette:
    return Starlette(routes=[mount("/agui", create_app(adapter))])


def fastapi_app(adapter: Adapter) -> Starlette:
    app = FastAPI()
    app.routes.append(mount("/agui", create_app(adapter)))
    return app


APPS = [pytest.param(starlette_app, id="starlette"), pytest.param(fastapi_app, id="fastapi")]


async def first_thread(client: httpx.AsyncClient) -> str:
    response = await client.post("/agui/", json=run_input(new_id("t"), [user("hello")]))
    assert response.status_code == 200
    return str(assert_clean_stream(response.content)[0]["threadId"])


@pytest.mark.parametrize("build", APPS)
@pytest.mark.parametrize("slash", ["", "/"], ids=["bare", "slash"])
async def test_every_route_answers_both_forms_without_a_redirect(
    build: Callable[[Adapter], Starlette], slash: str, make_adapter: MakeAdapter
) -> None:
    transport = httpx.ASGITransport(build(make_adapter()))
    async with httpx.AsyncClient(transport=transport, base_url="http://test", follow_redirects=False) as client:
        thread_id = await first_thread(client)
        run = await client.post(f"/agui{slash}", json=run_input(new_id("t"), [user("hello")]))
        reads = [
            await client.get(f"/agui/{route}{slash}") for route in ("capabilities", "health", f"threads/{thread_id}")
        ]

    assert run.status_code == 200, run.text
    assert any(event["type"] == "TEXT_MESSAGE_CONTENT" for event in assert_clean_stream(run.content))
    assert [response.status_code for response in reads] == [200, 200, 200]
    assert reads[2].json()["messages"]


async def test_an_unknown_path_is_still_a_404_in_either_form(make_adapter: MakeAdapter) -> None:
    transport = httpx.ASGITransport(starlette_app(make_adapter()))
    async with httpx.AsyncClient(transport=transport, base_url="http://test", follow_redirects=False) as client:
        answers = [await client.get(path) for path in ("/agui/nowhere", "/agui/nowhere/", "/aguix")]

    assert [response.status_code for response in answers] == [404, 404, 404]


async def test_a_plain_mount_serves_inner_routes_in_both_forms(make_adapter: MakeAdapter) -> None:
    app = Starlette(routes=[Mount("/agui", app=create_app(make_adapter()))])
    transport = httpx.ASGITransport(app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test", follow_redirects=False) as client:
        answers = [await client.get(path) for path in ("/agui/capabilities/", "/agui/health/")]

    assert [response.status_code for response in answers] == [200, 200]


async def test_curl_without_follow_gets_the_stream_at_the_bare_path(serve: Serve, make_adapter: MakeAdapter) -> None:
    served = await serve(starlette_app(make_adapter()))
    body: dict[str, Any] = run_input(new_id("t"), [user("hello")])
    curl = await asyncio.create_subprocess_exec(
        "curl", "-sN", "-w", "\n%{http_code}", f"{served.url}/agui", "-H", "content-type: application/json",
        "-d", httpx.Request("POST", "http://x", json=body).content.decode(),
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    output, _ = await asyncio.wait_for(curl.communicate(), 10)

    stream, _, status = output.rpartition(b"\n")
    assert (curl.returncode, status) == (0, b"200")
    assert any(event["type"] == "RUN_FINISHED" for event in assert_clean_stream(stream))


SEGMENTS = st.sampled_from(["", "capabilities", "health", "threads/t-known", "threads/t-unknown", "nowhere", "a/b"])
SLASH_BODY = run_input("t-known", [user("hello")])


@pytest.fixture(scope="module")
def known_thread() -> Iterator[TestClient]:
    """An app whose thread `t-known` exists, for a client that never follows a redirect."""
    with TestClient(starlette_app(Adapter(ScriptedBackend())), follow_redirects=False) as client:
        assert client.post("/agui", json=SLASH_BODY).status_code == 200
        yield client


@settings(max_examples=60)
@given(segment=SEGMENTS, method=st.sampled_from(["GET", "POST"]))
def test_a_path_and_its_slashed_form_always_get_the_same_answer(
    known_thread: TestClient, segment: str, method: str
) -> None:
    path = f"/agui/{segment}".rstrip("/")
    answers = [known_thread.request(method, form, json=SLASH_BODY) for form in (path, path + "/")]

    assert answers[0].status_code == answers[1].status_code, path
    assert all(not 300 <= answer.status_code < 400 for answer in answers), path
