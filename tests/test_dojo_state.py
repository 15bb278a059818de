"""The Dojo's state features over real HTTP: shared state (the recipe), predictive state updates (the document
writer) and agentic generative UI (steps as state), the model played from fixtures."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import pytest
from agui import cancelled, resolved
from client_state import follow, states
from dojo_model import Call, Dojo, DojoModel, Fixture, call_arguments

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
WRITE_DOCUMENT = {
    "name": "write_document",
    "description": "Present the proposed changes to the user for review",
    "parameters": {
        "type": "object",
        "properties": {"document": {"type": "string", "description": "The full updated document in markdown format"}},
        "required": ["document"],
        "additionalProperties": False,
    },
}
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


def state_sent(body: dict[str, Any]) -> Any:
    """The state a chat-completions request carried, from its state system message."""
    (text,) = [m["content"] for m in body["messages"] if m["role"] == "system" and m["content"].startswith("State")]
    return json.loads(text.split("\n", 1)[1])


FIXTURES = [
    Fixture("pasta recipe", calls=[Call("generate_recipe", {"recipe": PASTA})]),
    Fixture("all the ingredients", text=ingredients_from_state),
    Fixture("dragon called Atlantis", calls=[Call("write_document", {"document": STORY})]),
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


async def test_predictive_state_streams_the_document_as_the_model_writes_it(dojo: Dojo, model: DojoModel) -> None:
    thread = (await dojo.connect("predictive_state_updates")).thread(tools=[WRITE_DOCUMENT])

    asked = await thread.say("Give me a story for a dragon called Atlantis in document", state={"document": ""})

    (start,) = asked.calls
    end = asked.index("TOOL_CALL_END")
    assert asked.index("CUSTOM") < asked.index("TOOL_CALL_START")
    streamed = [event for event in asked.events[:end] if event["type"] == "STATE_DELTA"]
    documents = [shown["document"] for shown in states({"document": ""}, streamed)]
    assert len(documents) > 1 and documents[-1] == STORY  # streamed, before the call even ends
    assert all(STORY.startswith(document) for document in documents)
    assert call_arguments(asked.events, start["toolCallId"]) == {"document": STORY}
    (interrupt,) = asked.interrupts
    assert follow({"document": ""}, asked.events) == {"document": STORY}  # shown while the person decides

    done = await thread.resume(resolved(interrupt["id"], {"accepted": True}))

    assert follow(None, done.events) == {"document": STORY}
    assert state_sent(model.requests[-1]) == {"document": STORY}


async def test_predictive_state_a_cancelled_document_is_taken_back(dojo: Dojo, model: DojoModel) -> None:
    thread = (await dojo.connect("predictive_state_updates")).thread(tools=[WRITE_DOCUMENT])
    asked = await thread.say("Give me a story for a dragon called Atlantis in document", state={"document": "Old."})
    (interrupt,) = asked.interrupts

    done = await thread.resume(cancelled(interrupt["id"]))

    assert follow(follow({"document": "Old."}, asked.events), done.events) == {"document": "Old."}
    assert state_sent(model.requests[-1]) == {"document": "Old."}


async def test_predictive_state_in_pending_mode_leaves_the_choice_to_the_page(dojo: Dojo, model: DojoModel) -> None:
    thread = (await dojo.connect("predictive_state_updates", frontend_outcome="pending")).thread(tools=[WRITE_DOCUMENT])
    asked = await thread.say("Give me a story for a dragon called Atlantis in document", state={"document": "Old."})
    (start,) = asked.calls
    assert follow({"document": "Old."}, asked.events) == {"document": STORY}

    await thread.answer(start["toolCallId"], {"accepted": False}, state={"document": "Old."})  # the page reverted

    assert state_sent(model.requests[-1]) == {"document": "Old."}


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
