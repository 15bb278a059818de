"""The AG-UI Dojo's feature agents (`examples/dojo_features.py`) over real HTTP, the model played from fixtures.

Each test follows one of the Dojo's Playwright specs for the feature: what the page sends (its
frontend tools, with the names and schemas the Dojo's pages declare; its state), what the mock model
answers, and what the page needs back.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import pytest
from agui import Thread, resolved
from dojo_model import Call, Dojo, DojoModel, Fixture, call_arguments, tool_message

if TYPE_CHECKING:
    from conftest import Serve

CHANGE_BACKGROUND = {
    "name": "change_background",
    "description": "Change the background color of the chat. Anything the CSS background attribute accepts.",
    "parameters": {
        "type": "object",
        "properties": {"background": {"type": "string", "description": "The background. Prefer gradients."}},
        "required": ["background"],
    },
}
GENERATE_TASK_STEPS = {
    "name": "generate_task_steps",
    "description": "Generates a list of steps for the user to perform",
    "parameters": {
        "type": "object",
        "properties": {
            "steps": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "description": {"type": "string"},
                        "status": {"type": "string", "enum": ["enabled", "disabled", "executing"]},
                    },
                    "required": ["description", "status"],
                    "additionalProperties": False,
                },
            }
        },
        "required": ["steps"],
        "additionalProperties": False,
    },
}
GENERATE_HAIKU = {
    "name": "generate_haiku",
    "description": "",
    "parameters": {
        "type": "object",
        "properties": {
            "japanese": {"type": "array", "items": {"type": "string"}, "description": "3 lines of haiku in Japanese"},
            "english": {"type": "array", "items": {"type": "string"}, "description": "3 lines of haiku in English"},
            "image_name": {"type": "string", "description": "One relevant image name"},
            "gradient": {"type": "string", "description": "CSS Gradient color for the background"},
        },
        "required": ["japanese", "english", "image_name", "gradient"],
        "additionalProperties": False,
    },
}
MARS_STEPS = [{"description": d, "status": "enabled"} for d in ("Design spacecraft", "Assemble crew", "Launch")]
HAIKU = {
    "japanese": ["古池や", "蛙飛び込む", "水の音"],
    "english": ["An old silent pond", "a frog jumps into the pond", "splash! Silence again."],
    "image_name": "Bonsai_Tree_Potted_Japanese_Art_Green_Foliage.jpeg",
    "gradient": "linear-gradient(90deg, #e0f7fa, #80deea)",
}
DONE = "Done! I've completed that for you."


def recall_name(body: dict[str, Any]) -> str:
    """The mock answers the memory question from what the request carries, as a model would."""
    said = [m["content"] for m in body["messages"] if m["role"] == "user"]
    return "Your name is Bob." if any("My name is Bob" in text for text in said) else "I don't know your name."


FIXTURES = [
    Fixture("Hi", text="Hello! How can I help you today?"),
    Fixture("My name is Bob", text="Nice to meet you, Bob."),
    Fixture("I like green", text="Green is a calm colour."),
    Fixture("Tell me a joke", text="Why did the scarecrow win an award? He was outstanding in his field."),
    Fixture("What is my name", text=recall_name),
    Fixture("background to blue", calls=[Call("change_background", {"background": "blue"})]),
    Fixture("trip to mars", calls=[Call("generate_task_steps", {"steps": MARS_STEPS})]),
    Fixture("haiku about nature", calls=[Call("generate_haiku", HAIKU)]),
    Fixture("weather like in San Francisco", calls=[Call("get_weather", {"location": "San Francisco"})]),
    Fixture("weather like in San Francisco", text="San Francisco: sunny, 20°C, feels like 25°C.", after_tool=True),
    Fixture("", text=DONE, after_tool=True),
]


@pytest.fixture
def model() -> DojoModel:
    return DojoModel(FIXTURES)


@pytest.fixture
async def dojo(serve: Serve, model: DojoModel) -> AsyncIterator[Dojo]:
    """The Dojo app over real HTTP; `await dojo.connect("feature", frontend_outcome=...)` is a client for one path."""
    served = Dojo(serve, model)
    yield served
    await served.aclose()


async def test_agentic_chat_sends_and_receives(dojo: Dojo, model: DojoModel) -> None:
    thread = (await dojo.connect("agentic_chat")).thread(tools=[CHANGE_BACKGROUND])

    reply = await thread.say("Hi")

    assert reply.outcome == {"type": "success"}
    assert reply.text == "Hello! How can I help you today?"
    assert len(reply.of("TEXT_MESSAGE_CONTENT")) > 1  # streamed as the model streamed it
    assert model.requests[0]["messages"][0]["role"] == "system"  # the feature's instructions come first
    assert "change_background" in model.tool_names()


async def test_agentic_chat_remembers_over_five_turns(dojo: Dojo, model: DojoModel) -> None:
    thread = (await dojo.connect("agentic_chat")).thread(tools=[CHANGE_BACKGROUND])

    for text in ("My name is Bob", "I like green", "Tell me a joke", "Hi"):
        assert (await thread.say(text)).outcome == {"type": "success"}
    fifth = await thread.say("What is my name?")

    assert fifth.text == "Your name is Bob."
    roles = [m["role"] for m in model.requests[-1]["messages"]]
    assert roles == ["system", *["user", "assistant"] * 4, "user"]


@pytest.mark.parametrize("outcome", ["interrupt", "pending"])
async def test_agentic_chat_changes_the_background_through_the_pages_tool(
    dojo: Dojo, model: DojoModel, outcome: str
) -> None:
    thread = (await dojo.connect("agentic_chat", frontend_outcome=outcome)).thread(tools=[CHANGE_BACKGROUND])

    asked = await thread.say("Change the background to blue")

    (start,) = asked.calls
    assert start["toolCallName"] == "change_background"
    assert call_arguments(asked.events, start["toolCallId"]) == {"background": "blue"}
    handled = {"status": "success", "message": "Background changed to blue"}
    if outcome == "interrupt":
        (interrupt,) = asked.interrupts
        done = await thread.resume(resolved(interrupt["id"], handled))
    else:
        assert asked.outcome == {"type": "success", "pendingToolCallIds": [start["toolCallId"]]}
        done = await thread.answer(start["toolCallId"], handled)

    assert done.text == DONE
    assert json.loads(tool_message(model.requests[-1])["content"]) == handled


async def steps_call(thread: Thread) -> dict[str, Any]:
    asked = await thread.say("Please plan a trip to mars in 5 steps.")
    (start,) = asked.calls
    assert asked.outcome == {"type": "success", "pendingToolCallIds": [start["toolCallId"]]}  # the example's default
    return start


async def test_human_in_the_loop_shows_the_steps_and_acts_on_the_ones_kept(dojo: Dojo, model: DojoModel) -> None:
    thread = (await dojo.connect("human_in_the_loop")).thread(tools=[GENERATE_TASK_STEPS])
    start = await steps_call(thread)

    assert start["toolCallName"] == "generate_task_steps"
    kept = {"accepted": True, "steps": MARS_STEPS[:2]}
    done = await thread.answer(start["toolCallId"], kept)

    assert done.outcome == {"type": "success"}
    assert json.loads(tool_message(model.requests[-1])["content"]) == kept


async def test_human_in_the_loop_rejection_reaches_the_model(dojo: Dojo, model: DojoModel) -> None:
    thread = (await dojo.connect("human_in_the_loop")).thread(tools=[GENERATE_TASK_STEPS])
    start = await steps_call(thread)

    done = await thread.answer(start["toolCallId"], {"accepted": False})

    assert done.outcome == {"type": "success"}
    assert json.loads(tool_message(model.requests[-1])["content"]) == {"accepted": False}
    assert tool_message(model.requests[-1])["tool_call_id"] == start["toolCallId"]


async def test_human_in_the_loop_in_interrupt_mode_resumes_with_the_steps_kept(dojo: Dojo, model: DojoModel) -> None:
    thread = (await dojo.connect("human_in_the_loop", frontend_outcome="interrupt")).thread(tools=[GENERATE_TASK_STEPS])
    asked = await thread.say("Please plan a trip to mars in 5 steps.")
    (start,) = asked.calls
    (interrupt,) = asked.interrupts
    assert interrupt["toolCallId"] == start["toolCallId"]
    kept = {"accepted": True, "steps": MARS_STEPS[:2]}

    done = await thread.resume(resolved(interrupt["id"], kept))

    assert done.results()[start["toolCallId"]]["content"] == json.dumps(kept, ensure_ascii=False)
    assert json.loads(tool_message(model.requests[-1])["content"]) == kept


async def test_tool_based_generative_ui_streams_the_haiku_to_the_page(dojo: Dojo, model: DojoModel) -> None:
    thread = (await dojo.connect("tool_based_generative_ui")).thread(tools=[GENERATE_HAIKU])

    asked = await thread.say("Write me a haiku about nature.")

    (start,) = asked.calls
    assert call_arguments(asked.events, start["toolCallId"]) == HAIKU
    assert asked.outcome == {"type": "success", "pendingToolCallIds": [start["toolCallId"]]}
    done = await thread.answer(start["toolCallId"], "Haiku generated!")
    assert done.text == DONE
    assert tool_message(model.requests[-1])["content"] == "Haiku generated!"


async def test_backend_tool_rendering_runs_get_weather_on_the_server(dojo: Dojo, model: DojoModel) -> None:
    thread = (await dojo.connect("backend_tool_rendering")).thread()

    reply = await thread.say("What's the weather like in San Francisco?")

    assert reply.outcome == {"type": "success"}  # one run, no interrupt: the server ran the tool
    (start,) = reply.calls
    assert start["toolCallName"] == "get_weather"
    weather = json.loads(reply.results()[start["toolCallId"]]["content"])
    assert set(weather) == {"temperature", "conditions", "humidity", "wind_speed", "feels_like"}  # what the card reads
    assert reply.text == "San Francisco: sunny, 20°C, feels like 25°C."
    assert "get_weather" in model.tool_names(0)
    assert json.loads(tool_message(model.requests[-1])["content"]) == weather
