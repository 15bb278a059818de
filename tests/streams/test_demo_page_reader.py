"""The demo page's own SSE reader (examples/web/agui-client.js) frames as the adapter's does, in linear work.

Node runs the page's `readEvents` on generated chunkings of generated bodies; the events must be those
`adapter.client.parse_sse` reads from the whole body, and the text searched for a frame's end (counted
through `String.prototype.indexOf`, up to each end it finds) must be no more than the text received.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapter.client import parse_sse

pytestmark = pytest.mark.needs_node

PAGE = Path(__file__).resolve().parents[2] / "examples" / "web" / "agui-client.js"
SCRIPT = """
import { createInterface } from "node:readline";
import { readEvents } from %s;
const search = String.prototype.indexOf;
let searched = 0;
String.prototype.indexOf = function (needle, from = 0) {
  const found = search.call(this, needle, from);
  if (needle === "\\n\\n") searched += Math.max((found < 0 ? this.length : found + needle.length) - from, 0);
  return found;
};
const encoder = new TextEncoder();
for await (const line of createInterface({ input: process.stdin })) {
  const chunks = JSON.parse(line);
  const body = new ReadableStream({ start(c) { for (const x of chunks) c.enqueue(encoder.encode(x)); c.close(); } });
  const events = [];
  searched = 0;
  for await (const event of readEvents(body)) events.push(event);
  process.stdout.write(JSON.stringify({ events, searched }) + "\\n");
}
"""
VALUES = st.text(max_size=12) | st.integers(-(2**53) + 1, 2**53 - 1)  # numbers JavaScript holds exactly
EVENTS = st.dictionaries(st.sampled_from(["type", "delta", "n"]), VALUES, max_size=3)
FRAMES = st.lists(
    st.one_of(
        EVENTS.map(lambda event: "data: " + json.dumps(event)),
        st.just(": keep-alive"),
        st.just('data: {"type":\ndata: "TEXT"}'),
    ),
    max_size=8,
)


@pytest.fixture(scope="module")
def page() -> Iterator[subprocess.Popen[str]]:
    """The page's reader in one Node process for the module: a line of chunks in, a line of result out."""
    node = shutil.which("node")
    assert node is not None
    command = [node, "--input-type=module", "-e", SCRIPT % json.dumps(PAGE.as_uri())]
    with subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as process:
        yield process
        assert process.stdin is not None
        process.stdin.close()


def read_in_node(page: subprocess.Popen[str], chunks: list[str]) -> dict[str, Any]:
    assert page.stdin is not None
    assert page.stdout is not None
    page.stdin.write(json.dumps(chunks) + "\n")
    page.stdin.flush()
    result: dict[str, Any] = json.loads(page.stdout.readline())
    return result


def frames_data(text: str) -> list[Any]:
    """What the adapter's reader makes of the whole body: each frame's data, as JSON."""
    return [json.loads(frame.text) for frame in parse_sse(text.encode()).frames if frame.text is not None]


@given(
    frames=FRAMES,
    ending=st.sampled_from(["\n", "\r\n", "\r"]),
    cuts=st.lists(st.integers(min_value=1, max_value=9), min_size=1, max_size=6),
)
def test_the_page_reads_every_chunking_as_the_adapter_reads_the_whole_body(
    page: subprocess.Popen[str], frames: list[str], ending: str, cuts: list[int]
) -> None:
    text = "".join((frame + "\n\n").replace("\n", ending) for frame in frames)
    chunks, start, turn = [], 0, 0
    while start < len(text):
        chunks.append(text[start : start + cuts[turn % len(cuts)]])
        start, turn = start + cuts[turn % len(cuts)], turn + 1

    read = read_in_node(page, chunks)

    assert read["events"] == frames_data(text)
    assert read["searched"] <= len(text)


def test_one_huge_frame_in_many_chunks_is_searched_once(page: subprocess.Popen[str]) -> None:
    chunks = ['data: "', *["x" * 1024] * 4096, '"\n\n']

    read = read_in_node(page, chunks)

    assert read["events"] == ["x" * 4096 * 1024]
    assert read["searched"] <= sum(map(len, chunks))
