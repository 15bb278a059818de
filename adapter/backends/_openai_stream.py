"""A chat-completions event stream as backend items, read line by line as it arrives.

    ": keepalive", blank lines, "event:", "id:", "retry:"   ignored (SSE framing)
    data: {chunk}        choices[0].delta.reasoning_content  -> ReasoningDelta, at once (vLLM, DeepSeek, Qwen; or
                                      / .reasoning         `reasoning`, as OpenRouter and Ollama name it; one of them)
                         choices[0].delta.content / .refusal -> TextDelta, at once
                         choices[0].delta.tool_calls         -> accumulated by `index`: id and name from the
                                                                first chunk that has them, arguments concatenated;
                                                                each new piece of arguments -> ToolCallChunk at
                                                                once, as soon as the call has a name
                         choices[0].finish_reason            -> the step ends: its ToolCalls, in index order
                         usage (the last one sent)           -> Usage, after the calls
                         {"error": ...}                      -> BackendError
    data: [DONE]         the stream ends
    end of body          accepted after a finish_reason, a BackendError otherwise
    any other line       not an event stream: BackendError

Usage is only reported when the provider sent both counts; nothing is invented.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from adapter._errors import BACKEND_ERROR, BackendError
from adapter._ids import new_id
from adapter.backends._openai_errors import Redactor, error_text
from adapter.backends._seam import BackendItem, ReasoningDelta, TextDelta, ToolCall, ToolCallChunk, Usage

_MAX_COUNT = 2**53 - 1


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore")


class _FunctionDelta(_Model):
    name: str | None = None
    arguments: str | dict[str, Any] | None = None


class _ToolCallDelta(_Model):
    index: int | None = None
    id: str | None = None
    function: _FunctionDelta | None = None


class _Delta(_Model):
    content: str | None = None
    refusal: str | None = None
    tool_calls: list[_ToolCallDelta] | None = None
    reasoning_content: Any = None
    reasoning: Any = None  # OpenRouter's; an object elsewhere, so read only when it is text

    def thought(self) -> str:
        """The reasoning this delta carries: `reasoning_content`, else `reasoning`; servers that send both repeat it."""
        for value in (self.reasoning_content, self.reasoning):
            if isinstance(value, str) and value:
                return value
        return ""


class _Choice(_Model):
    index: int = 0
    delta: _Delta | None = None
    finish_reason: str | None = None


class Chunk(_Model):
    """The parts of a `chat.completion.chunk` that a step is made of."""

    model: str | None = None
    choices: list[_Choice] | None = None
    usage: Any = None


@dataclass(slots=True)
class _PendingCall:
    id: str | None = None
    name: str | None = None
    arguments: list[str] = field(default_factory=list)
    streamed_as: str | None = None
    """The id the call's pieces went out under; the whole call keeps it."""
    sent: int = 0
    """How many pieces of `arguments` went out as chunks."""

    def chunk(self) -> list[ToolCallChunk]:
        """The arguments that arrived since the last chunk, once the call has a name."""
        if not self.name or self.sent == len(self.arguments):
            return []
        self.streamed_as = self.streamed_as or self.id or new_id("call")
        piece = "".join(self.arguments[self.sent :])
        self.sent = len(self.arguments)
        return [ToolCallChunk(self.streamed_as, self.name, piece)]

    def done(self) -> ToolCall:
        if not self.name:
            raise BackendError("The model server sent a tool call without a name.", code=BACKEND_ERROR)
        call_id = self.streamed_as or self.id or new_id("call")
        return ToolCall(id=call_id, name=self.name, arguments="".join(self.arguments) or "{}")


@dataclass(slots=True)
class StepReader:
    """Collects one step from its chunks: text and argument pieces at once, whole tool calls when the step ends."""

    model: str
    provider: str | None = None
    finished: bool = False
    usage: Usage | None = None
    calls: dict[int, _PendingCall] = field(default_factory=dict)

    def feed(self, chunk: Chunk) -> list[BackendItem]:
        """The items one chunk completes."""
        self.model = chunk.model or self.model
        self.usage = _usage(chunk.usage, self.provider, self.model) or self.usage
        items: list[BackendItem] = []
        for choice in chunk.choices or []:
            if choice.index != 0:
                continue  # one step is one choice; `n` is never requested
            delta = choice.delta or _Delta()
            thought = delta.thought()
            if thought:
                items.append(ReasoningDelta(thought))
            text = (delta.content or "") + (delta.refusal or "")
            if text:
                items.append(TextDelta(text))
            for call in delta.tool_calls or []:
                items.extend(self._add(call))
            if choice.finish_reason:
                self.finished = True
                items.extend(self._flush())
        return items

    def end(self) -> list[BackendItem]:
        """What is left when the stream ends: calls no finish_reason flushed, then the usage."""
        items: list[BackendItem] = list(self._flush())
        if self.usage is not None:
            items.append(self.usage)
        return items

    def _add(self, delta: _ToolCallDelta) -> list[ToolCallChunk]:
        call = self.calls.setdefault(self._slot(delta), _PendingCall())
        call.id = call.id or delta.id
        function = delta.function or _FunctionDelta()
        call.name = call.name or function.name
        if isinstance(function.arguments, dict):
            call.arguments.append(json.dumps(function.arguments))
        elif function.arguments:
            call.arguments.append(function.arguments)
        return call.chunk()

    def _slot(self, delta: _ToolCallDelta) -> int:
        if delta.index is not None:
            return delta.index
        last = max(self.calls, default=None)  # a provider that omits `index`: a new id starts a new call
        if last is None or (delta.id and self.calls[last].id not in (None, delta.id)):
            return 0 if last is None else last + 1
        return last

    def _flush(self) -> list[ToolCall]:
        done = [self.calls[index].done() for index in sorted(self.calls)]
        self.calls.clear()
        return done


async def read_items(
    events: AsyncGenerator[str, None], reader: StepReader, redact: Redactor
) -> AsyncIterator[BackendItem]:
    """Stream the items of one step from its events' data as they arrive (`_upstream_limits.read_data`)."""
    done = False
    async with aclosing(events) as arriving:
        async for data in arriving:
            if data.strip() == "[DONE]":
                done = True
                break
            for item in reader.feed(parse_chunk(data, redact)):
                yield item
    if not (done or reader.finished):
        raise BackendError("The model server's stream ended before the step was complete.", code=BACKEND_ERROR)
    for item in reader.end():
        yield item


def parse_chunk(data: str, redact: Redactor) -> Chunk:
    """One chunk; an error object the provider sent in the stream becomes a BackendError."""
    try:
        document = json.loads(data)
    except ValueError:
        raise BackendError("The model server sent a malformed chunk.", code=BACKEND_ERROR) from None
    if not isinstance(document, dict):
        raise BackendError("The model server sent a malformed chunk.", code=BACKEND_ERROR)
    if "error" in document or document.get("object") == "error":
        detail = redact(error_text(document))
        raise BackendError(f"The model server reported an error: {detail or 'no details'}", code=BACKEND_ERROR)
    try:
        return Chunk.model_validate(document)
    except ValidationError:
        raise BackendError("The model server sent a malformed chunk.", code=BACKEND_ERROR) from None


def _usage(usage: Any, provider: str | None, model: str) -> Usage | None:
    if not isinstance(usage, dict):
        return None
    prompt, completion = _count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens"))
    if prompt is None or completion is None:
        return None
    return Usage(input_tokens=prompt, output_tokens=completion, provider=provider, model=model)


def _count(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= _MAX_COUNT:
        return value
    return None
