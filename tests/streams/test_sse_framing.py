"""The one SSE decoder: framing is linear in the bytes, the same at every chunking, and bounded by its limits.

Work is counted, never timed: each byte of the body is scanned for a line break once (the scans are counted
through the decoder's line-break pattern), and a limit is enforced after at most one chunk past it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapter.client import SSEDecoder, StreamLimitError, StreamLimits
from adapter.client import _sse as sse_module

LINES = st.lists(
    st.one_of(
        st.builds(
            lambda text: "data: " + text, st.text(st.characters(codec="utf-8", exclude_characters="\r\n"), max_size=30)
        ),
        st.builds(
            lambda text: ":" + text, st.text(st.characters(codec="utf-8", exclude_characters="\r\n"), max_size=10)
        ),
        st.sampled_from(["", "", "event: x", "id: 7", "retry: 5", "bogus", "data", "data:"]),
    ),
    max_size=30,
)
ENDINGS = st.sampled_from(["\n", "\r", "\r\n"])
CUTS = st.lists(st.integers(min_value=1, max_value=64), min_size=1, max_size=12)


@dataclass
class Scans:
    """Counts the bytes the decoder's line-break pattern is asked to scan."""

    pattern: re.Pattern[bytes]
    scanned: int = 0

    def finditer(self, chunk: bytes, start: int = 0) -> Iterator[re.Match[bytes]]:
        self.scanned += len(chunk) - start
        return self.pattern.finditer(chunk, start)


@contextmanager
def counted_scans() -> Iterator[Scans]:
    """The decoder's line-break pattern, counting what it scans while the block runs."""
    original = sse_module._BREAK
    counter = Scans(original)
    setattr(sse_module, "_BREAK", counter)  # noqa: B010 - a Final the test stands in for
    try:
        yield counter
    finally:
        setattr(sse_module, "_BREAK", original)  # noqa: B010


def chunked(body: bytes, cuts: list[int]) -> Iterator[bytes]:
    start, turn = 0, 0
    while start < len(body):
        size = cuts[turn % len(cuts)]
        yield body[start : start + size]
        start, turn = start + size, turn + 1


def frames_of(decoder: SSEDecoder, chunks: Iterator[bytes]) -> list[tuple[Any, ...]]:
    frames = [frame for chunk in chunks for frame in decoder.feed(chunk)] + decoder.close()
    return [(f.index, f.data, f.comments, f.strange) for f in [*frames, *filter(None, [decoder.partial])]]


@given(lines=LINES, ending=ENDINGS, cuts=CUTS)
def test_every_chunking_frames_the_same(lines: list[str], ending: str, cuts: list[int]) -> None:
    body = "".join(line + ending for line in lines).encode()

    whole = frames_of(SSEDecoder(), iter([body]))

    assert frames_of(SSEDecoder(), chunked(body, cuts)) == whole


@given(lines=LINES, ending=ENDINGS, cuts=CUTS)
def test_each_byte_is_scanned_once_whatever_the_chunks(lines: list[str], ending: str, cuts: list[int]) -> None:
    body = "".join(line + ending for line in lines).encode()

    with counted_scans() as scans:
        frames_of(SSEDecoder(), chunked(body, cuts))

    assert scans.scanned <= len(body)


@given(size=st.integers(min_value=1, max_value=64 * 1024), chunk=st.integers(min_value=1, max_value=4096))
def test_one_huge_line_costs_its_length_not_its_square(size: int, chunk: int) -> None:
    body = b"data: " + b"x" * size + b"\n\n"

    with counted_scans() as scans:
        (frame,) = frames_of(SSEDecoder(), chunked(body, [chunk]))

    assert scans.scanned <= len(body)
    assert len(frame[1][0]) == size


@given(
    limit=st.integers(min_value=64, max_value=8192),
    chunk=st.integers(min_value=1, max_value=1024),
    shape=st.sampled_from(["line", "event", "comments"]),
)
def test_a_line_or_a_frame_past_max_event_bytes_is_refused_within_a_chunk(limit: int, chunk: int, shape: str) -> None:
    decoder = SSEDecoder(limits=StreamLimits(max_event_bytes=limit))
    unit = {"line": b"x" * 64, "event": b"data: x\n", "comments": b": keep\n"}[shape]
    body = (b"data: " if shape == "line" else b"") + unit * (4 * limit // len(unit) + 1)

    with pytest.raises(StreamLimitError) as refused:
        for piece in chunked(body, [chunk]):
            decoder.feed(piece)

    assert refused.value.limit == "max_event_bytes"
    assert decoder.fed <= limit + len(unit) + chunk


@given(limit=st.integers(min_value=1, max_value=500), chunk=st.integers(min_value=1, max_value=256))
def test_frames_past_max_events_are_refused_keep_alives_included(limit: int, chunk: int) -> None:
    decoder = SSEDecoder(limits=StreamLimits(max_events=limit))
    body = (b"data: {}\n\n" + b": keep-alive\n\n") * limit

    with pytest.raises(StreamLimitError) as refused:
        for piece in chunked(body, [chunk]):
            decoder.feed(piece)

    assert refused.value.limit == "max_events"
    assert decoder.events <= limit


@given(limit=st.integers(min_value=1, max_value=8192), chunk=st.integers(min_value=1, max_value=2048))
def test_bytes_past_max_bytes_are_refused_before_they_are_framed(limit: int, chunk: int) -> None:
    decoder = SSEDecoder(limits=StreamLimits(max_bytes=limit))

    with pytest.raises(StreamLimitError) as refused:
        for piece in chunked(b"data: {}\n\n" * (limit // 10 + 2), [chunk]):
            decoder.feed(piece)

    assert refused.value.limit == "max_bytes"
    assert decoder.fed <= limit + chunk


@pytest.mark.parametrize("value", [0, -1, float("nan"), True, "10"])
def test_each_stream_limit_must_be_a_positive_number(value: Any) -> None:
    for name in ("max_event_bytes", "max_bytes", "max_events", "event_timeout", "run_timeout"):
        with pytest.raises(ValueError, match=f"StreamLimits.{name}"):
            StreamLimits(**{name: value})
