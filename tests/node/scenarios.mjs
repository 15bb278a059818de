// The demo's scenarios, written once for every client version: each driver passes its own HttpAgent.
// Approvals and forms are interrupts in every mode, so they are resumed with `runAgent({resume})`.
// Client tools differ by mode: `clientToolByResume` (interrupt mode) and `clientToolByMessage`
// (pending mode, AG-UI's ordinary path: the result goes back as a ToolMessage in `messages`).

import {
  CLIENT_TOOLS,
  check,
  checkUniqueIds,
  expectText,
  runClientTool,
  toolCalls,
  toolResult,
  uniqueId,
} from "./harness.mjs";

/** One conversation: an HttpAgent on a fresh thread, and what its subscriber saw. */
export class Conversation {
  constructor(HttpAgent, url) {
    this.agent = new HttpAgent({ url, threadId: uniqueId("thread") });
    this.finished = [];
    this.errors = [];
    this.agent.subscribe({
      onRunFinishedEvent: ({ outcome, interrupts, pendingToolCallIds }) => {
        this.finished.push({ outcome, interrupts, pendingToolCallIds });
      },
      onRunErrorEvent: ({ event }) => {
        this.errors.push(event);
      },
    });
  }

  get messages() {
    return this.agent.messages;
  }

  /** The last run's outcome, as the client reported it to its subscriber. */
  get last() {
    return this.finished.at(-1);
  }

  async say(text) {
    this.agent.addMessage({ id: uniqueId("user"), role: "user", content: text });
    return this.run({});
  }

  async resume(entries) {
    return this.run({ resume: entries });
  }

  /** A run that must reach RUN_FINISHED; `runAgent` itself throws on anything the client rejects. */
  async run(parameters) {
    const runs = this.finished.length;
    const errors = this.errors.length;
    const result = await this.agent.runAgent({ tools: CLIENT_TOOLS, ...parameters });
    check(this.errors.length === errors, "the run ended with RUN_ERROR", this.errors.at(-1));
    check(this.finished.length === runs + 1, "the run did not reach RUN_FINISHED");
    checkUniqueIds(this.messages);
    return result;
  }

  /** The one open interrupt, checked against the call it names. */
  interrupt(reason) {
    check(this.last.outcome === "interrupt", "the run should end with an interrupt", this.last);
    const open = this.agent.pendingInterrupts;
    check(open.length === 1, "one interrupt should be open", open);
    check(open[0].reason === reason, `the interrupt's reason should be ${reason}`, open[0]);
    const call = this.messages.flatMap((m) => m.toolCalls ?? []).find((c) => c.id === open[0].toolCallId);
    check(call !== undefined, "the interrupt names a tool call the client never saw", open[0]);
    check(toolResult(this.messages, call.id) === undefined, "a waiting call already has a result");
    return { interrupt: open[0], call };
  }

  /** Calls the agent made that nothing answered yet. */
  unanswered() {
    return this.messages.flatMap((m) => m.toolCalls ?? []).filter((c) => toolResult(this.messages, c.id) === undefined);
  }

  succeeded() {
    check(this.last.outcome === "success", "the run should succeed", this.last);
    check(this.agent.pendingInterrupts.length === 0, "no interrupt should stay open", this.agent.pendingInterrupts);
  }
}

function checkResult(chat, call, result) {
  const message = toolResult(chat.messages, call.id);
  check(message !== undefined, "the tool's result should be in the thread", chat.messages);
  const [key, value] = Object.entries(result)[0];
  check(JSON.parse(message.content)[key] === value, "the thread holds the wrong result", message);
}

/** Interrupt mode: the call ends the run with an interrupt; the page runs the tool and resumes. */
export function clientToolByResume(text, toolName, answer, options) {
  return async (HttpAgent, url) => {
    const chat = new Conversation(HttpAgent, url);
    await chat.say(text);
    const { interrupt, call } = chat.interrupt("tool_call");
    check(call.function.name === toolName, `the agent should call ${toolName}`, call);
    check(interrupt.metadata?.toolName === undefined, "a client tool is not an approval", interrupt);
    const result = runClientTool(call, options);
    await chat.resume([{ interruptId: interrupt.id, status: "resolved", payload: result }]);
    chat.succeeded();
    checkResult(chat, call, result);
    expectText(chat.messages, answer);
  };
}

/** Pending mode: the run succeeds with the call unanswered; the page runs it and sends a ToolMessage. */
export function clientToolByMessage(text, toolName, answer, options) {
  return async (HttpAgent, url) => {
    const chat = new Conversation(HttpAgent, url);
    await chat.say(text);
    chat.succeeded();
    const waiting = chat.unanswered();
    check(waiting.length === 1 && waiting[0].function.name === toolName, `one ${toolName} call should wait`, waiting);
    const [call] = waiting;
    if (chat.last.pendingToolCallIds !== undefined) {
      check(chat.last.pendingToolCallIds.join() === call.id, "the client should report the call as pending", chat.last);
    }
    const result = runClientTool(call, options);
    chat.agent.addMessage({ id: uniqueId("tool"), role: "tool", toolCallId: call.id, content: JSON.stringify(result) });
    await chat.run({});
    chat.succeeded();
    check(chat.unanswered().length === 0, "no call should wait any more", chat.unanswered());
    checkResult(chat, call, result);
    expectText(chat.messages, answer);
  };
}

