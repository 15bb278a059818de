"""Server-sent events, read incrementally within `StreamLimits`: frames, their data, and what broke the framing.

    SSEDecoder    bytes -> frames (data, comments, `id:`), linear in the bytes; the line, frame, byte and
                  frame-count limits; `drop` forgets a frame a dropped connection cut
    paced         the chunks of a body, within the time limits (no event for `event_timeout`, `run_timeout`)
    read_sse      both: the data of each event as it arrives (the backends' reading)
    parse_sse     a body held whole, framed at once

This is the one SSE reader of the project: `AGUIClient` (and the conformance kit), `AGUIUpstream` and
`OpenAIChatBackend` read their servers through it, each from `_limits.body_pieces` (TRANS-3/4 name the
framing rules it checks).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, Final

from adapter.client._limits import StreamLimitError, StreamLimits

_FIELDS = frozenset({"data", "event", "id", "retry"})
_BREAK: Final = re.compile(rb"\r\n|\r|\n")


@dataclass(slots=True)
class Frame:
    """One SSE frame: its data lines joined, its comments, and lines that are no SSE field."""

    index: int
    data: list[str] = field(default_factory=list)
    comments: list[str] = field(default_factory=list)
    strange: list[str] = field(default_factory=list)
    """Lines that are neither a comment nor an SSE field (`data`, `event`, `id`, `retry`)."""
    id: str | None = None
    """The frame's `id:` field (the last, if it has several), or None without one: where a reattach goes on from."""

    @property
    def text(self) -> str | None:
        """The frame's data, or None for a frame without data (a comment, a keep-alive)."""
        return "\n".join(self.data) if self.data else None


class SSEDecoder:
    """Turns the bytes of an SSE body, as they arrive, into frames; `problems` says what broke the framing.

    Each byte is scanned once: only the unfinished line is kept between chunks, so framing costs time in
    proportion to the body, whatever its chunks. `limits` bounds what it holds: a line or a frame over
    `max_event_bytes`, more than `max_bytes` fed or more than `max_events` frames raise `StreamLimitError`
    as soon as they are known, before the excess is held.
    """

    def __init__(
        self, *, on_other_line: Callable[[str], None] | None = None, limits: StreamLimits | None = None
    ) -> None:
        self.on_other_line = on_other_line
        """Sees each line that is neither a comment nor an SSE field, as it arrives; may raise to refuse the body."""
        self.limits = limits or StreamLimits()
        self._line = bytearray()
        self._after_cr = False
        self._frame: Frame | None = None
        self._frame_bytes = 0
        self.partial: Frame | None = None
        """The frame the body left unterminated, once it is closed."""
        self._count = 0
        self.fed = 0
        """Bytes fed so far."""
        self.events = 0
        """Frames with data completed so far (comments alone are not events)."""
        self.problems: list[str] = []

    def feed(self, chunk: bytes) -> list[Frame]:
        """The frames `chunk` completes.

        CRLF, LF and a lone CR all end a line, as SSE allows; a CR is still a problem for AG-UI (TRANS-3).
        """
        if not chunk:
            return []
        self.fed += len(chunk)
        if self.fed > self.limits.max_bytes:
            raise StreamLimitError(f"sent more than {self.limits.max_bytes} bytes (max_bytes)")
        if b"\r" in chunk and not any(p.startswith("CR") for p in self.problems):
            self.problems.append("CR in the body: frames must be LF-only (TRANS-3)")
        start = 1 if self._after_cr and chunk.startswith(b"\n") else 0  # the LF of a CRLF split across chunks
        self._after_cr = chunk.endswith(b"\r")
        frames: list[Frame] = []
        for end in _BREAK.finditer(chunk, start):
            self._grow(chunk, start, end.start())
            frame = self._end_line()
            if frame is not None:
                frames.append(frame)
            start = end.end()
        self._grow(chunk, start, len(chunk))
        return frames

    def close(self) -> list[Frame]:
        """The body ended: the frames its end completes; an unfinished one is kept in `partial`, a problem (TRANS-4)."""
        done = [frame for frame in [self._end_line()] if frame is not None] if self._line else []
        self.partial, self._frame = self._frame, None
        if self.partial is not None:
            shown = "\n".join(self.partial.data)
            self.problems.append(f"the body ends in a partial frame: {shown[:60]!r} (TRANS-4)")
        return done

    def drop(self) -> None:
        """The connection dropped mid-body: forget the unfinished line and frame; the next body starts afresh.

        What was counted stays counted: the limits hold for the whole read, over every connection (a reattach's).
        """
        self._line.clear()
        self._after_cr = False
        self._frame, self._frame_bytes = None, 0

    def _grow(self, chunk: bytes, start: int, end: int) -> None:
        if len(self._line) + end - start > self.limits.max_event_bytes:
            raise StreamLimitError(f"sent a line longer than {self.limits.max_event_bytes} bytes (max_event_bytes)")
        self._line += chunk[start:end]

    def _end_line(self) -> Frame | None:
        line = self._line.decode("utf-8", errors="replace")
        self._line.clear()
        return self.feed_line(line)

    def feed_line(self, line: str) -> Frame | None:
        """The frame one line (without its line ending) completes, for a body another reader already split."""
        if not line:
            frame, self._frame, self._frame_bytes = self._frame, None, 0
            if frame is not None and frame.data:
                self.events += 1
            return frame
        if self._frame is None:
            self._count += 1
            if self._count > self.limits.max_events:
                raise StreamLimitError(f"sent more than {self.limits.max_events} events (max_events)")
            self._frame = Frame(self._count - 1)
        self._frame_bytes += len(line) + 1  # and its line ending, so that a frame is measured as sent
        if self._frame_bytes > self.limits.max_event_bytes:
            raise StreamLimitError(f"sent an event over {self.limits.max_event_bytes} bytes (max_event_bytes)")
        if line.startswith(":"):
            self._frame.comments.append(line[1:].strip())
            return None
        name, colon, value = line.partition(":")
        if name == "data" and colon:
            self._frame.data.append(value.removeprefix(" "))
        elif name == "id" and "\0" not in value:  # SSE ignores an id with a NUL in it
            self._frame.id = value.removeprefix(" ")
        elif name not in _FIELDS:
            self._frame.strange.append(line)
            if self.on_other_line is not None:
                self.on_other_line(line)
        return None


