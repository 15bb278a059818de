"""adapter.client against a served adapter's session routes: a run read through dropped connections is the run read
whole, each event once and in order; threads listed, renamed and deleted; runs stopped; refusals with their codes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from agui import new_id
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from offices import by_header, manager_may_read_and_approve
from served_demo import serve_agui_demo
from sessions_kit import BOUND, Held, answer, body_of

from adapter import Adapter
from adapter.client import AGUIClient, RequestRefused, Run, SSEDecoder, StreamDropped, StreamLimits, parse_sse
from adapter.stores import SQLiteStore

if TYPE_CHECKING:
    from conftest import MakeAdapter, Serve, Served

WORDS, HOLD = 12, 6
"""The held answer: 12 words, the run waiting after the 6th until the test releases it."""
BEFORE_HOLD_BYTES = 600
"""Fewer bytes than the stream sends before the hold (8 events with ids, of about 100 bytes each)."""
PROPERTY = settings(suppress_health_check=[HealthCheck.function_scoped_fixture])


class Cutting(httpx.AsyncBaseTransport):
    """Real HTTP, but the n-th response's body is cut after `cuts[n]` bytes with a reset (`httpx.ReadError`).

    A cut fires (`fired`) only where it withholds bytes: one at or past the end of a body leaves it whole.
    """

    def __init__(self, cuts: list[int], on_request: Callable[[int], None] = lambda n: None) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.cuts = list(cuts)
        self.on_request = on_request
        self.requests: list[httpx.Request] = []
        self.fired = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        self.on_request(len(self.requests))
        response = await self.inner.handle_async_request(request)
        if not self.cuts:
            return response
        assert isinstance(response.stream, httpx.AsyncByteStream)
        cut = _Cut(response.stream, self.cuts.pop(0), self)
        extensions = response.extensions
        return httpx.Response(response.status_code, headers=response.headers, stream=cut, extensions=extensions)

    async def aclose(self) -> None:
        await self.inner.aclose()


class _Cut(httpx.AsyncByteStream):
    def __init__(self, stream: httpx.AsyncByteStream, budget: int, transport: Cutting) -> None:
        self.stream = stream
        self.budget = budget
        self.transport = transport

    async def __aiter__(self) -> AsyncIterator[bytes]:
        left = self.budget
        async for chunk in self.stream:
            if len(chunk) > left:  # a cut at the body's very end withholds nothing: it is no drop
                yield chunk[:left]
                self.transport.fired += 1
                raise httpx.ReadError("the connection was reset")
            left -= len(chunk)
            yield chunk

    async def aclose(self) -> None:
        await self.stream.aclose()


BODY = b"".join(
    f'id: {n}\ndata: {{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "{n}"}}\n\n'.encode()
    for n in range(1, 5)
)


def test_a_frame_cut_by_a_drop_is_forgotten_and_the_next_body_starts_afresh() -> None:
    """At every byte the body may be cut at."""
    whole = [(frame.id, frame.text) for frame in parse_sse(BODY).frames]
    for cut in range(len(BODY) + 1):
        decoder = SSEDecoder()
        before = decoder.feed(BODY[:cut])
        decoder.drop()
        after = decoder.feed(BODY) + decoder.close()

        assert [(frame.id, frame.text) for frame in before] == whole[: BODY[:cut].count(b"\n\n")], cut
        assert [(frame.id, frame.text) for frame in after] == whole, cut
        assert decoder.problems == [], cut


def test_a_frame_keeps_its_last_id_and_an_id_with_a_nul_is_ignored() -> None:
    parsed = parse_sse(b"id: 1\nid: 2\ndata: {}\n\nid\ndata: {}\n\nid: a\x00b\ndata: {}\n\ndata: {}\n\n")

    assert [frame.id for frame in parsed.frames] == ["2", "", None, None]


def frame(n: int, kind: str, **fields: str) -> bytes:
    return f"id: {n}\ndata: {json.dumps({'type': kind, **fields})}\n\n".encode()


SERVED = [
    frame(1, "RUN_STARTED", threadId="t", runId="r"),
    frame(2, "TEXT_MESSAGE_START", messageId="m", role="assistant"),
    frame(3, "TEXT_MESSAGE_CONTENT", messageId="m", delta="hi"),
    frame(4, "TEXT_MESSAGE_END", messageId="m"),
    frame(5, "RUN_FINISHED", threadId="t", runId="r"),
]


@pytest.mark.parametrize(
    ("resent", "problem"),
    [
        pytest.param(
            SERVED[1:],
            "event id 2 after 2: the run's events come once each, numbered with no gap (left out: it was read already)",
            id="an-event-again",
        ),
        pytest.param(
            SERVED[3:], "event id 4 after 2: the run's events come once each, numbered with no gap", id="a-gap"
        ),
    ],
)
async def test_a_server_that_resends_or_skips_an_event_on_a_reattach_is_caught_by_the_ids(
    resent: list[bytes], problem: str
) -> None:
    """The client does not take on trust what the server sends after `Last-Event-ID`."""
    asked: list[str | None] = []

    async def cut_after_two() -> AsyncIterator[bytes]:
        yield b"".join(SERVED[:2])
        raise httpx.ReadError("the connection was reset")

    def handler(request: httpx.Request) -> httpx.Response:
        asked.append(request.headers.get("last-event-id"))
        body = cut_after_two() if request.method == "POST" else b"".join(resent)
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    async with (
        httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http,
        AGUIClient("http://agent.test/", http=http, strict=False, reattach=True) as client,
    ):
        run = await client.run({"threadId": "t", "runId": "r", "messages": []})

    assert asked == [None, "2"]
    assert run.problems == [problem]
    kept = SERVED[:2] + [frame for frame in resent if frame not in SERVED[:2]]
    assert [event["type"] for event in run.wire] == [json.loads(f.split(b"data: ")[1])["type"] for f in kept]


@pytest.fixture
async def one(serve: Serve, tmp_path: Path) -> tuple[Served, Held]:
    held = Held()
    return await serve(Adapter(held, store=SQLiteStore(tmp_path / "turns.db"))), held


async def whole(served: Served, thread_id: str, run_id: str) -> Run:
    """The run read once from its events route, uninterrupted, after it ended."""
    async with AGUIClient(served.url + "/", http=served.http) as client:
        return await client.reattach(thread_id, run_id)


async def a_finished_run(one: tuple[Served, Held]) -> tuple[str, str]:
    """The thread and run ids of a held run let go at once and posted to its end: a journal to reattach to."""
    served, held = one
    thread_id, run_id = new_id("thread"), new_id("run")
    held.release(thread_id)
    await served.http.post(served.url + "/", json=body_of(thread_id, run_id, f"hold {WORDS} {HOLD}"))
    return thread_id, run_id


def ids(run: Run) -> list[str | None]:
    return [frame.id for frame in run.frames if frame.text is not None]


def check_once_each(run: Run, reference: Run, after: int = 0) -> None:
    """The rule: the events read are the run's after `after`, each once, in order, with their ids 1, 2, 3, ..."""
    assert run.problems == []
    assert run.invalid == []
    assert run.wire == reference.wire[after:]
    assert ids(run) == [str(n) for n in range(after + 1, len(reference.wire) + 1)]
    assert run.last_event_id == str(len(reference.wire))


