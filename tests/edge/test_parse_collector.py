"""A large body is parsed with the collector's automatic collections held off, and the process's setting kept.

The pause is the process's, taken from worker threads: whatever the app set before (`gc.disable()`, its own
thresholds) or sets during a parse is what holds after it, on every exit path, however the parses overlap.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Callable, Iterator
from unittest import mock

import pytest
from ag_ui.core import UserMessage

# private on purpose: the pause of the collector, the large body's parse and the stored thread's that take it
from adapter._collector import COLLECTOR
from adapter._edge._input import _parse_large, parse_body
from adapter._errors import InputRejected
from adapter._thread._record import parse_messages, stored_message
from adapter.stores import StoredMessage

THRESHOLDS = (500, 7, 9)


@pytest.fixture(autouse=True)
def thresholds() -> Iterator[None]:
    kept, enabled = gc.get_threshold(), gc.isenabled()
    gc.set_threshold(*THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*kept)
        (gc.enable if enabled else gc.disable)()


def long_body(turns: int = 2000) -> bytes:
    messages = [{"id": f"u-{i}", "role": "user", "content": f"turn {i}"} for i in range(turns)]
    body = {"threadId": "t", "runId": "r", "state": {}, "messages": messages, "tools": [], "context": []}
    return json.dumps(body).encode()


def collections_during(parse: Callable[[], object]) -> list[int]:
    """The generations of the collections that began while `parse` ran."""
    started: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started.append(info["generation"])

    gc.callbacks.append(count)
    try:
        parse()
    finally:
        gc.callbacks.remove(count)
    return started


def test_a_long_parse_triggers_no_young_collection() -> None:
    body = long_body()
    started = collections_during(lambda: _parse_large(body))
    assert len(started) <= 1  # at most the one that counts the parse's objects, as it returns
    assert gc.get_threshold() == THRESHOLDS


def stored_thread(count: int) -> list[StoredMessage]:
    return [stored_message(UserMessage(id=f"u-{i}", content=f"turn {i}")) for i in range(count)]


def test_a_long_stored_thread_is_parsed_without_young_collections() -> None:
    stored = stored_thread(2000)
    started = collections_during(lambda: parse_messages(stored))
    assert len(started) <= 1
    assert gc.get_threshold() == THRESHOLDS


@pytest.mark.parametrize(("count", "paused"), [pytest.param(2000, True, id="long"), pytest.param(9, False, id="short")])
def test_only_a_long_stored_thread_pauses_the_collector(count: int, paused: bool) -> None:
    seen: list[tuple[int, int, int]] = []

    def validate_json(text: str) -> list[object]:
        seen.append(gc.get_threshold())
        return []

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("adapter._thread._record._messages", mock.Mock(validate_json=validate_json))
        parse_messages(stored_thread(count))
    assert seen == [(0, *THRESHOLDS[1:]) if paused else THRESHOLDS]
    assert gc.get_threshold() == THRESHOLDS


async def test_the_edge_pauses_for_a_large_body_only() -> None:
    seen: list[tuple[int, int, int]] = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("adapter._edge._input.parse_run_input", lambda body: seen.append(gc.get_threshold()))
        await parse_body(b"{}")
        await parse_body(long_body())
    assert seen == [THRESHOLDS, (0, *THRESHOLDS[1:])]
    assert gc.get_threshold() == THRESHOLDS


def test_a_refused_body_gives_the_thresholds_back() -> None:
    with pytest.raises(InputRejected):
        _parse_large(b'{"threadId": "t", "messages": [' + b'{"id": "m", "role": "user", "content": 1},' * 9000 + b"]}")
    assert gc.get_threshold() == THRESHOLDS


def test_a_disabled_collector_stays_disabled_and_an_enabled_one_enabled() -> None:
    gc.disable()
    _parse_large(long_body(10))
    assert not gc.isenabled()
    gc.enable()
    with COLLECTOR.paused():
        assert gc.isenabled()  # the pause is the threshold's, never the switch an app holds
        gc.disable()
    assert not gc.isenabled()
    assert gc.get_threshold() == THRESHOLDS


def test_overlapping_parses_share_one_pause_and_the_last_gives_it_back() -> None:
    first, second = COLLECTOR.paused(), COLLECTOR.paused()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    assert gc.get_threshold() == (0, *THRESHOLDS[1:])
    second.__exit__(None, None, None)
    assert gc.get_threshold() == THRESHOLDS


def test_thresholds_the_app_sets_during_a_parse_stay() -> None:
    with COLLECTOR.paused():
        gc.set_threshold(1000, 20, 20)
    assert gc.get_threshold() == (1000, 20, 20)