/** Client-tool scenarios, in the shape `how` (one of the two above) runs them. */
export function clientToolScenarios(how) {
  return [
    ["frontend tool: navigate", how("go to settings", "navigate", "I opened the settings page")],
    ["frontend tool: show_toast", how("toast: hello", "show_toast", "Done.")],
    [
      "human in the loop: confirm_action confirmed",
      how("confirm delete report.pdf", "confirm_action", "Confirmed: I will delete report.pdf"),
    ],
    [
      "human in the loop: confirm_action declined",
      how("confirm delete report.pdf", "confirm_action", "I will not delete report.pdf", { confirm: false }),
    ],
  ];
}

/** Starts a refund and returns the conversation waiting on its approval. */
async function refundWaiting(HttpAgent, url) {
  const chat = new Conversation(HttpAgent, url);
  await chat.say("refund order A100");
  const { interrupt, call } = chat.interrupt("tool_call");
  check(call.function.name === "refund_order", "the approval should be for refund_order", call);
  check(interrupt.metadata?.toolName === "refund_order", "the approval should name its tool", interrupt);
  check(interrupt.responseSchema?.required?.includes("approved"), "the approval schema needs `approved`", interrupt);
  const [lookup] = toolCalls(chat.messages, "lookup_order");
  check(lookup !== undefined, "the lookup should run before the approval", chat.messages);
  check(toolResult(chat.messages, lookup.id)?.content.includes("delivered"), "the lookup's result is missing");
  return { chat, interrupt, call };
}

function refundedBy(chat, call) {
  return toolResult(chat.messages, call.id)?.content ?? "";
}

