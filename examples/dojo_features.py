"""The AG-UI Dojo's feature agents, each at its own path, in front of one OpenAI-compatible model.

    python -m examples.dojo_features --base-url http://localhost:11434/v1 --model llama3.1

    /agentic_chat               chat; the page's `change_background` tool runs in the browser
    /human_in_the_loop          the page's `generate_task_steps` asks a person to pick steps
    /tool_based_generative_ui   the page's `generate_haiku` renders a haiku card
    /backend_tool_rendering     `get_weather` runs on the server; the page renders its result
    /shared_state               `generate_recipe` writes `state.recipe`; the model reads the page's edits
    /predictive_state_updates   `write_document_local` fills `state.document` as the model writes it; then the
                                page's `confirm_changes` asks the person to accept or reject it
    /agentic_generative_ui      `generate_task_steps_generative_ui` writes `state.steps`, then completes them

The Dojo (apps/dojo in ag-ui-protocol/ag-ui) drives each path through CopilotKit; the tool names and
parameter schemas are the ones its pages declare and its mock model calls. Frontend tools arrive in
each run's `tools`, so only the server's own tools are declared here. A client-tool call ends the run
with the call pending (`frontend_outcome="pending"`), which is what the Dojo's @ag-ui/client 0.0.58
and CopilotKit expect; `--frontend-outcome interrupt` ends it with an AG-UI 1.0 interrupt instead
(see docs/resuming.md).
"""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field, replace
from typing import Literal, TypeAlias

import httpx
from ag_ui.core import SystemMessage
from pydantic import BaseModel
from starlette.applications import Starlette

from adapter import Adapter, BaseTool, PredictState, ToolContext, create_app, mount, tool
from adapter.backends import Backend, BackendItem, ModelRequest, OpenAIChatBackend
from adapter.stores import SQLiteStore, TurnStore

from . import serving

FrontendOutcome: TypeAlias = Literal["interrupt", "pending"]


@dataclass(frozen=True, slots=True)
class Instructed:
    """A backend whose model reads the feature's instructions first, as one system message."""

    backend: Backend
    instructions: str

    def stream(self, request: ModelRequest) -> AsyncIterator[BackendItem]:
        """One step, with the instructions ahead of the conversation."""
        system = SystemMessage(id="instructions", content=self.instructions)
        return self.backend.stream(replace(request, messages=[system, *request.messages]))


@tool
def get_weather(location: str) -> dict[str, object]:
    """Get the current weather for a location."""
    return {"temperature": 20, "conditions": "sunny", "humidity": 50, "wind_speed": 10, "feels_like": 25}


class Ingredient(BaseModel):
    icon: str
    name: str
    amount: str


class Recipe(BaseModel):
    """The recipe card of the Dojo's shared-state page."""

    title: str
    skill_level: Literal["Beginner", "Intermediate", "Advanced"]
    special_preferences: list[str]
    cooking_time: Literal["5 min", "15 min", "30 min", "45 min", "60+ min"]
    ingredients: list[Ingredient]
    instructions: list[str]
    changes: str = ""


@tool
def generate_recipe(recipe: Recipe) -> str:
    """Write the whole recipe to the page, the user's edits included; say what changed in `changes`."""
    return "The recipe is on the page."


class Step(BaseModel):
    description: str
    status: Literal["pending", "completed"] = "pending"


@tool
def generate_task_steps_generative_ui(steps: list[Step], ctx: ToolContext) -> str:
    """Make up the steps (a couple of words each, gerund form) a task needs, then perform them."""
    for index in range(len(steps)):
        ctx.patch_state([{"op": "add", "path": f"/steps/{index}/status", "value": "completed"}])
    return f"All {len(steps)} steps are done."


@tool
def write_document_local(document: str) -> str:
    """Write the full markdown document to the page; it shows there as you write it."""
    return "The document is on the page. Now call confirm_changes, so the user can accept or reject it."


@dataclass(frozen=True, slots=True)
class Feature:
    """One Dojo feature: where it is served, what the model is told, and the server's tools."""

    path: str
    instructions: str
    tools: tuple[BaseTool, ...] = field(default=())
    predict_state: tuple[PredictState, ...] = field(default=())


