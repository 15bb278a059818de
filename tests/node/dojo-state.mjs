// The Dojo's state features through a real @ag-ui/client, as its pages drive them: shared state (the
// recipe), predictive state updates (the document writer, then the page's confirm_changes card) and agentic generative UI (steps as state).
// Each driver passes its own HttpAgent; the base url serves examples/dojo_features.py in pending mode.

import { check, uniqueId } from "./harness.mjs";

const CONFIRM_CHANGES = {
  name: "confirm_changes",
  description: "Ask the user to accept or reject the changes to the document",
  parameters: { type: "object", properties: {} },
};

/** Run one message on a fresh thread of `feature`; returns the agent and what its subscriber saw. */
async function runFeature(HttpAgent, base, feature, text, initialState, tools = []) {
  const agent = new HttpAgent({ url: `${base}/${feature}/`, threadId: uniqueId("thread"), initialState });
  const seen = { custom: [], states: [], statesAtCallEnd: null, errors: [] };
  agent.subscribe({
    onCustomEvent: ({ event }) => {
      seen.custom.push(event);
    },
    onStateChanged: ({ state }) => {
      seen.states.push(structuredClone(state));
    },
    onToolCallEndEvent: () => {
      seen.statesAtCallEnd ??= seen.states.length;
    },
    onRunErrorEvent: ({ event }) => {
      seen.errors.push(event);
    },
  });
  agent.addMessage({ id: uniqueId("user"), role: "user", content: text });
  await agent.runAgent({ tools });
  check(seen.errors.length === 0, "the run ended with RUN_ERROR", seen.errors);
  return { agent, seen };
}

export const dojoStateScenarios = [
  [
    "predictive state: the document fills in while the model writes it",
    async (HttpAgent, base) => {
      const ask = "Give me a story for a dragon called Atlantis in document";
      const { agent, seen } = await runFeature(HttpAgent, base, "predictive_state_updates", ask, { document: "Old." }, [
        CONFIRM_CHANGES,
      ]);
      const predict = seen.custom.find((event) => event.name === "PredictState");
      check(predict !== undefined, "no PredictState custom event", seen.custom);
      check(predict.value[0].state_key === "document" && predict.value[0].tool === "write_document_local", "bad PredictState", predict);
      const story = agent.state.document;
      check(story.startsWith("Once upon a time") && story.includes("Atlantis"), "the document is not in the state", agent.state);
      const streamed = seen.states.slice(0, seen.statesAtCallEnd ?? 0).map((state) => state.document);
      const growing = streamed.filter((doc) => doc !== "Old.");
      check(growing.length >= 2 && growing.every((doc) => story.startsWith(doc)), "the document did not stream", streamed);
    },
  ],
  [
    "shared state: the model writes the recipe to the page",
    async (HttpAgent, base) => {
      const page = { recipe: { title: "Make Your Recipe", ingredients: [], instructions: [] } };
      const { agent } = await runFeature(HttpAgent, base, "shared_state", "Please give me a pasta recipe", page);
      check(agent.state.recipe.title === "Pasta Aglio e Olio", "the recipe is not in the state", agent.state);
      check(agent.state.recipe.ingredients.some((item) => item.name === "Pasta"), "no Pasta", agent.state.recipe);
    },
  ],
  [
    "agentic generative UI: the plan shows, then its steps complete",
    async (HttpAgent, base) => {
      const { agent, seen } = await runFeature(HttpAgent, base, "agentic_generative_ui", "Please build a plan to make brownies", {});
      check(seen.states.some((state) => state.steps?.length > 0 && state.steps.every((s) => s.status === "pending")), "no pending plan was shown", seen.states);
      check(agent.state.steps.length === 4 && agent.state.steps.every((s) => s.status === "completed"), "the steps did not complete", agent.state);
    },
  ],
];
