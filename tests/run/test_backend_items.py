"""What a backend may yield beyond text and tool calls: its own tool calls, passthrough events, its own interrupts."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, cast

from ag_ui.core import Interrupt, ResumeEntry, StateDeltaEvent, StateSnapshotEvent, StepStartedEvent, ToolMessage
from agui import FRONTEND_TOOLS, new_id, resolved, run_events, run_input, user

from adapter import Adapter
from adapter.backends import (
    BackendInterrupt,
    BackendItem,
    DeferredToolCall,
    ExecutedToolCall,
    LateToolResult,
    ModelRequest,
    Passthrough,
    TextDelta,
    ToolCall,
)

if TYPE_CHECKING:
    from conftest import Kit, Serve


class SelfServingAgent:
    """Runs its own `search` tool, speaks after it, then stops on an interrupt of its own until answered."""

    def __init__(self) -> None:
        self.requests: list[ModelRequest] = []

    async def stream(self, request: ModelRequest) -> AsyncIterator[BackendItem]:
        self.requests.append(request)
        if request.resume:
            (entry,) = request.resume
            assert isinstance(entry.payload, dict), entry.payload
            yield TextDelta(f"You chose {entry.payload['plan']}.")
            return
        yield Passthrough(StateSnapshotEvent(snapshot={"phase": "searching"}))
        yield TextDelta("Searching. ")
        yield ExecutedToolCall("call_search", "search", '{"q": "plans"}', '["basic", "pro"]')
        yield TextDelta("Two plans found.")
        choose = Interrupt(id="up-int-1", reason="acme:choose_plan", response_schema={"type": "object"})
        yield BackendInterrupt([choose])


class BreaksInsideAStep:
    async def stream(self, request: ModelRequest) -> AsyncIterator[BackendItem]:
        yield Passthrough(StepStartedEvent(step_name="plan"))
        yield TextDelta("Thinking")
        raise ConnectionError("upstream went away")


async def test_a_backends_own_tools_and_interrupts_round_trip(serve: Serve) -> None:
    agent = SelfServingAgent()
    served = await serve(Adapter(agent))
    thread = served.client.thread()

    first = await thread.say("pick a plan")

    assert first.types[:3] == ["RUN_STARTED", "STATE_SNAPSHOT", "TEXT_MESSAGE_START"]
    (result,) = first.of("TOOL_CALL_RESULT")
    assert result["toolCallId"] == "call_search"
    starts = first.of("TEXT_MESSAGE_START")
    # never reopened
    assert len(starts) == 2
    assert starts[0]["messageId"] != starts[1]["messageId"]
    assert first.outcome == {
        "type": "interrupt",
        "interrupts": [{"id": "up-int-1", "reason": "acme:choose_plan", "responseSchema": {"type": "object"}}],
    }

    second = await thread.resume({**resolved("up-int-1", {"plan": "pro"}), "metadata": {"by": "me"}})

    assert second.outcome == {"type": "success"}
    assert "You chose pro." in second.text
    forwarded = agent.requests[-1].resume
    assert list(forwarded) == [
        ResumeEntry(interrupt_id="up-int-1", status="resolved", payload={"plan": "pro"}, metadata={"by": "me"})
    ]
    answers = [m for m in agent.requests[-1].messages if isinstance(m, ToolMessage)]
    assert [(m.tool_call_id, m.content) for m in answers] == [("call_search", '["basic", "pro"]')]


async def test_a_failing_backend_closes_what_its_passthrough_events_opened(serve: Serve) -> None:
    served = await serve(Adapter(BreaksInsideAStep()))

    reply = await served.client.post(run_input(new_id("thread"), [user("go")]))

    assert reply.types == [
        "RUN_STARTED",
        "STEP_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "STEP_FINISHED",
        "RUN_ERROR",
    ]
    assert reply.error["code"] == "BACKEND_ERROR"


class MovesState:
    async def stream(self, request: ModelRequest) -> AsyncIterator[BackendItem]:
        yield Passthrough(StateDeltaEvent(delta=[{"op": "add", "path": "/cart/-", "value": "pen"}]))
        yield ToolCall("call_nav", "navigate", '{"page": "cart"}')


async def test_state_a_backend_streams_is_the_state_the_turn_keeps(serve: Serve) -> None:
    served = await serve(Adapter(MovesState(), frontend_outcome="interrupt"))
    thread = served.client.thread(tools=FRONTEND_TOOLS)

    reply = await thread.say("add a pen", state={"cart": ["lamp"]})

    assert reply.outcome["type"] == "interrupt"
    assert reply.of("STATE_SNAPSHOT")[-1]["snapshot"] == {"cart": ["lamp", "pen"]}


class AsksBeforeItsOwnTool:
    """Proposes its own `wipe` tool, stops on an approval interrupt about it, and runs it once approved."""

    def __init__(self) -> None:
        self.requests: list[ModelRequest] = []

    async def stream(self, request: ModelRequest) -> AsyncIterator[BackendItem]:
        self.requests.append(request)
        if not request.resume:
            yield DeferredToolCall("call_wipe", "wipe", '{"disk": "d1"}')
            yield BackendInterrupt([Interrupt(id="up-approve", reason="tool_call", tool_call_id="call_wipe")])
            return
        yield LateToolResult("call_wipe", "wiped d1")
        yield LateToolResult("call_unknown", "not mine to answer")
        yield TextDelta("Done.")


async def test_a_call_the_backend_deferred_stays_open_until_it_answers_it(serve: Serve) -> None:
    agent = AsksBeforeItsOwnTool()
    served = await serve(Adapter(agent))
    thread = served.client.thread()

    first = await thread.say("wipe d1")
    second = await thread.resume(resolved("up-approve", {"approved": True}))

    assert first.outcome["interrupts"][0]["toolCallId"] == "call_wipe"
    assert "TOOL_CALL_RESULT" not in first.types
    sent_on_resume = agent.requests[-1].messages
    assert not [m for m in sent_on_resume if isinstance(m, ToolMessage)]  # no invented answer for the deferred call
    (result,) = second.of("TOOL_CALL_RESULT")
    assert (result["toolCallId"], result["content"]) == ("call_wipe", "wiped d1")
    assert second.outcome == {"type": "success"}
    stored = (await served.client.get(f"/threads/{thread.id}")).json()["messages"]
    assert [m["toolCallId"] for m in stored if m["role"] == "tool"] == ["call_wipe"]


class FailingBackend:
    """Says a little, then fails with an error whose text must never reach the client."""

    def __init__(self) -> None:
        self.requests: list[ModelRequest] = []

    async def stream(self, request: ModelRequest) -> AsyncIterator[TextDelta]:
        self.requests.append(request)
        yield TextDelta("Let me ")
        yield TextDelta("check")
        raise RuntimeError("upstream 500: api_key=sk-secret-123")


async def test_backend_failure_closes_the_text_and_ends_in_a_sanitised_run_error(serve: Serve, kit: Kit) -> None:
    served = await serve(Adapter(FailingBackend(), tools=kit.tools))

    reply = await served.client.thread().say("hello")

    assert reply.types == [
        "RUN_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_ERROR",
    ]
    assert reply.error["code"] == "BACKEND_ERROR"
    assert reply.error["message"]
    body = reply.body.decode()
    assert "Traceback" not in body
    assert "sk-secret" not in body
    assert "RuntimeError" not in body


class CallsBothKinds:
    """Calls a server tool and a client tool in one step, then reports what the request told it."""

    def __init__(self) -> None:
        self.requests: list[ModelRequest] = []

    async def stream(self, request: ModelRequest) -> AsyncIterator[BackendItem]:
        self.requests.append(request)
        if not isinstance(request.messages[-1], ToolMessage):
            yield ToolCall("call_srv", "lookup_order", '{"order_id": "A1"}')
            yield ToolCall("call_page", "navigate", '{"path": "/orders"}')
        else:
            yield TextDelta("done")


async def test_the_request_tells_client_tools_from_server_tools_and_names_each_answered_call(kit: Kit) -> None:
    agent = CallsBothKinds()
    adapter = Adapter(agent, tools=kit.tools, frontend_outcome="interrupt")
    thread_id = new_id("t")
    first = await run_events(adapter, run_input(thread_id, [user("go")], tools=FRONTEND_TOOLS))
    (interrupt,) = next(e for e in first if e["type"] == "RUN_FINISHED")["outcome"]["interrupts"]
    await run_events(
        adapter,
        run_input(thread_id, [], tools=FRONTEND_TOOLS, resume=[resolved(interrupt["id"], "ok")]),
        resumed=True,
    )

    request = agent.requests[-1]
    kinds = {t.name: request.is_client_tool(t.name) for t in request.tools}
    assert {name for name, client in kinds.items() if client} == {t["name"] for t in FRONTEND_TOOLS}
    assert {name for name, client in kinds.items() if not client} >= {t.name for t in kit.tools}
    answers = [m for m in request.messages if isinstance(m, ToolMessage)]
    assert {request.tool_call_names()[m.tool_call_id] for m in answers} == {"lookup_order", "navigate"}


async def test_a_run_of_items_read_ahead_becomes_events_a_slice_at_a_time() -> None:
    """The stop's race holds the backend's items; the step makes their events `SLICE` items at a time, so no more
    than a slice's SDK events wait for the journal, and the events are those of the items in order."""
    # private on purpose: the translation's slicing is what bounds a run's memory, not visible over HTTP
    from adapter._run._translate import SLICE, Step, step_events

    items = [TextDelta(f"w{index} ") for index in range(SLICE * 2 + 5)]
    step = Step("m")

    slices = [events async for events in step_events(items, step)]

    assert [len(events) for events in slices] == [SLICE + 1, SLICE, 5]  # the first opens the message
    assert [getattr(event, "delta", None) for events in slices for event in events][1:] == [i.text for i in items]