def event_of(frame: Frame) -> tuple[dict[str, Any] | None, str | None]:
    """The frame's data as one AG-UI event object, or the problem that stops it being one."""
    text = frame.text
    if text is None:
        return None, None
    try:
        event = json.loads(text)
    except ValueError:
        return None, f"frame {frame.index}: data is not JSON: {text[:60]!r} (TRANS-3)"
    if not isinstance(event, dict) or not isinstance(event.get("type"), str):
        return None, f"frame {frame.index}: data is not one event object: {text[:60]!r} (TRANS-3)"
    return event, None


@dataclass(slots=True)
class ParsedBody:
    """A whole SSE body: its events, every frame, and the framing problems."""

    events: list[dict[str, Any]]
    frames: list[Frame]
    problems: list[str]

    @property
    def comments(self) -> list[str]:
        """Every comment line, in order (keep-alives)."""
        return [comment for frame in self.frames for comment in frame.comments]


def parse_sse(body: bytes, *, limits: StreamLimits | None = None) -> ParsedBody:
    """An SSE body read at once: its event objects, frames and framing problems."""
    decoder = SSEDecoder(limits=limits)
    frames = decoder.feed(body)
    frames += decoder.close()
    events: list[dict[str, Any]] = []
    problems = list(decoder.problems)
    for frame in frames:
        event, problem = event_of(frame)
        if event is not None:
            events.append(event)
        if problem is not None:
            problems.append(problem)
    return ParsedBody(events, frames, problems)


async def paced(
    chunks: AsyncIterator[bytes], decoder: SSEDecoder, started: float | None = None
) -> AsyncGenerator[bytes, None]:
    """`chunks`, for `decoder` to frame, while its events keep coming within the decoder's time limits.

    Refused (`StreamLimitError`) once `event_timeout` seconds were spent waiting for the server since its last
    event (comments are no event; the reader's own time between chunks is not waiting), or `run_timeout` seconds
    passed since `started` (a loop time; now by default).
    """
    limits = decoder.limits
    loop = asyncio.get_running_loop()
    deadline = (loop.time() if started is None else started) + limits.run_timeout
    events, waited = decoder.events, 0.0
    while True:
        if decoder.events != events:
            events, waited = decoder.events, 0.0
        asked = loop.time()
        until = min(asked + limits.event_timeout - waited, deadline)
        try:
            async with asyncio.timeout_at(until) as timer:
                chunk = await anext(chunks)
        except StopAsyncIteration:
            return
        except TimeoutError:
            if not timer.expired():
                raise
            raise _late(limits, whole_run=deadline <= until) from None
        now = loop.time()
        if now >= until:  # a chunk that beat the timer (Python 3.11's wait_for may swallow its cancel)
            raise _late(limits, whole_run=deadline <= until)
        waited += now - asked
        yield chunk


def _late(limits: StreamLimits, *, whole_run: bool) -> StreamLimitError:
    if whole_run:
        return StreamLimitError(f"did not end its stream within {limits.run_timeout} s (run_timeout)")
    return StreamLimitError(f"sent no event for {limits.event_timeout} s (event_timeout)")


async def read_sse(
    chunks: AsyncIterator[bytes],
    *,
    on_other_line: Callable[[str], None] | None = None,
    limits: StreamLimits | None = None,
    started: float | None = None,
) -> AsyncGenerator[str, None]:
    """The data of each event of an SSE body, as its bytes arrive; a last frame left unterminated is read too.

    For a backend reading a server it trusts to end its frames loosely; `AGUIClient` reports such a frame instead.
    Within `limits` (`StreamLimits()` by default), from `started` (a loop time; now by default): past one,
    `StreamLimitError`.
    """
    decoder = SSEDecoder(on_other_line=on_other_line, limits=limits)
    async with aclosing(paced(chunks, decoder, started)) as arriving:
        async for chunk in arriving:
            for frame in decoder.feed(chunk):
                if frame.text is not None:
                    yield frame.text
    for text in _rest(decoder):
        yield text


def _rest(decoder: SSEDecoder) -> list[str]:
    """The data of the frames the body's end completes, its unterminated last frame included."""
    ended = decoder.close()
    return [frame.text for frame in [*ended, *filter(None, [decoder.partial])] if frame.text is not None]
