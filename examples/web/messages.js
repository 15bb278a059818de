// The conversation as AG-UI messages, kept up to date from a run's events, and put together again after a reload.
//
// A reload in the middle of a run: the page had shown the run's events up to some id, and kept what it showed
// (`seen`); the stored thread holds what the server saved (`stored`); the run's events after that id come again.
// `resumed(stored, seen)` then those events applied with `whole` = the stored ids give the conversation the page
// would have shown without the reload, whether the run was still going or had ended and been saved meanwhile.

/**
 * Apply one event to the message list (in place) and return the list. Unknown events change nothing.
 *
 * `whole`: ids of messages the server had stored when the page read the thread. A stored message is complete, so
 * deltas (text, call arguments) are not added to it again; they only build messages the store did not hold. Events
 * that replace (snapshots) or add by id (results, calls) are applied as always: applying them again changes nothing.
 * A messages snapshot is the conversation as of its event, perhaps older than what was stored (a resume restates
 * a message before its calls come): every message after it is built from the events that follow, as the page built
 * it without the reload, so no stored message counts as complete any more.
 */
export function applyEvent(messages, event, whole = NOTHING) {
  const handler = HANDLERS[event.type];
  if (handler) handler(messages, event, whole);
  return messages;
}

/** The conversation after a reload: the stored thread, then what the page had shown that the store lacks, in order. */
export function resumed(stored, seen) {
  const ids = new Set(stored.map((m) => m.id));
  return [...structuredClone(stored), ...structuredClone(seen.filter((m) => !ids.has(m.id)))];
}

const NOTHING = new Set();

const HANDLERS = {
  MESSAGES_SNAPSHOT(messages, event, whole) {
    messages.splice(0, messages.length, ...structuredClone(event.messages ?? []));
    whole.clear();
  },
  TEXT_MESSAGE_START(messages, event) {
    ensure(messages, event.messageId, event.role ?? "assistant");
  },
  TEXT_MESSAGE_CONTENT(messages, event, whole) {
    if (whole.has(event.messageId)) return;
    const message = ensure(messages, event.messageId, "assistant");
    message.content = (message.content ?? "") + (event.delta ?? "");
  },
  TEXT_MESSAGE_CHUNK(messages, event, whole) {
    if (!event.messageId || whole.has(event.messageId)) return;
    const message = ensure(messages, event.messageId, event.role ?? "assistant");
    message.content = (message.content ?? "") + (event.delta ?? "");
  },
  TOOL_CALL_START(messages, event) {
    const parentId = event.parentMessageId ?? `parent_${event.toolCallId}`;
    const parent = ensure(messages, parentId, "assistant");
    parent.toolCalls ??= [];
    if (!parent.toolCalls.some((call) => call.id === event.toolCallId)) {
      parent.toolCalls.push({ id: event.toolCallId, type: "function", function: { name: event.toolCallName, arguments: "" } });
    }
  },
  TOOL_CALL_ARGS(messages, event, whole) {
    const parent = messages.find((m) => m.toolCalls?.some((c) => c.id === event.toolCallId));
    if (!parent || whole.has(parent.id)) return;
    parent.toolCalls.find((c) => c.id === event.toolCallId).function.arguments += event.delta ?? "";
  },
  TOOL_CALL_CHUNK(messages, event, whole) {
    if (event.toolCallName && !findCall(messages, event.toolCallId)) HANDLERS.TOOL_CALL_START(messages, event);
    HANDLERS.TOOL_CALL_ARGS(messages, event, whole);
  },
  TOOL_CALL_RESULT(messages, event) {
    if (messages.some((m) => m.id === event.messageId)) return;
    messages.push({ id: event.messageId, role: "tool", toolCallId: event.toolCallId, content: event.content });
  },
  ACTIVITY_SNAPSHOT(messages, event) {
    const existing = messages.find((m) => m.id === event.messageId);
    if (existing && event.replace === false) return;
    const message = { id: event.messageId, role: "activity", activityType: event.activityType, content: event.content };
    if (existing) Object.assign(existing, message);
    else messages.push(message);
  },
};

function ensure(messages, id, role) {
  let message = messages.find((m) => m.id === id);
  if (!message) {
    message = { id, role };
    messages.push(message);
  }
  return message;
}

/** The tool call with this id, wherever it is in the conversation. */
export function findCall(messages, toolCallId) {
  for (const message of messages) {
    const call = message.toolCalls?.find((c) => c.id === toolCallId);
    if (call) return call;
  }
  return null;
}

/** The tool calls of the last assistant message that no tool message answers yet. */
export function unansweredCalls(messages) {
  const last = messages.findLast((m) => m.role === "assistant" && m.toolCalls?.length);
  const answered = new Set(messages.filter((m) => m.role === "tool").map((m) => m.toolCallId));
  return (last?.toolCalls ?? []).filter((call) => !answered.has(call.id));
}

/** A call's arguments as an object ({} when they are not a JSON object). */
export function callArguments(call) {
  try {
    const parsed = JSON.parse(call?.function?.arguments || "{}");
    return parsed && typeof parsed === "object" && !Array.isArray(parsed) ? parsed : {};
  } catch {
    return {};
  }
}

/** What to send back to the server: activity cards are the server's own, so they stay out. */
export function sendable(messages) {
  return messages
    .filter((m) => ["user", "assistant", "tool", "system", "developer"].includes(m.role))
    .map((m) => structuredClone(m));
}
