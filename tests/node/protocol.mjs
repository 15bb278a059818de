// What the protocol carries besides text and calls, through a real @ag-ui/client: reasoning with its encrypted
// value, a tool's content parts, a sub-agent's events (tests/protocol/test_protocol_ts_clients.py serves them).
// Each driver passes its own HttpAgent and version; the base url serves one endpoint per feature.

import { check, checkUniqueIds, lastAssistantText, uniqueId } from "./harness.mjs";

export const CHART = [
  { type: "text", text: "Sales by month" },
  { type: "image", source: { type: "url", value: "https://charts.test/sales.png" } },
];

/** Say `text` on the agent's thread (a new agent on a new thread when none is given); no RUN_ERROR may end it. */
async function say(HttpAgent, url, text, agent) {
  const speaker = agent ?? new HttpAgent({ url, threadId: uniqueId("thread") });
  const errors = [];
  const subscription = speaker.subscribe({
    onRunErrorEvent: ({ event }) => {
      errors.push(event);
    },
  });
  speaker.addMessage({ id: uniqueId("user"), role: "user", content: text });
  await speaker.runAgent({});
  subscription.unsubscribe();
  check(errors.length === 0, "the run ended with RUN_ERROR", errors);
  return speaker;
}

export function protocolScenarios(version) {
  return [
    [
      "reasoning streams, is kept with its encrypted value, and the thread goes on",
      async (HttpAgent, base) => {
        const agent = await say(HttpAgent, `${base}/reasoning/`, "hi");
        await say(HttpAgent, `${base}/reasoning/`, "again", agent);
        const reasoning = agent.messages.filter((m) => m.role === "reasoning");
        check(reasoning.length === 2, "a run's reasoning message is missing", agent.messages);
        check(reasoning.every((m) => m.content === "The user greets me."), "the reasoning text differs", reasoning);
        if (version === "1.0") {
          check(reasoning.every((m) => m.encryptedValue === "c2ln+/=="), "the encrypted value was not kept", reasoning);
        }
        check(lastAssistantText(agent.messages) === "Hello!", "no answer", agent.messages);
        checkUniqueIds(agent.messages);
      },
    ],
    [
      "a tool's content parts (their text for a client older than 1.0)",
      async (HttpAgent, base) => {
        const agent = await say(HttpAgent, `${base}/parts/`, "chart?");
        const result = agent.messages.find((m) => m.role === "tool");
        const expected = version === "1.0" ? CHART : "Sales by month";
        check(JSON.stringify(result?.content) === JSON.stringify(expected), "the tool result differs", result);
      },
    ],
    [
      "a sub-agent's events pass through",
      async (HttpAgent, base) => {
        const agent = await say(HttpAgent, `${base}/subagent/`, "research agui");
        check(lastAssistantText(agent.messages) === "Found 3.", "no answer", agent.messages);
        checkUniqueIds(agent.messages);
      },
    ],
  ];
}
