// The page's own tools: declared to the agent in RunAgentInput.tools, executed here in the browser.
// The server never runs them; a call ends the run with an interrupt that the page answers on resume.

import { FORM_ID, DRAFT_SCHEMA } from "./form-draft.js";

export const PAGES = ["form", "orders", "settings"];

export const CLIENT_TOOLS = [
  {
    name: "navigate",
    description: `Open a page of the app beside the chat. Pages: ${PAGES.join(", ")}.`,
    parameters: {
      type: "object",
      properties: { page: { type: "string", description: `One of: ${PAGES.join(", ")}` } },
      required: ["page"],
    },
  },
  {
    name: "show_toast",
    description: "Show a short notification to the user.",
    parameters: { type: "object", properties: { message: { type: "string" } }, required: ["message"] },
  },
  {
    name: "confirm_action",
    description: "Ask the user to confirm an action before it happens. Answers {confirmed: true|false}.",
    parameters: { type: "object", properties: { action: { type: "string" } }, required: ["action"] },
  },
  {
    name: "update_form_draft",
    description:
      `Propose changes to the ${FORM_ID} form draft shown beside the chat. Take formId and expectedVersion from ` +
      "the formContext context entry. The page checks the form, the fields, the values and the version, then " +
      'answers {"applied", "reason", "code", "version", "fields", "values"}. A change made for an older version ' +
      "is refused (code VERSION_CONFLICT) and the user's newer values are kept.",
    parameters: {
      type: "object",
      properties: {
        formId: { type: "string", const: FORM_ID },
        expectedVersion: { type: "integer" },
        changes: {
          type: "object",
          properties: {
            quantity: { type: "integer", minimum: 1, maximum: 100 },
            region: { type: "string", enum: ["Beijing", "Shanghai", "Guangzhou"] },
            purpose: { type: "string", maxLength: DRAFT_SCHEMA.properties.purpose.maxLength },
          },
          additionalProperties: false,
        },
      },
      required: ["formId", "expectedVersion", "changes"],
    },
  },
];

/** Tools the page runs as soon as they are called; `confirm_action` waits for the person instead. */
export const AUTOMATIC = new Set(["navigate", "show_toast", "update_form_draft"]);
export const ASKS_THE_USER = new Set(["confirm_action"]);

/** Bind the automatic tools to the page: `run(name, args)` returns the result the agent gets. */
export function toolbox({ showPage, toast, draft }) {
  const handlers = {
    navigate({ page }) {
      const name = String(page ?? "").toLowerCase();
      if (!PAGES.includes(name)) return { opened: null, error: `no page called ${page}`, pages: PAGES };
      showPage(name);
      return { opened: name };
    },
    show_toast({ message }) {
      toast(String(message ?? ""));
      return { shown: true };
    },
    update_form_draft(args) {
      showPage("form");
      return draft.apply(args);
    },
  };
  return {
    run(name, args) {
      const handler = handlers[name];
      if (!handler) throw new Error(`the page has no tool called ${name}`);
      return handler(args);
    },
  };
}
