"""Server-sent events, read incrementally: frames, their data, and what is wrong with the framing (TRANS-3/4)."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

_FIELDS = frozenset({"data", "event", "id", "retry"})


@dataclass(slots=True)
class Frame:
    """One SSE frame: its data lines joined, its comments, and lines that are no SSE field."""

    index: int
    data: list[str] = field(default_factory=list)
    comments: list[str] = field(default_factory=list)
    strange: list[str] = field(default_factory=list)
    """Lines that are neither a comment nor an SSE field (`data`, `event`, `id`, `retry`)."""

    @property
    def text(self) -> str | None:
        """The frame's data, or None for a frame without data (a comment, a keep-alive)."""
        return "\n".join(self.data) if self.data else None


class SSEDecoder:
    """Turns the bytes of an SSE body, as they arrive, into frames; `problems` says what broke the framing."""

    def __init__(self, *, on_other_line: Callable[[str], None] | None = None) -> None:
        self.on_other_line = on_other_line
        """Sees each line that is neither a comment nor an SSE field, as it arrives; may raise to refuse the body."""
        self._buffer = b""
        self._cr = b""
        self._frame: Frame | None = None
        self.partial: Frame | None = None
        """The frame the body left unterminated, once it is closed."""
        self._count = 0
        self.problems: list[str] = []

    def feed(self, chunk: bytes) -> list[Frame]:
        """The frames `chunk` completes.

        CRLF, LF and a lone CR all end a line, as SSE allows; a CR is still a problem for AG-UI (TRANS-3).
        """
        if b"\r" in chunk and not any(p.startswith("CR") for p in self.problems):
            self.problems.append("CR in the body: frames must be LF-only (TRANS-3)")
        data, self._cr = self._cr + chunk, b""
        if data.endswith(b"\r"):  # the next chunk may start with its LF
            data, self._cr = data[:-1], b"\r"
        *lines, self._buffer = (self._buffer + data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")).split(b"\n")
        return self._lines(lines)

    def close(self) -> list[Frame]:
        """The body ended: the frames its end completes; an unfinished one is kept in `partial`, a problem (TRANS-4)."""
        lines = [self._buffer] if self._cr or self._buffer else []
        self._buffer, self._cr = b"", b""
        done = self._lines(lines)
        self.partial, self._frame = self._frame, None
        if self.partial is not None:
            shown = "\n".join(self.partial.data)
            self.problems.append(f"the body ends in a partial frame: {shown[:60]!r} (TRANS-4)")
        return done

    def _lines(self, lines: list[bytes]) -> list[Frame]:
        frames: list[Frame] = []
        for raw in lines:
            done = self.feed_line(raw.decode("utf-8", errors="replace"))
            if done is not None:
                frames.append(done)
        return frames

    def feed_line(self, line: str) -> Frame | None:
        """The frame one line (without its line ending) completes, for a body another reader already split."""
        if not line:
            frame, self._frame = self._frame, None
            return frame
        if self._frame is None:
            self._frame = Frame(self._count)
            self._count += 1
        if line.startswith(":"):
            self._frame.comments.append(line[1:].strip())
            return None
        name, colon, value = line.partition(":")
        if name == "data" and colon:
            self._frame.data.append(value.removeprefix(" "))
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


def parse_sse(body: bytes) -> ParsedBody:
    """An SSE body read at once: its event objects, frames and framing problems."""
    decoder = SSEDecoder()
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


async def read_sse(
    chunks: AsyncIterator[bytes], *, on_other_line: Callable[[str], None] | None = None
) -> AsyncGenerator[str, None]:
    """The data of each event of an SSE body, as its bytes arrive; a last frame left unterminated is read too.

    For a backend reading a server it trusts to end its frames loosely; `AGUIClient` reports such a frame instead.
    """
    decoder = SSEDecoder(on_other_line=on_other_line)
    async for chunk in chunks:
        for frame in decoder.feed(chunk):
            if frame.text is not None:
                yield frame.text
    for text in _rest(decoder):
        yield text


async def read_sse_lines(lines: AsyncIterator[str]) -> AsyncGenerator[str, None]:
    """`read_sse` for a body already split into lines: `AGUIUpstream`'s limits layer splits and bounds them."""
    decoder = SSEDecoder()
    async for line in lines:
        frame = decoder.feed_line(line)
        if frame is not None and frame.text is not None:
            yield frame.text
    for text in _rest(decoder):
        yield text


def _rest(decoder: SSEDecoder) -> list[str]:
    """The data of the frames the body's end completes, its unterminated last frame included."""
    ended = decoder.close()
    return [frame.text for frame in [*ended, *filter(None, [decoder.partial])] if frame.text is not None]
