// Shared by the client drivers: console capture, assertions, the client tools and the scenario runner.
// It imports no @ag-ui package, so each driver brings its own client version from its own folder.
//
// A driver exits 0 only when every scenario passed and the client wrote nothing to console.warn or
// console.error: a client warning (an `[ag-ui]` line above all) is a failure, like a thrown error.

import { inspect } from "node:util";

const captured = [];
for (const level of ["warn", "error", "log", "info"]) {
  const original = console[level].bind(console);
  console[level] = (...args) => {
    const line = args.map((a) => (typeof a === "string" ? a : inspect(a, { depth: 4 }))).join(" ");
    if (level === "warn" || level === "error" || line.includes("[ag-ui]")) captured.push(`console.${level}: ${line}`);
    original(...args);
  };
}

export class Failure extends Error {}

export function check(condition, message, detail) {
  if (!condition) {
    throw new Failure(detail === undefined ? message : `${message}\n  got: ${JSON.stringify(detail, null, 1)}`);
  }
}

export function contentText(content) {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.map((part) => part.text ?? "").join("");
  return "";
}

/** The text of the last assistant message that has any. */
export function lastAssistantText(messages) {
  const texts = messages.filter((m) => m.role === "assistant" && contentText(m.content)).map((m) => contentText(m.content));
  return texts.at(-1) ?? "";
}

export function toolCalls(messages, name) {
  return messages.flatMap((m) => (m.role === "assistant" ? (m.toolCalls ?? []) : [])).filter((c) => c.function.name === name);
}

export function toolResult(messages, toolCallId) {
  return messages.find((m) => m.role === "tool" && m.toolCallId === toolCallId);
}

/** Ids must stay unique across the thread, however many runs and snapshots built it. */
export function checkUniqueIds(messages) {
  const ids = messages.map((m) => m.id);
  check(new Set(ids).size === ids.length, "message ids are not unique", ids);
}

export function expectText(messages, phrase) {
  const text = lastAssistantText(messages);
  check(text.includes(phrase), `the assistant should say ${JSON.stringify(phrase)}`, text);
}

/** The client tools the drivers declare and run, as a page would. */
export const CLIENT_TOOLS = [
  {
    name: "navigate",
    description: "Open a page of the app.",
    parameters: { type: "object", properties: { page: { type: "string" } }, required: ["page"] },
  },
  {
    name: "show_toast",
    description: "Show a short notification.",
    parameters: { type: "object", properties: { message: { type: "string" } }, required: ["message"] },
  },
  {
    name: "confirm_action",
    description: "Ask the person to confirm an action.",
    parameters: { type: "object", properties: { action: { type: "string" } }, required: ["action"] },
  },
];

/** What the page would answer for a client-tool call; `confirm` is the person's choice for confirm_action. */
export function runClientTool(call, { confirm = true } = {}) {
  const args = JSON.parse(call.function.arguments || "{}");
  switch (call.function.name) {
    case "navigate":
      return { opened: args.page };
    case "show_toast":
      return { shown: args.message };
    case "confirm_action":
      return { confirmed: confirm };
    default:
      throw new Failure(`the agent called an unknown client tool ${call.function.name}`);
  }
}

let counter = 0;
export function uniqueId(prefix) {
  counter += 1;
  return `${prefix}-${process.pid}-${Date.now()}-${counter}`;
}

/**
 * Run `[name, (HttpAgent, url) => ...]` scenarios in order and report each; exit non-zero on any failure
 * or captured warning. The url is the driver's first argument.
 */
export async function runScenarios(label, HttpAgent, scenarios) {
  const url = process.argv[2];
  if (!url) {
    console.error("usage: node <driver> <agui-url>");
    process.exit(2);
  }
  let failed = 0;
  for (const [name, scenario] of scenarios) {
    const before = captured.length;
    try {
      await scenario(HttpAgent, url);
      if (captured.length > before) throw new Failure(`the client warned:\n  ${captured.slice(before).join("\n  ")}`);
      process.stdout.write(`ok ${label} ${name}\n`);
    } catch (error) {
      failed += 1;
      const message = error instanceof Failure ? error.message : (error?.stack ?? String(error));
      process.stdout.write(`FAIL ${label} ${name}: ${message}\n`);
    }
  }
  process.stdout.write(`${label}: ${scenarios.length - failed} of ${scenarios.length} scenarios passed\n`);
  process.exit(failed === 0 && captured.length === 0 ? 0 : 1);
}
