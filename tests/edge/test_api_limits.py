"""The limits of docs/security.md beyond the HTTP edge: the Python API, and the ids a backend makes.

The thread API (`Adapter.run`, `resume`, `thread`, `cancel_turn`) refuses an id no store
can keep and an input nested too deep, with the edge's codes, as `LimitExceeded`, before the store is
asked; a backend or upstream item with such an id ends the run with `BACKEND_ERROR` before it is stored.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from ag_ui.core import Interrupt, RunAgentInput
from agui import collect, resolved, run_input, user
from pg import every_store

import adapter._limits  # private on purpose: a spy shows an input the edge built is not walked again
from adapter import Adapter, AdapterError, LimitExceeded, create_app
from adapter._limits import (  # private on purpose: the tests sit at the limits
    MAX_DEPTH,
    MAX_ID_CHARS,
    CheckedInput,  # private on purpose: an adapter that changes what the edge checked
)
from adapter._sessions._journal import RunEvents  # private on purpose: what `Adapter.start` returns, overridden here
from adapter.backends import (
    BackendInterrupt,
    BackendItem,
    DeferredToolCall,
    ExecutedToolCall,
    LateToolResult,
    ModelRequest,
    ScriptedBackend,
    TextDelta,
    ToolCall,
    ToolCallChunk,
)
from adapter.stores import ANY_INCARNATION, MemoryStore, StoredThread, ThreadChange, TurnStore

if TYPE_CHECKING:
    from conftest import Serve

STORES = every_store()
BAD_IDS = ["t\x00", "t\x1b", "t\ud800", "t" * (MAX_ID_CHARS + 1)]


class Spy(MemoryStore):
    """A memory store that records what it is asked."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[str] = []

    async def load(self, thread_id: str, *, since: int | None = 0, until: int | None = None) -> StoredThread | None:
        self.asked.append("load")
        return await super().load(thread_id, since=since, until=until)

    async def find_message(self, thread_id: str, message_id: str) -> int | None:
        self.asked.append("find_message")
        return await super().find_message(thread_id, message_id)

    async def save(
        self,
        thread_id: str,
        change: ThreadChange,
        *,
        expected_version: int,
        fence: int | None = None,
        incarnation: object = ANY_INCARNATION,
    ) -> int:
        self.asked.append("save")
        return await super().save(
            thread_id, change, expected_version=expected_version, fence=fence, incarnation=incarnation
        )


def nested(levels: int) -> Any:
    """A JSON value of exactly `levels` levels of nesting."""
    value: Any = "leaf"
    for _ in range(levels - 1):
        value = [value]
    return {"k": value}


async def refusal(call: Any) -> LimitExceeded:
    """What awaiting `call` (a coroutine, or an event iterator at its first event) raised."""
    with pytest.raises(LimitExceeded) as raised:
        if hasattr(call, "__anext__"):
            await anext(call)
        else:
            await call
    return raised.value


def api_calls(adapter: Adapter, thread_id: str) -> dict[str, Callable[[], Any]]:
    answer = [resolved("int_1", {"approved": True})]
    started = RunAgentInput.model_validate(run_input(thread_id, [user("hi")]))
    return {
        "run": lambda: adapter.run(started),
        "resume": lambda: adapter.resume(thread_id, answer),
        "thread": lambda: adapter.thread(thread_id),
        "cancel_turn": lambda: adapter.cancel_turn(thread_id),
    }


@pytest.mark.parametrize("make_store", STORES)
@pytest.mark.parametrize("bad", BAD_IDS, ids=["nul", "escape", "surrogate", "long"])
async def test_every_api_method_refuses_a_thread_id_no_store_can_keep(
    make_store: Callable[[Path], TurnStore], bad: str, tmp_path: Path
) -> None:
    adapter = Adapter(ScriptedBackend(fallback="ok"), store=make_store(tmp_path))
    for name, call in api_calls(adapter, bad).items():
        error = await refusal(call())
        assert (error.code, error.status_code, "/threadId" in error.message) == ("INVALID_ID", 422, True), name
    await adapter.aclose()


async def test_the_store_is_not_asked_for_a_refused_id() -> None:
    store = Spy()
    adapter = Adapter(ScriptedBackend(fallback="ok"), store=store)
    await collect(adapter.run(RunAgentInput.model_validate(run_input("t", [user("hi")]))))
    store.asked.clear()
    for call in api_calls(adapter, "t\x00").values():
        await refusal(call())
    with pytest.raises(AdapterError) as page:
        await adapter.thread("t", after="m\x00")
    assert page.value.code == "INVALID_PAGE"
    assert store.asked == ["load"]  # only the head of "t", for the page: neither the bad ids nor `after`