async def until(condition: Callable[[], bool], what: str) -> None:
    for _ in range(int(BOUND / 0.01)):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never: {what}")


@PROPERTY
@given(cuts=st.lists(st.integers(min_value=1, max_value=BEFORE_HOLD_BYTES), min_size=1, max_size=4), live=st.booleans())
async def test_a_post_read_through_drops_is_the_run_read_whole(
    one: tuple[Served, Held], cuts: list[int], live: bool
) -> None:
    """Cut anywhere (mid-frame, mid-line, between frames), while the run goes on or after it ended."""
    served, held = one
    thread_id, run_id = new_id("thread"), new_id("run")
    if not live:
        held.release(thread_id)
    cutting = Cutting(cuts, on_request=lambda n: held.release(thread_id) if n > 1 else None)

    async with (
        httpx.AsyncClient(transport=cutting, timeout=BOUND) as http,
        AGUIClient(served.url + "/", http=http, reattach=True) as client,
    ):
        run = await client.run(body_of(thread_id, run_id, f"hold {WORDS} {HOLD}"))

    check_once_each(run, await whole(served, thread_id, run_id))
    assert run.text == answer(WORDS)
    assert run.outcome == {"type": "success"}
    assert len(run.drops) == cutting.fired >= 1
    assert len(cutting.requests) == cutting.fired + 1