FEATURES = (
    Feature("agentic_chat", "You are a helpful assistant. Change the page's background only when asked."),
    Feature(
        "human_in_the_loop",
        "When asked to plan something, call generate_task_steps with short imperative steps, all enabled. "
        "Then act on the steps the user kept.",
    ),
    Feature(
        "tool_based_generative_ui",
        "When asked for a haiku, call generate_haiku with three Japanese lines, their English translation, "
        "an image name from the tool's description and a CSS gradient.",
    ),
    Feature(
        "backend_tool_rendering",
        "Look up the weather with get_weather before you answer a question about it, then summarise it briefly.",
        (get_weather,),
    ),
    Feature(
        "shared_state",
        "You help with the recipe in the state, which the user edits too. To change it, call generate_recipe "
        "with the whole recipe.",
        (generate_recipe,),
        (PredictState("generate_recipe", "recipe", "recipe"),),
    ),
    Feature(
        "predictive_state_updates",
        "You write documents. To write or change one, call write_document_local with the full markdown document; "
        "never repeat it in a message. Then call confirm_changes, so the user can accept or reject it.",
        (write_document_local,),
        (PredictState("write_document_local", "document", "document"),),
    ),
    Feature(
        "agentic_generative_ui",
        "When asked to do something, call generate_task_steps_generative_ui with the steps, all pending.",
        (generate_task_steps_generative_ui,),
        (PredictState("generate_task_steps_generative_ui", "steps", "steps"),),
    ),
)


def build_app(
    backend: Backend,
    *,
    store: TurnStore | None = None,
    frontend_outcome: FrontendOutcome = "pending",
    features: Iterable[Feature] = FEATURES,
) -> Starlette:
    """Every feature's adapter at `/{feature.path}`, over one backend and one store, closed on shutdown."""
    shared_store = store if store is not None else SQLiteStore("dojo.db")
    adapters = {
        feature.path: Adapter(
            Instructed(backend, feature.instructions),
            tools=feature.tools,
            predict_state=feature.predict_state,
            store=shared_store,
            frontend_outcome=frontend_outcome,
        )
        for feature in features
    }

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        for adapter in adapters.values():
            await adapter.aclose()
        close_backend = getattr(backend, "aclose", None)
        if close_backend is not None:
            await close_backend()

    routes = [mount(f"/{path}", create_app(adapter), name=path) for path, adapter in adapters.items()]
    return Starlette(routes=routes, lifespan=lifespan)


def openai_backend(
    base_url: str, model: str, *, api_key: str | None = None, client: httpx.AsyncClient | None = None
) -> OpenAIChatBackend:
    """The model every feature talks to; `client` injects the HTTP client (tests play the model with respx)."""
    if client is None:
        return OpenAIChatBackend(base_url, model, api_key=api_key)
    return OpenAIChatBackend(base_url, model, api_key=api_key, client=client)


def main(argv: list[str] | None = None) -> None:
    """Parse the flags and serve every feature with uvicorn."""
    parser = serving.add_server_flags(argparse.ArgumentParser(description="Serve the AG-UI Dojo's feature agents."))
    parser.add_argument("--base-url", default=os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1"))
    parser.add_argument("--model", default=os.environ.get("OPENAI_MODEL", "gpt-4o-mini"))
    parser.add_argument("--db", default="dojo.db", help="SQLite file for suspended turns")
    parser.add_argument(
        "--frontend-outcome",
        choices=["pending", "interrupt"],
        default="pending",
        help="how a client-tool call ends the run: 'pending' (the Dojo and CopilotKit) or an AG-UI 1.0 'interrupt'",
    )
    args = parser.parse_args(argv)
    backend = openai_backend(args.base_url, args.model)
    app = build_app(backend, store=SQLiteStore(args.db), frontend_outcome=args.frontend_outcome)
    for feature in FEATURES:
        print(f"{feature.path}: http://{args.host}:{args.port}/{feature.path}")
    serving.run(app, args)


if __name__ == "__main__":
    main()
