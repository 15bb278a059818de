"""The mock model's fixtures for the Dojo's state features, and the states they write.

tests/state/test_dojo_state.py runs them in-process over real HTTP, tests/clients/test_dojo_clients.py
through the official TypeScript clients.
"""

from __future__ import annotations

import json
from typing import Any

from dojo_model import Call, Fixture, tool_message

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
    """The state a chat-completions request carried, from its client data block (a user message)."""
    (text,) = [m["content"] for m in body["messages"] if m["role"] == "user" and "<client-data>" in m["content"]]
    return json.loads(text.split("<client-data>\n", 1)[1].split("\n</client-data>", 1)[0])["state"]


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