@PROPERTY
@given(
    cuts=st.lists(st.integers(min_value=1, max_value=BEFORE_HOLD_BYTES), max_size=4),
    after=st.integers(min_value=0, max_value=WORDS + 4),
    streamed=st.booleans(),
)
async def test_a_reattach_reads_each_event_after_the_id_once_whatever_drops(
    one: tuple[Served, Held], cuts: list[int], after: int, streamed: bool
) -> None:
    """`reattach` (the whole `Run`) and `follow` (each event as it comes) alike."""
    served, _ = one
    thread_id, run_id = await a_finished_run(one)
    reference = await whole(served, thread_id, run_id)
    cutting = Cutting(cuts)

    async with (
        httpx.AsyncClient(transport=cutting, timeout=BOUND) as http,
        AGUIClient(served.url + "/", http=http) as client,
    ):
        if streamed:
            followed = [event async for event in client.follow(thread_id, run_id, after=after)]
        else:
            read = await client.reattach(thread_id, run_id, after=after)

    if streamed:
        assert followed == reference.events[after:]
    else:
        check_once_each(read, reference, after)
        assert len(read.drops) == cutting.fired


async def test_a_dropped_post_raises_with_the_last_id_and_a_reattach_after_it_gives_the_rest(
    one: tuple[Served, Held],
) -> None:
    served, held = one
    thread_id, run_id = new_id("thread"), new_id("run")
    held.release(thread_id)

    async with (
        httpx.AsyncClient(transport=Cutting([350]), timeout=BOUND) as http,
        AGUIClient(served.url + "/", http=http) as client,
    ):
        with pytest.raises(StreamDropped) as dropped:
            await client.run(body_of(thread_id, run_id, f"hold {WORDS} {HOLD}"))
        seen = dropped.value.run
        rest = await client.reattach(thread_id, run_id, after=seen.last_event_id)

    reference = await whole(served, thread_id, run_id)
    assert isinstance(dropped.value, httpx.TransportError)
    assert seen.drops == ["ReadError: the connection was reset"]
    assert seen.last_event_id == str(len(seen.wire))
    assert 0 < len(seen.wire) < len(reference.wire)
    assert seen.wire + rest.wire == reference.wire
    assert rest.problems == []


async def test_a_silence_past_event_timeout_is_a_drop_that_a_reattach_takes_up(one: tuple[Served, Held]) -> None:
    served, held = one
    thread_id, run_id = new_id("thread"), new_id("run")
    cutting = Cutting([])
    limits = StreamLimits(event_timeout=0.2)

    async with (
        httpx.AsyncClient(transport=cutting, timeout=BOUND) as http,
        AGUIClient(served.url + "/", http=http, reattach=True, limits=limits, max_reattaches=1000) as client,
    ):
        reading = asyncio.ensure_future(client.run(body_of(thread_id, run_id, f"hold {WORDS} {HOLD}")))
        await until(lambda: len(cutting.requests) >= 3, "two reattaches while the run is silent")
        held.release(thread_id)
        run = await reading

    check_once_each(run, await whole(served, thread_id, run_id))
    assert len(run.drops) >= 2
    assert all(drop.endswith("(event_timeout).") for drop in run.drops)