@pytest.mark.parametrize(
    "place",
    ["message id", "tool call id", "answer's call id", "interrupt id", "parent run id"],
)
async def test_run_refuses_any_id_of_its_input_no_store_can_keep(place: str) -> None:
    store = Spy()
    adapter = Adapter(ScriptedBackend(fallback="ok"), store=store)
    call = {"id": "c\x00", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    bodies = {
        "message id": run_input("t", [{**user("hi"), "id": "m\x00"}]),
        "tool call id": run_input("t", [{"id": "a", "role": "assistant", "toolCalls": [call]}]),
        "answer's call id": run_input("t", [{"id": "m", "role": "tool", "toolCallId": "c\ud800", "content": "x"}]),
        "interrupt id": run_input("t", [], resume=[resolved("i" * (MAX_ID_CHARS + 1), {})]),
        "parent run id": run_input("t", [user("hi")], parentRunId="r\x7f"),
    }

    error = await refusal(adapter.run(RunAgentInput.model_validate(bodies[place])))

    assert (error.code, error.status_code) == ("INVALID_ID", 422)
    assert store.asked == []


async def test_resume_refuses_an_interrupt_id_no_store_can_keep() -> None:
    store = Spy()
    adapter = Adapter(ScriptedBackend(fallback="ok"), store=store)

    error = await refusal(adapter.resume("t", [resolved("int\x00", {})]))

    assert error.code == "INVALID_ID"
    assert "save" not in store.asked


@pytest.mark.parametrize("where", ["state", "forwardedProps", "resume payload", "message member"])
async def test_run_refuses_an_input_nested_too_deep_and_runs_the_deepest_allowed(where: str) -> None:
    def body(levels: int) -> dict[str, Any]:
        # Each place sits at its own depth in the input: the value there may nest MAX_DEPTH - offset levels.
        if where == "state":
            return run_input("t", [user("hi")], state=nested(levels - 1))
        if where == "forwardedProps":
            return run_input("t", [user("hi")], forwardedProps=nested(levels - 1))
        if where == "resume payload":
            return run_input("t", [], resume=[resolved("int_1", nested(levels - 3))])
        return run_input("t", [{**user("hi"), "extra": nested(levels - 3)}])

    store = Spy()
    adapter = Adapter(ScriptedBackend(fallback="ok"), store=store)

    error = await refusal(adapter.run(RunAgentInput.model_validate(body(MAX_DEPTH + 1))))
    assert (error.code, error.status_code, store.asked) == ("INPUT_TOO_DEEP", 422, [])
    first = await anext(adapter.run(RunAgentInput.model_validate(body(MAX_DEPTH))))
    assert first.type == "RUN_STARTED"


async def test_resume_refuses_a_payload_nested_too_deep() -> None:
    store = Spy()
    adapter = Adapter(ScriptedBackend(fallback="ok"), store=store)

    error = await refusal(adapter.resume("t", [resolved("int_1", nested(MAX_DEPTH))]))

    assert error.code == "INPUT_TOO_DEEP"
    assert "save" not in store.asked


async def test_an_input_the_edge_checked_is_not_walked_again(serve: Serve, monkeypatch: pytest.MonkeyPatch) -> None:
    walked: list[object] = []
    walk = adapter._limits.model_depth_exceeds

    def spy(value: Any, limit: int) -> bool:
        walked.append(value)
        return walk(value, limit)

    monkeypatch.setattr(adapter._limits, "model_depth_exceeds", spy)
    client = (await serve(Adapter(ScriptedBackend(fallback="ok")))).client

    reply = await client.post(run_input("t", [user("hi")]))
    direct = Adapter(ScriptedBackend(fallback="ok"))
    await collect(direct.run(RunAgentInput.model_validate(run_input("t", [user("hi")]))))

    # the Python call alone
    assert reply.status == 200
    assert len(walked) == 1


class Rewriting(Adapter):
    """App code between the edge and the run: an adapter that changes the input before it runs it."""

    def __init__(self, change: Callable[[RunAgentInput], None], *, in_place: bool, store: Spy) -> None:
        super().__init__(ScriptedBackend(fallback="ok"), store=store)
        self.change, self.in_place = change, in_place
        """`in_place`: it passes on the `CheckedInput` it changed, not the plain input."""

    async def start(self, run_input: RunAgentInput | CheckedInput, *, principal: str | None = None) -> RunEvents:
        assert isinstance(run_input, CheckedInput)
        self.change(run_input.input)
        return await super().start(run_input if self.in_place else run_input.input, principal=principal)


def bad_thread_id(run_input: RunAgentInput) -> None:
    run_input.thread_id = "t" * 403 + "\x00"


def deep_state(run_input: RunAgentInput) -> None:
    run_input.state = nested(300)


@pytest.mark.parametrize("in_place", [False, True], ids=["passed-plain", "passed-checked"])
@pytest.mark.parametrize(("change", "code"), [(bad_thread_id, "INVALID_ID"), (deep_state, "INPUT_TOO_DEEP")])
async def test_an_input_changed_after_the_edge_checked_it_is_checked_again(
    serve: Serve, change: Callable[[RunAgentInput], None], code: str, in_place: bool
) -> None:
    """What the edge checked is what runs: a handler that changed the input in place gets it checked again."""
    store = Spy()
    rewriting = Rewriting(change, in_place=in_place, store=store)
    served = await serve(create_app(rewriting))

    reply = await served.client.post(run_input("t", [user("hi")]))

    assert (reply.status, json.loads(reply.body)["error"]["code"]) == (422, code)
    assert store.asked == []


# Ids a backend makes: refused as the backend's failure before anything of the item is stored.

BAD_ITEMS: dict[str, BackendItem] = {
    "tool call": ToolCall("call\x00", "f", "{}"),
    "tool call chunk": ToolCallChunk("call\ud800", "f", "{"),
    "executed call": ExecutedToolCall("call_1", "f", "{}", "done", result_id="msg\x00"),
    "deferred call": DeferredToolCall("c" * (MAX_ID_CHARS + 1), "f", "{}"),
    "text's message": TextDelta("hi", message_id="msg\x00"),
    "call's message": ToolCall("call_1", "f", "{}", message_id="m\x1f"),
    "interrupt": BackendInterrupt([Interrupt(id="up\x00", reason="confirmation")]),
    "interrupt's call": BackendInterrupt([Interrupt(id="up-1", reason="confirmation", tool_call_id="c\x00")]),
}


class Hostile:
    """A backend that says something, then yields one item, once; asked again, it says "ok"."""

    def __init__(self, item: BackendItem) -> None:
        self.item, self.asked = item, 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[BackendItem]:
        self.asked += 1
        if self.asked > 1:
            yield TextDelta("ok")
            return
        yield TextDelta("before")
        if isinstance(self.item, LateToolResult):
            yield DeferredToolCall("call_1", "f", "{}")
        yield self.item


@pytest.mark.parametrize("make_store", STORES)
@pytest.mark.parametrize("item", BAD_ITEMS)
async def test_a_backend_id_no_store_can_keep_ends_the_run_with_backend_error(
    make_store: Callable[[Path], TurnStore], item: str, tmp_path: Path
) -> None:
    adapter = Adapter(Hostile(BAD_ITEMS[item]), store=make_store(tmp_path), client_tool_policy=None)

    events = await collect(adapter.run(RunAgentInput.model_validate(run_input("t", [user("hi")]))))
    again = await collect(adapter.run(RunAgentInput.model_validate(run_input("t", [user("again")]))))
    stored = await adapter.thread("t")
    await adapter.aclose()

    assert (events[-1]["type"], events[-1]["code"]) == ("RUN_ERROR", "BACKEND_ERROR")
    assert "id that" in events[-1]["message"]
    assert not any(e["type"].startswith("TOOL_CALL") for e in events)
    assert again[-1]["type"] == "RUN_FINISHED"  # the thread is still usable
    assert stored is not None
    assert stored["interrupts"] == []
    assert all(m.get("toolCalls") is None and m["role"] != "tool" for m in stored["messages"])


async def test_a_late_result_with_a_bad_call_id_is_refused_too() -> None:
    adapter = Adapter(Hostile(LateToolResult("call\x00", "late")))

    events = await collect(adapter.run(RunAgentInput.model_validate(run_input("t", [user("hi")]))))

    assert (events[-1]["type"], events[-1]["code"]) == ("RUN_ERROR", "BACKEND_ERROR")
