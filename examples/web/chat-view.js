// The chat log: user and assistant messages, tool calls with their results, form cards with their
// status, interrupt cards, and error notes. Rendering is keyed by message id: an element is rebuilt
// only when what it shows changed, and interrupt cards (which hold what a person typed) are moved,
// never rebuilt.

import { h, pretty } from "./dom.js";
import { displayValue, localTime } from "./schema-form.js";

export class ChatView {
  constructor(log) {
    this.log = log;
    this.cache = new Map();
    this.thinking = h("div", { class: "msg assistant thinking", "aria-label": "The agent is working" }, [
      h("div", { class: "bubble" }, [h("span", { class: "dot" }), h("span", { class: "dot" }), h("span", { class: "dot" })]),
    ]);
  }

  /**
   * Show `messages` (AG-UI), `notes` (`{id, after, kind, code?, text}`), `cards` (by tool call id) and
   * `ranWith` (by tool call id: the arguments a call ran with when a person edited them).
   */
  render({ messages, notes, cards, running, ranWith = {} }) {
    const stick = this.log.scrollHeight - this.log.scrollTop - this.log.clientHeight < 80;
    const results = new Map(messages.filter((m) => m.role === "tool").map((m) => [m.toolCallId, m]));
    const calls = new Set(messages.flatMap((m) => (m.toolCalls ?? []).map((c) => c.id)));
    const forms = new Set(messages.filter(isFormCard).map((m) => m.content.actionId));
    const context = { results, cards, forms, ranWith };
    const elements = [];
    const placeNotes = (after) => notes.filter((n) => n.after === after).forEach((n) => elements.push(this.keyed(n.id, n, noteElement)));
    placeNotes(null);
    for (const message of messages) {
      const element = this.messageElement(message, context, calls);
      if (element) elements.push(element);
      placeNotes(message.id);
    }
    const known = new Set([null, ...messages.map((m) => m.id)]);
    notes.filter((n) => !known.has(n.after)).forEach((n) => elements.push(this.keyed(n.id, n, noteElement)));
    for (const [key, card] of cards) if (!calls.has(key) && !forms.has(key)) elements.push(card.node); // no call to sit under
    if (running) elements.push(this.thinking);
    reconcile(this.log, elements);
    if (stick) this.log.scrollTop = this.log.scrollHeight;
  }

  messageElement(message, context, calls) {
    if (message.role === "user") return this.keyed(message.id, message, userElement);
    if (message.role === "assistant") {
      const ids = (message.toolCalls ?? []).map((c) => c.id);
      const signature = [
        message,
        ids.map((id) => context.results.get(id) ?? null),
        ids.map((id) => cardHere(id, context)),
        ids.map((id) => context.ranWith[id] ?? null),
      ];
      return this.keyed(message.id, signature, () => assistantElement(message, context));
    }
    if (message.role === "tool" && !calls.has(message.toolCallId)) return this.keyed(message.id, message, orphanElement);
    if (isFormCard(message)) {
      const card = context.cards.get(message.content.actionId);
      return this.keyed(message.id, [message, Boolean(card)], () => formCardElement(message, card));
    }
    return null;
  }

  /** The cached element for `id` if `signature` is unchanged, else a fresh one from `build()`. */
  keyed(id, signature, build) {
    const key = JSON.stringify(signature);
    const cached = this.cache.get(id);
    if (cached && cached.key === key) return cached.element;
    const element = build(signature);
    this.cache.set(id, { key, element });
    return element;
  }

  reset() {
    this.cache.clear();
    this.log.replaceChildren();
  }
}

function reconcile(parent, elements) {
  elements.forEach((element, index) => {
    if (parent.children[index] !== element) parent.insertBefore(element, parent.children[index] ?? null);
  });
  while (parent.children.length > elements.length) parent.lastElementChild.remove();
}

function isFormCard(message) {
  return message.role === "activity" && message.activityType === "agent_form" && message.content;
}

function cardHere(callId, { cards, forms }) {
  return cards.has(callId) && !forms.has(callId) ? cards.get(callId).record.interrupt.id : null;
}

function userElement(message) {
  const text = typeof message.content === "string" ? message.content : (message.content ?? []).map((p) => p.text ?? "").join(" ");
  return h("div", { class: "msg user", "data-message-id": message.id }, h("div", { class: "bubble" }, text));
}