async def test_reattaching_gives_up_after_max_reattaches_that_bring_nothing(one: tuple[Served, Held]) -> None:
    served, _ = one
    thread_id, run_id = await a_finished_run(one)
    cutting = Cutting([150, 1, 1, 1, 1, 1])

    async with (
        httpx.AsyncClient(transport=cutting, timeout=BOUND) as http,
        AGUIClient(served.url + "/", http=http, max_reattaches=3) as client,
    ):
        with pytest.raises(StreamDropped) as dropped:
            await client.reattach(thread_id, run_id)

    run = dropped.value.run
    assert len(cutting.requests) == 1 + 3
    assert len(run.drops) == 4
    assert run.last_event_id == "1"
    assert [event["type"] for event in run.wire] == ["RUN_STARTED"]
    assert "reattach after event id 1" in str(dropped.value)


async def test_a_reattach_after_the_end_is_an_empty_204_and_an_unknown_run_is_refused_with_its_code(
    one: tuple[Served, Held],
) -> None:
    served, _ = one
    thread_id, run_id = await a_finished_run(one)
    reference = await whole(served, thread_id, run_id)

    async with AGUIClient(served.url + "/", http=served.http) as client:
        after_the_end = await client.reattach(thread_id, run_id, after=len(reference.wire))
        followed = [event async for event in client.follow(thread_id, run_id, after=len(reference.wire))]
        with pytest.raises(RequestRefused) as unknown:
            await client.reattach(thread_id, new_id("run"))

    assert (after_the_end.status, after_the_end.wire, after_the_end.problems, followed) == (204, [], [], [])
    assert (unknown.value.status, unknown.value.code, unknown.value.hint) == (404, "RUN_NOT_FOUND", "")


# Threads as a resource.


@pytest.fixture
async def served(serve: Serve, make_adapter: MakeAdapter, tmp_path: Path) -> Served:
    return await serve(make_adapter(store=SQLiteStore(tmp_path / "turns.db")))


@pytest.fixture
async def client(served: Served) -> AsyncIterator[AGUIClient]:
    async with AGUIClient(served.url + "/", http=served.http) as opened:
        yield opened


@PROPERTY
@given(count=st.integers(min_value=1, max_value=6), limit=st.integers(min_value=1, max_value=4))
async def test_pages_of_threads_list_each_once_newest_first(client: AGUIClient, count: int, limit: int) -> None:
    prefix = new_id("p")
    made = []
    for index in range(count):
        thread = client.thread(thread_id=f"{prefix}-{index}")
        await thread.say("hello")
        made.append(thread.id)

    paged, before = [], None
    while True:
        page = await client.threads(before=before, limit=limit)
        assert len(page["threads"]) <= limit
        paged += page["threads"]
        before = page["next"]
        if before is None:
            break
    every = [listed async for listed in client.all_threads(limit=limit)]

    mine = [listed["threadId"] for listed in paged if listed["threadId"].startswith(prefix)]
    assert mine == made[::-1]
    assert every == paged
    assert {listed["title"] for listed in paged if listed["threadId"] in made} == {"hello"}


async def test_a_rename_shows_in_the_listing_and_a_bad_title_is_refused_with_its_code(client: AGUIClient) -> None:
    thread = client.thread()
    await thread.say("hello")

    await client.rename_thread(thread.id, "Trip to Lisbon")
    renamed = (await client.threads())["threads"][0]
    await client.rename_thread(thread.id, None)
    cleared = (await client.threads())["threads"][0]
    with pytest.raises(RequestRefused) as blank:
        await client.rename_thread(thread.id, "   ")
    with pytest.raises(RequestRefused) as bad_page:
        await client.threads(limit=101)

    assert (renamed["threadId"], renamed["title"], cleared["title"]) == (thread.id, "Trip to Lisbon", None)
    assert (blank.value.status, blank.value.code) == (422, "INVALID_TITLE")
    assert (bad_page.value.status, bad_page.value.code) == (400, "INVALID_PAGE")


