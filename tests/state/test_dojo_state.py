"""The Dojo's state features over real HTTP: shared state (the recipe), predictive state updates (the document
writer) and agentic generative UI (steps as state), the model played from fixtures."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import pytest
from agui import resolved
from client_state import follow, states
from dojo_model import Dojo, DojoModel, call_arguments
from dojo_state_fixtures import BROWNIE_STEPS, CONFIRM_CHANGES, FIXTURES, PAGE_RECIPE, PASTA, STORY, state_sent

if TYPE_CHECKING:
    from conftest import Serve


@pytest.fixture
def model() -> DojoModel:
    return DojoModel(FIXTURES)


@pytest.fixture
async def dojo(serve: Serve, model: DojoModel) -> AsyncIterator[Dojo]:
    served = Dojo(serve, model)
    yield served
    await served.aclose()


async def test_shared_state_the_model_writes_the_recipe_to_the_page(dojo: Dojo, model: DojoModel) -> None:
    thread = (await dojo.connect("shared_state")).thread()

    reply = await thread.say("Please give me a pasta recipe of your choosing", state={"recipe": PAGE_RECIPE})

    assert reply.outcome == {"type": "success"}
    predict = reply.index("CUSTOM")
    entry = {"state_key": "recipe", "tool": "generate_recipe", "tool_argument": "recipe"}
    assert reply.events[predict]["name"] == "PredictState"
    assert reply.events[predict]["value"] == [entry]
    assert predict < reply.index("TOOL_CALL_START")
    assert follow({"recipe": PAGE_RECIPE}, reply.events) == {"recipe": PASTA}
    assert state_sent(model.requests[0]) == {"recipe": PAGE_RECIPE}
    assert state_sent(model.requests[1]) == {"recipe": PASTA}  # the model's next step sees the new state


async def test_shared_state_the_pages_edits_reach_the_model(dojo: Dojo) -> None:
    thread = (await dojo.connect("shared_state")).thread()
    potatoes = {"icon": "🍴", "name": "Potatoes", "amount": "12"}
    edited = {**PAGE_RECIPE, "ingredients": [*PAGE_RECIPE["ingredients"], potatoes]}

    reply = await thread.say("Give me all the ingredients", state={"recipe": edited})

    for shown in ("Potatoes (12)", "Carrots", "All-Purpose Flour"):
        assert shown in reply.text


async def test_predictive_state_streams_the_document_then_asks_the_page_to_confirm(
    dojo: Dojo, model: DojoModel
) -> None:
    thread = (await dojo.connect("predictive_state_updates")).thread(tools=[CONFIRM_CHANGES])

    asked = await thread.say("Give me a story for a dragon called Atlantis in document", state={"document": ""})

    write, confirm = asked.calls
    assert (write["toolCallName"], confirm["toolCallName"]) == ("write_document_local", "confirm_changes")
    assert asked.index("CUSTOM") < asked.index("TOOL_CALL_START")
    end = asked.index("TOOL_CALL_END")
    streamed = [event for event in asked.events[:end] if event["type"] == "STATE_DELTA"]
    documents = [shown["document"] for shown in states({"document": ""}, streamed)]
    # streamed, before the call even ends
    assert len(documents) > 1
    assert documents[-1] == STORY
    assert all(STORY.startswith(document) for document in documents)
    assert call_arguments(asked.events, write["toolCallId"]) == {"document": STORY}
    assert asked.outcome == {"type": "success", "pendingToolCallIds": [confirm["toolCallId"]]}  # the page's card
    assert follow({"document": ""}, asked.events) == {"document": STORY}  # shown while the person decides

    done = await thread.answer(confirm["toolCallId"], {"accepted": True}, state={"document": STORY})

    assert done.text == "Great, the document is saved."
    assert state_sent(model.requests[-1]) == {"document": STORY}


async def test_predictive_state_a_rejected_document_is_reverted_by_the_page(dojo: Dojo, model: DojoModel) -> None:
    thread = (await dojo.connect("predictive_state_updates")).thread(tools=[CONFIRM_CHANGES])
    asked = await thread.say("Give me a story for a dragon called Atlantis in document", state={"document": "Old."})
    _, confirm = asked.calls

    done = await thread.answer(confirm["toolCallId"], {"accepted": False}, state={"document": "Old."})

    assert done.text == "Understood, I've kept your original document."
    assert state_sent(model.requests[-1]) == {"document": "Old."}


async def test_predictive_state_in_interrupt_mode_waits_for_the_confirmation(dojo: Dojo, model: DojoModel) -> None:
    thread = (await dojo.connect("predictive_state_updates", frontend_outcome="interrupt")).thread(
        tools=[CONFIRM_CHANGES]
    )
    asked = await thread.say("Give me a story for a dragon called Atlantis in document", state={"document": ""})
    _, confirm = asked.calls
    (interrupt,) = asked.interrupts
    assert interrupt["toolCallId"] == confirm["toolCallId"]

    done = await thread.resume(resolved(interrupt["id"], {"accepted": True}))

    assert done.text == "Great, the document is saved."
    assert follow(follow({"document": ""}, asked.events), done.events) == {"document": STORY}


async def test_agentic_generative_ui_shows_the_steps_then_completes_them(dojo: Dojo, model: DojoModel) -> None:
    thread = (await dojo.connect("agentic_generative_ui")).thread()

    reply = await thread.say("Please build a plan to make brownies")

    assert reply.outcome == {"type": "success"}
    shown = states(None, reply.events)
    assert shown[0]["steps"][0]["description"].startswith("Gath")  # the plan appears while the model writes it
    assert {step["status"] for step in shown[-2]["steps"]} == {"pending"}
    assert shown[-1] == {"steps": [{**step, "status": "completed"} for step in BROWNIE_STEPS]}
    assert reply.index("TOOL_CALL_RESULT") < len(reply.events) - 1 - reply.types[::-1].index("STATE_DELTA")
    assert state_sent(model.requests[-1]) == shown[-1]
