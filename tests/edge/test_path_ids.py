"""An id in a route's path is the id the client escaped there, whatever it holds: `/`, `%`, `?`, spaces, non-ASCII.

A server decodes `%2F` before routing, so without care the thread `a/b` matches no route and `a/runs/b` the
wrong one: a thread `POST /` accepted could then be neither read, renamed, deleted nor reattached to.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

import pytest
from agui import new_id, run_input, user
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.applications import Starlette

from adapter import create_app, mount
from adapter.stores import SQLiteStore

if TYPE_CHECKING:
    from conftest import MakeAdapter, Serve, Served

# Text that routing and escaping could get wrong; the id rules refuse control characters, so none are drawn.
PIECES = st.sampled_from(["/", "%", "%2F", "%25", "?", "#", " ", "é", "runs", "events", "stop", "a", "Z", "."])
IDS = st.lists(PIECES, min_size=1, max_size=6).map("".join).filter(lambda value: value not in (".", ".."))
"""Ids a run accepts: a dot segment (`.` or `..`) is refused at creation (tests/sessions/test_thread_life.py)."""


@pytest.fixture(params=["root", "mounted"])
async def served(request: pytest.FixtureRequest, serve: Serve, make_adapter: MakeAdapter, tmp_path: Path) -> Served:
    adapter = make_adapter(store=SQLiteStore(tmp_path / "turns.db"))
    if request.param == "root":
        return await serve(adapter)
    on = await serve(Starlette(routes=[mount("/agui", create_app(adapter))]))
    on.url += "/agui"
    return on


def path(*ids: str) -> str:
    # "." escaped too: a client drops a "." or ".." segment (RFC 3986 dot segments) before sending.
    return "/".join(quote(part, safe="").replace(".", "%2E") for part in ids)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(thread_id=IDS, run_id=IDS)
async def test_every_thread_route_reaches_the_thread_its_escaped_id_names(
    served: Served, thread_id: str, run_id: str
) -> None:
    thread_id = f"{thread_id}-{new_id('t')}"  # a fresh thread each example
    http, base = served.http, served.url
    posted = await http.post(base + "/", json=run_input(thread_id, [user("hello")], runId=run_id))
    assert posted.status_code == 200
    assert '"RUN_FINISHED"' in posted.text

    read = await http.get(f"{base}/threads/{path(thread_id)}")
    events = await http.get(f"{base}/threads/{path(thread_id)}/runs/{path(run_id)}/events")
    renamed = await http.patch(f"{base}/threads/{path(thread_id)}", json={"title": "renamed"})
    stopped = await http.post(f"{base}/threads/{path(thread_id)}/runs/{path(run_id)}/stop")
    deleted = await http.delete(f"{base}/threads/{path(thread_id)}")
    gone = await http.get(f"{base}/threads/{path(thread_id)}")

    assert read.status_code == 200
    assert read.json()["threadId"] == thread_id
    assert events.status_code == 200
    assert f'"runId":"{run_id}"' in events.text.replace("\\/", "/")
    assert renamed.status_code == 200
    assert renamed.json() == {"threadId": thread_id, "title": "renamed"}
    # it had ended
    assert stopped.status_code == 202
    assert stopped.json()["stopping"] is False
    assert (deleted.status_code, gone.status_code) == (204, 404)


async def test_a_trailing_slash_is_still_the_route_s_and_not_the_id_s(served: Served) -> None:
    thread_id = new_id("t")
    await served.http.post(served.url + "/", json=run_input(thread_id, [user("hello")]))

    read = await served.http.get(f"{served.url}/threads/{thread_id}/")

    assert read.status_code == 200
    assert read.json()["threadId"] == thread_id