async def test_a_deleted_thread_is_gone_from_every_route(client: AGUIClient) -> None:
    thread = client.thread()
    run = await thread.say("hello")
    run_id = str(run.input["runId"])

    await client.delete_thread(thread.id)
    attempts: list[Callable[[], Awaitable[object]]] = [
        lambda: client.delete_thread(thread.id),
        lambda: client.rename_thread(thread.id, "again"),
        lambda: client.reattach(thread.id, run_id),
        lambda: client.stop(thread.id, run_id),
    ]
    refused = []
    for attempt in attempts:
        with pytest.raises(RequestRefused) as error:
            await attempt()
        refused.append((error.value.status, error.value.code))

    assert refused == [(404, "THREAD_NOT_FOUND")] * 2 + [(404, "RUN_NOT_FOUND")] * 2
    assert thread.id not in [listed["threadId"] async for listed in client.all_threads()]


async def test_a_stopped_run_ends_cancelled_and_a_second_stop_finds_it_ended(one: tuple[Served, Held]) -> None:
    served, held = one
    thread_id, run_id = new_id("thread"), new_id("run")

    async with AGUIClient(served.url + "/", http=served.http) as client:
        reading = asyncio.ensure_future(client.run(body_of(thread_id, run_id, f"hold {WORDS} {HOLD}")))
        await until(lambda: held.streams >= 1, "the run to start")
        asked = await client.stop(thread_id, run_id)
        run = await reading
        again = await client.stop(thread_id, run_id)
        replayed = await client.reattach(thread_id, run_id)
    held.release(thread_id)

    assert (asked, again) == (True, False)
    assert run.outcome == {"type": "cancelled"}
    assert run.problems == []
    assert replayed.wire == run.wire


async def test_a_caller_who_may_read_but_not_run_is_refused_a_stop_and_an_outsider_finds_no_run(
    serve: Serve, tmp_path: Path
) -> None:
    held = Held()
    adapter = Adapter(held, store=SQLiteStore(tmp_path / "turns.db"), authorize=manager_may_read_and_approve)
    served = await serve(adapter, principal=by_header)
    thread_id, run_id = new_id("thread"), new_id("run")
    held.release(thread_id)

    def as_(who: str) -> AGUIClient:
        return AGUIClient(served.url + "/", http=httpx.AsyncClient(headers={"x-user": who}, timeout=BOUND))

    refused: dict[str, Any] = {}
    async with as_("alice") as alice, as_("manager") as manager, as_("bob") as bob:
        await alice.run(body_of(thread_id, run_id, f"hold {WORDS} {HOLD}"))
        for who, client in (("manager", manager), ("bob", bob)):
            with pytest.raises(RequestRefused) as error:
                await client.stop(thread_id, run_id)
            refused[who] = (error.value.status, error.value.code)
        read = await manager.reattach(thread_id, run_id)
        for client in (alice, manager, bob):
            await client.http.aclose()

    assert refused == {"manager": (403, "THREAD_FORBIDDEN"), "bob": (404, "RUN_NOT_FOUND")}
    assert read.outcome == {"type": "success"}


async def test_the_docs_session_example_drives_the_demo(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    page = (Path(__file__).parents[2] / "docs" / "client.md").read_text(encoding="utf-8")
    code = next(block for block in page.split("```python\n")[1:] if "async def session(" in block).split("```")[0]
    namespace: dict[str, Any] = {}
    exec(compile(code, "docs/client.md", "exec"), namespace)

    with serve_agui_demo(tmp_path / "demo.db") as base:  # `agui-demo`, as the page says to start it
        await namespace["session"](base + "/agui/")

    printed = capsys.readouterr().out.splitlines()
    assert printed == ["stopping: True", "True", "{'type': 'cancelled'} True", "204", "[('Order A100', [])]"]