function assistantElement(message, { results, cards, forms, ranWith }) {
  const parts = [];
  if (message.content) parts.push(h("div", { class: "bubble" }, message.content));
  for (const call of message.toolCalls ?? []) {
    const result = results.get(call.id);
    const card = cards.get(call.id);
    const edited = ranWith[call.id];
    parts.push(
      h("div", { class: "tool-call", "data-tool-call": call.id, "data-tool-name": call.function.name }, [
        h("div", { class: "tool-head" }, [
          h("span", { class: "tool-icon", "aria-hidden": "true" }, "⚙"),
          h("code", { class: "tool-name" }, call.function.name),
          json(edited ?? call.function.arguments ?? "{}", "tool-args"),
          edited ? h("span", { class: "edited", title: `proposed: ${pretty(call.function.arguments)}` }, "edited before approval") : null,
        ]),
        result ? resultElement(result) : null,
        card && !forms.has(call.id) ? card.node : null,
      ]),
    );
  }
  return h("div", { class: "msg assistant", "data-message-id": message.id }, parts);
}

function resultElement(result) {
  const failed = Boolean(result.error);
  return h("div", { class: `tool-result ${failed ? "failed" : "ok"}` }, [
    h("span", { class: "arrow", "aria-hidden": "true" }, failed ? "✗ " : "→ "),
    failed ? h("strong", {}, `${result.error}: `) : null,
    json(result.content ?? ""),
  ]);
}

const SHORT = 60; // characters of JSON a tool row shows before it folds the rest behind a toggle

/** JSON for a tool row: short values inline, long ones folded behind a toggle that opens the full, indented text. */
function json(value, className) {
  const line = pretty(value);
  if (line.length <= SHORT) return h("code", { class: className }, line);
  return h("details", { class: `json-fold ${className ?? ""}` }, [
    h("summary", {}, h("code", {}, `${line.slice(0, SHORT - 1)}…`)),
    h("pre", { class: "json-full" }, indented(value)),
  ]);
}

function indented(value) {
  try {
    return JSON.stringify(typeof value === "string" ? JSON.parse(value) : value, null, 2);
  } catch {
    return String(value);
  }
}

function orphanElement(message) {
  return h("div", { class: "msg tool" }, resultElement(message));
}

function formCardElement(message, card) {
  const content = message.content;
  const status = content.status ?? "PENDING";
  const title = content.schema?.title ?? content.formKey;
  const parts = [
    h("div", { class: "card-title" }, [
      h("span", { class: "badge" }, "Form"),
      " ",
      title,
      h("span", { class: `status status-${status.toLowerCase()}` }, status),
    ]),
  ];
  if (status === "SUBMITTED") parts.push(valuesList(content.submittedValues, content.schema), submittedBy(content));
  else if (status === "PENDING" && card) parts.push(card.node);
  else if (status === "PENDING") parts.push(h("p", { class: "hint" }, "Waiting for this form."));
  const attributes = { class: `msg activity form-card state-${status.toLowerCase()}`, "data-form-key": content.formKey };
  return h("div", { ...attributes, "data-status": status, "data-message-id": message.id }, parts);
}

function submittedBy(content) {
  const who = content.submittedBy ? ` by ${content.submittedBy}` : "";
  const when = content.submittedAt ? ` at ${localTime(content.submittedAt)}` : "";
  return h("p", { class: "hint" }, `Submitted${who}${when}.`);
}

/** Values as a definition list, labelled with the schema's titles. */
export function valuesList(values, schema) {
  if (!values || typeof values !== "object") return h("pre", { class: "args" }, pretty(values ?? null));
  const properties = schema?.properties ?? {};
  return h(
    "dl",
    { class: "values" },
    Object.entries(values).flatMap(([key, value]) => [
      h("dt", {}, properties[key]?.title ?? key),
      h("dd", { "data-key": key }, displayValue(properties[key], value)),
    ]),
  );
}

function noteElement(note) {
  return h("div", { class: `msg note note-${note.kind}`, role: note.kind === "error" ? "alert" : "status" }, [
    note.code ? h("strong", { class: "code" }, note.code) : null,
    note.code ? " " : null,
    note.text,
  ]);
}