async def test_the_read_ahead_holds_a_text_delta_with_no_id_as_its_text_which_the_collector_does_not_track() -> None:
    """The stop's race holds up to 1,024 items read ahead: a plain text delta is held as its `str`, no object the
    garbage collector tracks; an item with an id, or of another kind, as it came; both make the same events."""
    # private on purpose: what the read-ahead holds is the run's memory, not visible over HTTP
    from adapter._run._translate import Step, backend_items, step_events

    said = [TextDelta("Hello "), TextDelta("again", message_id="m-own"), TextDelta("!"), TextDelta("")]

    class Says:
        async def stream(self, request: ModelRequest) -> AsyncIterator[BackendItem]:
            for item in said:
                yield item

    held = [item async for item in backend_items(Says(), ModelRequest(messages=[], tools=[]))]
    from_held, from_said = Step("m"), Step("m")
    events = [event async for run in step_events(held, from_held) for event in run]

    assert held == ["Hello ", said[1], "!", ""]
    assert not any(gc.is_tracked(item) for item in held if isinstance(item, str))
    assert events == [event async for run in step_events(said, from_said) for event in run]
    assert from_held.messages() == from_said.messages()


class SaysWhatCannotBeSaid:
    """A delta whose text is no text: the item passes the seam's type check, its event cannot be made."""

    async def stream(self, request: ModelRequest) -> AsyncIterator[BackendItem]:
        yield TextDelta("Fine so far. ")
        yield TextDelta(cast(str, 42))


async def test_an_item_whose_event_cannot_be_made_is_the_backends_failure_after_what_it_said(serve: Serve) -> None:
    served = await serve(Adapter(SaysWhatCannotBeSaid()))

    reply = await served.client.post(run_input(new_id("thread"), [user("go")]))

    assert reply.types == ["RUN_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "RUN_ERROR"]
    assert reply.error["code"] == "BACKEND_ERROR"
