"""Shared state for tools: read through ToolContext, changed by patch or replacement, kept only when the call
succeeds, seen by the model's next step, and stored with a suspended turn on every store."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from agui import FRONTEND_TOOLS, cancelled, resolved, tool_answer
from client_state import follow, states

from adapter import Adapter, PredictState, ToolContext, ToolError, tool
from adapter.backends import Call, Rule, ScriptedBackend
from adapter.stores import MemoryStore, SQLiteStore, TurnStore

if TYPE_CHECKING:
    from conftest import Serve

OpenStore = Callable[[], TurnStore]


@pytest.fixture(params=["memory", "sqlite"])
async def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[OpenStore]:
    """Each call opens the store again over the same storage, as a restarted server would.

    A new store kind joins by adding a param here: a factory whose instances share one storage.
    """
    opened: list[TurnStore] = []
    memory = MemoryStore()

    def open_again() -> TurnStore:
        store: TurnStore = memory if request.param == "memory" else SQLiteStore(tmp_path / "turns.db")
        opened.append(store)
        return store

    yield open_again
    for store in opened:
        await store.close()


@tool
def add_to_cart(item: str, ctx: ToolContext) -> str:
    """Add an item to the cart in the shared state."""
    ctx.patch_state([{"op": "add", "path": "/cart/-", "value": item}])
    return f"{item} is in the cart"


@tool
def start_over(ctx: ToolContext) -> str:
    """Replace the whole state."""
    ctx.set_state({"cart": [], "note": "fresh"})
    return "started over"


@tool
def add_then_fail(item: str, ctx: ToolContext) -> str:
    """Changes the state, then fails: the change must not stay."""
    ctx.patch_state([{"op": "add", "path": "/cart/-", "value": item}])
    raise ToolError("the warehouse is closed")


@tool(requires_approval=True)
def checkout(ctx: ToolContext) -> str:
    """Check the cart out, once a person approves; records the order in the state."""
    ctx.patch_state([{"op": "add", "path": "/ordered", "value": list(ctx.state["cart"])}])
    return f"ordered {len(ctx.state['cart'])} items"


TOOLS = [add_to_cart, start_over, add_then_fail, checkout]
RULES = [
    Rule(
        r"add a pen and go to the cart",
        steps=[[Call("add_to_cart", {"item": "pen"})], [Call("navigate", {"path": "/cart"})]],
    ),
    Rule(r"add a pen and check out", steps=[[Call("add_to_cart", {"item": "pen"})], [Call("checkout")]]),
    Rule(r"add a pen", steps=[[Call("add_to_cart", {"item": "pen"})]]),
    Rule(r"start over", steps=[[Call("start_over")]]),
    Rule(r"try the closed warehouse", steps=[[Call("add_then_fail", {"item": "pen"})]]),
]


def scripted() -> ScriptedBackend:
    return ScriptedBackend(RULES, fallback="ok")


async def test_a_tools_patch_is_a_state_delta_and_the_models_next_step_sees_it(serve: Serve) -> None:
    backend = scripted()
    thread = (await serve(Adapter(backend, tools=TOOLS))).client.thread()

    reply = await thread.say("add a pen", state={"cart": ["lamp"]})

    assert reply.outcome == {"type": "success"}
    (delta,) = reply.of("STATE_DELTA")
    assert delta["delta"] == [{"op": "add", "path": "/cart/-", "value": "pen"}]
    assert reply.index("TOOL_CALL_RESULT") < reply.index("STATE_DELTA")
    assert follow({"cart": ["lamp"]}, reply.events) == {"cart": ["lamp", "pen"]}
    assert [request.state for request in backend.requests] == [{"cart": ["lamp"]}, {"cart": ["lamp", "pen"]}]


async def test_a_tool_that_replaces_the_state_sends_a_snapshot(serve: Serve) -> None:
    backend = scripted()
    thread = (await serve(Adapter(backend, tools=TOOLS))).client.thread()

    reply = await thread.say("start over", state={"cart": ["lamp"], "secret": "gone"})

    assert [event["snapshot"] for event in reply.of("STATE_SNAPSHOT")] == [{"cart": [], "note": "fresh"}]
    assert reply.of("STATE_DELTA") == []
    assert backend.requests[-1].state == {"cart": [], "note": "fresh"}


async def test_a_tool_that_fails_leaves_the_state_as_it_was(serve: Serve) -> None:
    backend = scripted()
    thread = (await serve(Adapter(backend, tools=TOOLS))).client.thread()

    reply = await thread.say("try the closed warehouse", state={"cart": ["lamp"]})

    assert reply.results()  # the failure reached the model as a result
    assert reply.of("STATE_DELTA") == []
    assert reply.of("STATE_SNAPSHOT") == []
    assert backend.requests[-1].state == {"cart": ["lamp"]}


async def test_the_clients_state_is_the_starting_point_of_every_new_run(serve: Serve) -> None:
    backend = scripted()
    thread = (await serve(Adapter(backend, tools=TOOLS))).client.thread()

    await thread.say("add a pen", state={"cart": ["lamp"]})
    again = await thread.say("add a pen", state={"cart": ["mug"]})

    assert follow({"cart": ["mug"]}, again.events) == {"cart": ["mug", "pen"]}
    assert backend.requests[-2].state == {"cart": ["mug"]}


async def test_state_survives_a_suspension_and_a_restart_on_every_store(serve: Serve, open_store: OpenStore) -> None:
    before = scripted()
    first = await serve(Adapter(before, tools=TOOLS, store=open_store(), frontend_outcome="interrupt"))
    thread = first.client.thread(tools=FRONTEND_TOOLS)

    asked = await thread.say("add a pen and go to the cart", state={"cart": ["lamp"]})
    (interrupt,) = asked.interrupts
    assert asked.of("STATE_SNAPSHOT")[-1]["snapshot"] == {"cart": ["lamp", "pen"]}
    await first.stop()

    after = scripted()
    second = await serve(Adapter(after, tools=TOOLS, store=open_store(), frontend_outcome="interrupt"))
    thread.client = second.client
    done = await thread.resume(resolved(interrupt["id"], "on the cart page"), state={"cart": []})

    assert done.outcome == {"type": "success"}
    assert after.requests[-1].state == {"cart": ["lamp", "pen"]}  # the stored state, not the resume's
    assert follow(None, done.events) == {"cart": ["lamp", "pen"]}


async def test_an_approved_tool_reads_and_changes_the_stored_state(serve: Serve, open_store: OpenStore) -> None:
    backend = scripted()
    served = await serve(Adapter(backend, tools=TOOLS, store=open_store()))
    thread = served.client.thread()
    asked = await thread.say("add a pen and check out", state={"cart": ["lamp"]})
    (interrupt,) = asked.interrupts

    done = await thread.resume(resolved(interrupt["id"], {"approved": True}))

    assert done.results()[interrupt["toolCallId"]]["content"] == "ordered 2 items"
    assert follow(None, done.events) == {"cart": ["lamp", "pen"], "ordered": ["lamp", "pen"]}
    assert backend.requests[-1].state == {"cart": ["lamp", "pen"], "ordered": ["lamp", "pen"]}


@pytest.mark.parametrize("answer", [{"approved": False}, None], ids=["declined", "cancelled"])
async def test_a_declined_tool_changes_nothing(serve: Serve, open_store: OpenStore, answer: Any) -> None:
    backend = scripted()
    served = await serve(Adapter(backend, tools=TOOLS, store=open_store()))
    thread = served.client.thread()
    asked = await thread.say("add a pen and check out", state={"cart": ["lamp"]})
    (interrupt,) = asked.interrupts

    entry = cancelled(interrupt["id"]) if answer is None else resolved(interrupt["id"], answer)
    done = await thread.resume(entry)

    assert follow(None, done.events) == {"cart": ["lamp", "pen"]}
    assert backend.requests[-1].state == {"cart": ["lamp", "pen"]}


@tool(requires_approval=True)
def publish(title: str) -> str:
    """Publish under a title, once approved; its title argument writes `state.title`."""
    return f"published {title}"


TITLE = PredictState("publish", "title", "title")
TRIED = PredictState("add_then_fail", "last_item", "item")
PUBLISHING = [Rule(r"publish", steps=[[Call("publish", {"title": "Draft"})]]), *RULES]


async def test_a_waiting_calls_prediction_is_shown_and_edited_arguments_predict_again(serve: Serve) -> None:
    backend = ScriptedBackend(PUBLISHING, fallback="ok")
    served = await serve(Adapter(backend, tools=[*TOOLS, publish], predict_state=[TITLE]))
    thread = served.client.thread()

    asked = await thread.say("publish it", state={"title": "Untitled"})
    (interrupt,) = asked.interrupts
    assert asked.index("CUSTOM") < asked.index("TOOL_CALL_START")
    assert follow({"title": "Untitled"}, asked.events) == {"title": "Draft"}  # shown while the person decides

    done = await thread.resume(resolved(interrupt["id"], {"approved": True, "editedArgs": {"title": "Final"}}))

    assert follow(None, done.events) == {"title": "Final"}
    assert backend.requests[-1].state == {"title": "Final"}


async def test_a_failed_calls_prediction_is_taken_back_with_a_snapshot(serve: Serve) -> None:
    backend = scripted()
    served = await serve(Adapter(backend, tools=TOOLS, predict_state=[TRIED]))
    thread = served.client.thread()

    reply = await thread.say("try the closed warehouse", state={"cart": ["lamp"]})

    shown = states({"cart": ["lamp"]}, reply.events)
    assert shown == [{"cart": ["lamp"], "last_item": "pen"}, {"cart": ["lamp"]}]
    assert reply.index("TOOL_CALL_RESULT") < reply.index("STATE_SNAPSHOT") < reply.index("TEXT_MESSAGE_START")
    assert backend.requests[-1].state == {"cart": ["lamp"]}


@pytest.mark.parametrize("answer", [{"approved": False}, None], ids=["declined", "cancelled"])
async def test_a_declined_calls_prediction_is_taken_back(serve: Serve, answer: Any) -> None:
    backend = ScriptedBackend(PUBLISHING, fallback="ok")
    served = await serve(Adapter(backend, tools=[*TOOLS, publish], predict_state=[TITLE]))
    thread = served.client.thread()
    asked = await thread.say("publish it", state={"title": "Untitled"})
    (interrupt,) = asked.interrupts
    shown = follow({"title": "Untitled"}, asked.events)

    done = await thread.resume(cancelled(interrupt["id"]) if answer is None else resolved(interrupt["id"], answer))

    assert shown == {"title": "Draft"}
    assert follow(shown, done.events) == {"title": "Untitled"}
    assert backend.requests[-1].state == {"title": "Untitled"}


PAGE = PredictState("navigate", "page", "path")
NAVIGATING = [Rule(r"open the cart", steps=[[Call("navigate", {"path": "/cart"})]]), *RULES]


@pytest.mark.parametrize(
    ("error", "page"), [(None, "/cart"), ("the page is gone", "/home")], ids=["answered", "answered-with-an-error"]
)
async def test_a_client_tools_prediction_stays_only_if_its_own_answer_is_no_error(
    serve: Serve, error: str | None, page: str
) -> None:
    backend = ScriptedBackend(NAVIGATING, fallback="ok")
    served = await serve(Adapter(backend, tools=TOOLS, predict_state=[PAGE], frontend_outcome="interrupt"))
    thread = served.client.thread(tools=FRONTEND_TOOLS)
    asked = await thread.say("open the cart", state={"page": "/home"})
    (interrupt,) = asked.interrupts
    shown = follow({"page": "/home"}, asked.events)

    thread.messages.append(tool_answer(interrupt["toolCallId"], "done" if error is None else "failed", error=error))
    done = await thread.send()

    assert shown == {"page": "/cart"}
    assert follow(shown, done.events) == {"page": page}
    assert backend.requests[-1].state == {"page": page}
