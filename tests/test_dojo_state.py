"""The Dojo's state features over real HTTP: shared state (the recipe), predictive state updates (the document
writer) and agentic generative UI (steps as state), the model played from fixtures."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import pytest
from agui import resolved
from client_state import follow, states
from dojo_model import Call, Dojo, DojoModel, Fixture, call_arguments, tool_message

if TYPE_CHECKING:
    from conftest import Serve

PAGE_RECIPE = {
    "title": "Make Your Recipe",
    "skill_level": "Intermediate",
    "cooking_time": "45 min",
    "special_preferences": [],
    "ingredients": [
        {"icon": "🥕", "name": "Carrots", "amount": "3 large, grated"},
        {"icon": "🌾", "name": "All-Purpose Flour", "amount": "2 cups"},
    ],
    "instructions": ["Preheat oven to 350°F (175°C)"],
}
"""The shared-state page's initial state, as it sends it."""
PASTA = {
    "title": "Pasta Aglio e Olio",
    "skill_level": "Intermediate",
    "special_preferences": [],
    "cooking_time": "45 min",
    "ingredients": [
        {"icon": "🍝", "name": "Pasta", "amount": "400g"},
        {"icon": "🧄", "name": "Garlic", "amount": "6 cloves"},
        {"icon": "🫒", "name": "Olive Oil", "amount": "4 tbsp"},
    ],
    "instructions": ["Boil water and cook pasta until al dente", "Slice garlic and sauté it", "Toss and serve"],
    "changes": "",
}
"""What the Dojo's mock model answers for a pasta recipe (apps/dojo/e2e/aimock-setup.ts)."""
CONFIRM_CHANGES = {
    "name": "confirm_changes",
    "description": "Ask the user to accept or reject the changes to the document",
    "parameters": {"type": "object", "properties": {}},
}
"""The predictive-state page's own tool: a card that asks the person to confirm the new document."""
STORY = (
    "Once upon a time, in a land far away, there lived a magnificent dragon named Atlantis. Atlantis was known "
    "throughout the realm for its shimmering scales that reflected the light of a thousand stars. The dragon "
    "Atlantis would soar above the mountains, breathing fire that lit up the night sky. Villagers would gather to "
    "watch Atlantis perform its aerial dances, marveling at the grace of this ancient creature."
)
"""The story the Dojo's mock model writes (apps/dojo/e2e/fixtures/openai/predictive-state.json)."""
BROWNIE_STEPS = [
    {"description": d, "status": "pending"}
    for d in ("Gathering ingredients", "Melting butter", "Adding eggs and flour", "Baking for 25 minutes")
]


def ingredients_from_state(body: dict[str, Any]) -> str:
    """The mock lists the ingredients the state it was sent holds, as a model reading the state would."""
    state = state_sent(body)
    return ", ".join(f"{i['name']} ({i['amount']})" for i in state["recipe"]["ingredients"])


def confirmed(body: dict[str, Any]) -> str:
    """The mock's answer once the page's card has answered: accepted or not, as the tool message says."""
    accepted = json.loads(tool_message(body)["content"]).get("accepted")
    return "Great, the document is saved." if accepted else "Understood, I've kept your original document."


def state_sent(body: dict[str, Any]) -> Any:
    """The state a chat-completions request carried, from its state system message."""
    (text,) = [m["content"] for m in body["messages"] if m["role"] == "system" and m["content"].startswith("State")]
    return json.loads(text.split("\n", 1)[1])


FIXTURES = [
    Fixture("pasta recipe", calls=[Call("generate_recipe", {"recipe": PASTA})]),
    Fixture("all the ingredients", text=ingredients_from_state),
    Fixture("dragon called Atlantis", calls=[Call("write_document_local", {"document": STORY})]),
    Fixture(
        "dragon called Atlantis",
        calls=[Call("confirm_changes", {})],
        after_tool=True,
        after_call="write_document_local",
    ),
    Fixture("dragon called Atlantis", text=confirmed, after_tool=True, after_call="confirm_changes"),
    Fixture("plan to make brownies", calls=[Call("generate_task_steps_generative_ui", {"steps": BROWNIE_STEPS})]),
    Fixture("", text="Done! I've completed that for you.", after_tool=True),
]


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
    assert reply.events[predict]["name"] == "PredictState" and reply.events[predict]["value"] == [entry]
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
    assert len(documents) > 1 and documents[-1] == STORY  # streamed, before the call even ends
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