/** Text, the backend tool, approvals and forms: the same on every client version and in both modes. */
export const serverScenarios = [
  [
    "plain text",
    async (HttpAgent, url) => {
      const chat = new Conversation(HttpAgent, url);
      await chat.say("hello");
      chat.succeeded();
      expectText(chat.messages, "Try:");
    },
  ],
  [
    "backend tool: look up order A100",
    async (HttpAgent, url) => {
      const chat = new Conversation(HttpAgent, url);
      const { newMessages } = await chat.say("look up order A100");
      chat.succeeded();
      const [call] = toolCalls(chat.messages, "lookup_order");
      check(call !== undefined, "lookup_order should be called", chat.messages);
      check(toolResult(chat.messages, call.id)?.content.includes('"A100"'), "the lookup result is missing");
      check(newMessages.some((m) => m.role === "tool"), "runAgent's newMessages should hold the tool result");
      expectText(chat.messages, "Order A100 (keyboard, 59.00) is delivered.");
    },
  ],
  [
    "approval: refund approved",
    async (HttpAgent, url) => {
      const { chat, interrupt, call } = await refundWaiting(HttpAgent, url);
      await chat.resume([{ interruptId: interrupt.id, status: "resolved", payload: { approved: true } }]);
      chat.succeeded();
      check(refundedBy(chat, call).includes('"refunded": 59.0'), "the refund should run", chat.messages);
      expectText(chat.messages, "order A100 was refunded");
    },
  ],
  [
    "approval: refund approved with edited arguments",
    async (HttpAgent, url) => {
      const { chat, interrupt, call } = await refundWaiting(HttpAgent, url);
      const payload = { approved: true, editedArgs: { order_id: "A100", amount: 20 } };
      await chat.resume([{ interruptId: interrupt.id, status: "resolved", payload }]);
      chat.succeeded();
      check(refundedBy(chat, call).includes('"refunded": 20'), "the edited refund should run", chat.messages);
      expectText(chat.messages, "order A100 was refunded");
    },
  ],
  [
    "approval: refund rejected",
    async (HttpAgent, url) => {
      const { chat, interrupt, call } = await refundWaiting(HttpAgent, url);
      await chat.resume([{ interruptId: interrupt.id, status: "resolved", payload: { approved: false } }]);
      chat.succeeded();
      check(!refundedBy(chat, call).includes("refunded"), "a rejected refund must not run", chat.messages);
      expectText(chat.messages, "Nothing was changed");
    },
  ],
  [
    "approval: refund cancelled",
    async (HttpAgent, url) => {
      const { chat, interrupt, call } = await refundWaiting(HttpAgent, url);
      await chat.resume([{ interruptId: interrupt.id, status: "cancelled" }]);
      chat.succeeded();
      check(!refundedBy(chat, call).includes("refunded"), "a cancelled refund must not run", chat.messages);
      expectText(chat.messages, "Nothing was changed");
    },
  ],
  [
    "approval: a refused resume leaves the interrupt open for a corrected one",
    async (HttpAgent, url) => {
      const { chat, interrupt } = await refundWaiting(HttpAgent, url);
      const invalid = { interruptId: interrupt.id, status: "resolved", payload: { approved: "yes" } };
      await chat.agent.runAgent({ tools: CLIENT_TOOLS, resume: [invalid] });
      check(chat.errors.at(-1)?.code === "RESUME_PAYLOAD_INVALID", "expected RUN_ERROR RESUME_PAYLOAD_INVALID", chat.errors);
      check(chat.agent.pendingInterrupts[0]?.id === interrupt.id, "the interrupt should still be open");
      await chat.resume([{ interruptId: interrupt.id, status: "resolved", payload: { approved: true } }]);
      chat.succeeded();
      expectText(chat.messages, "order A100 was refunded");
    },
  ],
  [
    "form: the model asks for a form (book a meeting room)",
    async (HttpAgent, url) => {
      const chat = new Conversation(HttpAgent, url);
      await chat.say("book a meeting room");
      const { interrupt, call } = chat.interrupt("input_required");
      check(call.function.name === "request_user_input", "the form comes from request_user_input", call);
      check(interrupt.responseSchema?.required?.includes("topic"), "the form's schema travels in the interrupt");
      const card = chat.messages.find((m) => m.role === "activity" && m.activityType === "agent_form");
      check(card?.content?.status === "PENDING", "a pending form card should be shown", card);
      const payload = { topic: "Planning", time: "2030-01-02T10:00:00Z", attendees: 3 };
      await chat.resume([{ interruptId: interrupt.id, status: "resolved", payload }]);
      chat.succeeded();
      check(toolCalls(chat.messages, "reserve_meeting_room").length === 1, "the booking tool should run");
      expectText(chat.messages, "Booked Kilimanjaro (4 seats) for 'Planning'");
    },
  ],
  [
    "form: cancelled (book a meeting room)",
    async (HttpAgent, url) => {
      const chat = new Conversation(HttpAgent, url);
      await chat.say("book a meeting room");
      const { interrupt } = chat.interrupt("input_required");
      await chat.resume([{ interruptId: interrupt.id, status: "cancelled" }]);
      chat.succeeded();
      check(toolCalls(chat.messages, "reserve_meeting_room").length === 0, "nothing should be booked");
      expectText(chat.messages, "no room was booked");
    },
  ],
  [
    "form: a tool asks for a form (support ticket)",
    async (HttpAgent, url) => {
      const chat = new Conversation(HttpAgent, url);
      await chat.say("create a high priority login incident ticket");
      const { interrupt, call } = chat.interrupt("input_required");
      check(call.function.name === "create_support_ticket", "the form comes from the ticket tool", call);
      const payload = { affectedSystem: "SSO", impactScope: "ALL_USERS" };
      await chat.resume([{ interruptId: interrupt.id, status: "resolved", payload }]);
      chat.succeeded();
      check(toolResult(chat.messages, call.id)?.content.includes("INC-"), "the ticket should be created");
      expectText(chat.messages, "Created HIGH ticket");
    },
  ],
  [
    "form: a tool asks for one line of text (track my parcel)",
    async (HttpAgent, url) => {
      const chat = new Conversation(HttpAgent, url);
      await chat.say("track my parcel");
      const { interrupt, call } = chat.interrupt("input_required");
      check(interrupt.responseSchema?.type === "string", "one line of text is a string schema", interrupt);
      await chat.resume([{ interruptId: interrupt.id, status: "resolved", payload: "order b200 please" }]);
      chat.succeeded();
      check(toolResult(chat.messages, call.id)?.content.includes("B200"), "the tool should run with the answer");
    },
  ],
];

/** With the demo's `history="server"`: the server keeps the thread, so a page may send only what is new. */
export const serverHistoryScenarios = [
  [
    "server-kept history: a run that sends only its new message",
    async (HttpAgent, url) => {
      const chat = new Conversation(HttpAgent, url);
      await chat.say("look up order A100");
      chat.succeeded();
      const earlier = chat.messages.map((m) => m.id);
      const latest = { id: uniqueId("user"), role: "user", content: "hello" };
      chat.agent.setMessages([latest]);
      await chat.run({});
      chat.succeeded();
      expectText(chat.messages, "Try:");
      const response = await fetch(`${url}threads/${chat.agent.threadId}`);
      check(response.ok, "the thread should be stored", response.status);
      const stored = (await response.json()).messages.map((m) => m.id);
      check(earlier.every((id, i) => stored[i] === id), "the stored thread should keep the earlier run", stored);
      check(stored[earlier.length] === latest.id, "the new message should follow it", stored);
      check(new Set(stored).size === stored.length, "each message should be stored once", stored);
    },
  ],
];
