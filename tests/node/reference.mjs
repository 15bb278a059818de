// Plays every scenario of the conformance kit's reference agent with one client version, as an app would:
// a scenario whose run throws (a client that cannot parse what it got) ends there, and the agent's
// GET /report grades what the client did send. The driver prints one line per scenario and exits 0
// once it has played them all; the grading is the report's, not the driver's.

const TOOLS = [
  {
    name: "navigate",
    description: "Open a page of the app.",
    parameters: { type: "object", properties: { page: { type: "string" } }, required: ["page"] },
  },
];

let counter = 0;
const uniqueId = (prefix) => `${prefix}-${process.pid}-${Date.now()}-${(counter += 1)}`;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

class Chat {
  constructor(HttpAgent, url) {
    this.agent = new HttpAgent({ url, threadId: uniqueId("thread") });
  }

  say(text) {
    this.agent.addMessage({ id: uniqueId("user"), role: "user", content: text });
    return this.agent.runAgent({ tools: TOOLS });
  }

  resume(entries) {
    return this.agent.runAgent({ tools: TOOLS, resume: entries });
  }

  get open() {
    return this.agent.pendingInterrupts ?? [];
  }

  call(toolCallId) {
    return this.agent.messages.flatMap((m) => m.toolCalls ?? []).find((c) => c.id === toolCallId);
  }

  unanswered() {
    const answered = new Set(this.agent.messages.filter((m) => m.role === "tool").map((m) => m.toolCallId));
    return this.agent.messages.flatMap((m) => m.toolCalls ?? []).filter((c) => !answered.has(c.id));
  }
}

const resolved = (interrupt, payload) => ({ interruptId: interrupt.id, status: "resolved", payload });

/** Each scenario as an app plays it: ask for it, answer what it asks, follow up where it expects that. */
const plays = {
  "frontend-tool": async (chat) => {
    await chat.say("scenario: frontend-tool");
    await chat.resume(chat.open.map((i) => resolved(i, { opened: "reference" })));
  },
  parallel: async (chat) => {
    await chat.say("scenario: parallel");
    await chat.resume(chat.open.map((i) => resolved(i, { opened: "reference" })));
  },
  "approval-edits": async (chat) => {
    await chat.say("scenario: approval-edits");
    const [interrupt] = chat.open;
    const proposed = JSON.parse(chat.call(interrupt.toolCallId)?.function.arguments ?? "{}");
    await chat.resume([resolved(interrupt, { approved: true, editedArgs: { ...proposed, subject: "Edited" } })]);
  },
  form: async (chat) => {
    await chat.say("scenario: form");
    await chat.resume(chat.open.map((i) => resolved(i, { name: "Ada", quantity: 2 })));
  },
  expiring: async (chat) => {
    await chat.say("scenario: expiring");
    const [interrupt] = chat.open;
    while (Date.now() <= Date.parse(interrupt.expiresAt)) await sleep(100); // the harder path: cancel after expiry
    await chat.resume([{ interruptId: interrupt.id, status: "cancelled" }]);
  },
  cancelled: async (chat) => {
    await chat.say("scenario: cancelled");
    await chat.say("And now?");
  },
  pending: async (chat) => {
    await chat.say("scenario: pending");
    for (const call of chat.unanswered()) {
      chat.agent.addMessage({ id: uniqueId("tool"), role: "tool", toolCallId: call.id, content: '{"opened":"reference"}' });
    }
    await chat.agent.runAgent({ tools: TOOLS });
  },
  state: async (chat) => {
    await chat.say("scenario: state");
    await chat.say("What is the state now?");
  },
  "long-text": async (chat) => {
    await chat.say("scenario: long-text");
    await chat.say("Thanks for the text.");
  },
  "run-error": async (chat) => {
    await chat.say("scenario: run-error");
    await chat.say("Let us try again.");
  },
};

/** Play every scenario the agent lists; `label` names the client in the output. */
export async function playAll(label, HttpAgent) {
  const url = process.argv[2];
  if (!url) {
    console.error("usage: node reference.mjs <reference-agent-url>");
    process.exit(2);
  }
  const { scenarios } = await (await fetch(new URL("scenarios", url))).json();
  for (const { id } of scenarios) {
    const play = plays[id];
    if (play === undefined) {
      process.stdout.write(`${label} skipped ${id}: no play for it\n`);
      continue;
    }
    try {
      await play(new Chat(HttpAgent, url));
      process.stdout.write(`${label} played ${id}\n`);
    } catch (error) {
      const first = String(error?.message ?? error).replace(/\s+/g, " ").slice(0, 200);
      process.stdout.write(`${label} threw in ${id}: ${first}\n`);
    }
  }
}
