"""Hypothesis strategies drawn from the `ag_ui.core` models themselves, and a scripted upstream that records bytes.

`instances(model)` builds any protocol model from its fields' annotations (a field added to the SDK is drawn
too); ids are ones every store keeps (`adapter._limits.id_problem`), text has no lone surrogates (no UTF-8
form), and JSON values are what JSON carries. `upstream(runs)` is an AG-UI agent that sends each run's events
as given, between its own RUN_STARTED and RUN_FINISHED. `Recorder` wraps an ASGI app and keeps every request
body and response body byte for byte, so a test can say what crossed the wire.
"""

from __future__ import annotations

import enum
import json
import types
import typing
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any, Literal, Union

from annotated_types import Ge, Le
from hypothesis import strategies as st
from pydantic import BaseModel
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

ids = st.from_regex(r"[a-z][a-z0-9-]{0,15}", fullmatch=True)
"""Ids every store keeps, and none that the adapter mints (`msg_...`) or the tests use (`user-...`)."""
texts = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53) + 1, 2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)


def instances(model: type[BaseModel], **fixed: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Any instance of `model`: each field drawn from its annotation (optional ones left out or drawn), or `fixed`."""
    drawn: dict[str, st.SearchStrategy[Any]] = {}
    for name, info in model.model_fields.items():
        if name in fixed:
            drawn[name] = fixed[name]
            continue
        value = _of(info.annotation, name, info.metadata)
        drawn[name] = value if info.is_required() else st.just(_LEFT_OUT) | value
    return st.fixed_dictionaries(drawn).map(
        lambda values: model(**{k: v for k, v in values.items() if v is not _LEFT_OUT})
    )


_LEFT_OUT = object()


def _of(annotation: Any, name: str, metadata: list[Any]) -> st.SearchStrategy[Any]:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _of(args[0], name, [*metadata, *args[1:]])
    if origin in (Union, types.UnionType):
        return st.one_of([_of(arg, name, metadata) for arg in args if arg is not type(None)])
    if origin is Literal:
        return st.sampled_from(args)
    if origin is list:
        return st.lists(_of(args[0], name, []), min_size=_min_length(metadata), max_size=3)
    if origin is dict:
        return st.dictionaries(texts, json_values, max_size=3)
    if annotation is Any:
        return json_values
    if annotation is str:
        pattern = next((m.pattern for m in metadata if getattr(m, "pattern", None) is not None), None)
        if pattern is not None:
            return st.from_regex(pattern, fullmatch=True, alphabet=st.characters(exclude_categories=["Cs"]))
        return ids if name == "id" or name.endswith("_id") else texts
    if annotation is bool:
        return st.booleans()
    if annotation is int:
        low = next((int(str(m.ge)) for m in metadata if isinstance(m, Ge)), None)
        high = next((int(str(m.le)) for m in metadata if isinstance(m, Le)), None)
        return st.integers(low, high)
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return st.sampled_from(list(annotation))
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return st.deferred(lambda: instances(annotation))
    raise NotImplementedError(f"no strategy for {annotation!r} ({name})")


def _min_length(metadata: list[Any]) -> int:
    return next((int(m.min_length) for m in metadata if hasattr(m, "min_length")), 0)


def wire(model: BaseModel) -> dict[str, Any]:
    """A protocol model as the JSON the wire carries (what the SSE framing writes)."""
    parsed: dict[str, Any] = json.loads(model.model_dump_json(by_alias=True))
    return parsed


def upstream(runs: list[list[dict[str, Any]]]) -> Starlette:
    """An AG-UI agent that answers each run with the next events, framed; a run that ends itself is not framed."""

    async def run(request: Request) -> StreamingResponse:
        body = await request.json()
        ids = {"threadId": body["threadId"], "runId": body["runId"]}
        events = runs.pop(0)
        ended = bool(events) and events[-1]["type"] in ("RUN_FINISHED", "RUN_ERROR")
        framed = [{"type": "RUN_STARTED", **ids}, *events, *([] if ended else [{"type": "RUN_FINISHED", **ids}])]

        async def frames() -> AsyncIterator[bytes]:
            for event in framed:
                yield f"data: {json.dumps(event)}\n\n".encode()

        return StreamingResponse(frames(), media_type="text/event-stream")

    return Starlette(routes=[Route("/", run, methods=["POST"])])


@dataclass
class Recorder:
    """An ASGI app, wrapped: every request body it got, and every response body it sent, byte for byte."""

    app: ASGIApp
    requests: list[bytes] = field(default_factory=list)
    responses: list[bytes] = field(default_factory=list)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request, response = bytearray(), bytearray()
        self.requests.append(b"")
        self.responses.append(b"")
        index = len(self.requests) - 1

        async def recording_receive() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                request.extend(message.get("body", b""))
                self.requests[index] = bytes(request)
            return message

        async def recording_send(message: Message) -> None:
            if message["type"] == "http.response.body":
                response.extend(message.get("body", b""))
                self.responses[index] = bytes(response)
            await send(message)

        await self.app(scope, recording_receive, recording_send)

    def request(self, index: int) -> dict[str, Any]:
        """The JSON body of one request."""
        body: dict[str, Any] = json.loads(self.requests[index])
        return body

    def events(self, index: int) -> list[dict[str, Any]]:
        """The events of one response, from its SSE bytes."""
        frames = self.responses[index].decode().split("\n\n")
        return [json.loads(frame.removeprefix("data: ")) for frame in frames if frame.startswith("data: ")]
