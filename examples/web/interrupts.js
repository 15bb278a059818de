// One card per open interrupt. Its `reason` (and the tool it is about) decides the UI:
// an approval (Approve / Reject / Edit; "always allow in this chat" and a reason where its `responseSchema`
// offers `remember` and `reason`), a form from `responseSchema`, a yes/no confirmation, the
// page's own confirm_action dialog, or a tool the page ran by itself. Every card can be cancelled.

import { h, pretty } from "./dom.js";
import { describeValues, localTime, schemaForm } from "./schema-form.js";
import { AUTOMATIC, ASKS_THE_USER } from "./tools.js";
import { newId } from "./agui-client.js";

/** Which UI an interrupt gets. */
export function kindOf(interrupt, toolName) {
  const properties = interrupt.responseSchema?.properties ?? {};
  if (interrupt.reason === "input_required") return "form";
  if (interrupt.reason === "confirmation") return "confirmation";
  if (interrupt.metadata?.toolName && "approved" in properties) return "approval";
  if (AUTOMATIC.has(toolName)) return "automatic";
  if (ASKS_THE_USER.has(toolName)) return "confirm";
  return "client";
}

export function isExpired(interrupt, now = Date.now()) {
  return Boolean(interrupt.expiresAt) && Date.parse(interrupt.expiresAt) <= now;
}

/**
 * A card for one interrupt. `record` is `{interrupt, toolName, args, kind}`; `onAnswer(entry, summary)`
 * receives the resume entry once the person (or the page) has answered.
 */
export class InterruptCard {
  constructor(record, { toolParameters, onAnswer }) {
    this.record = record;
    this.toolParameters = toolParameters;
    this.onAnswer = onAnswer;
    this.body = h("div", { class: "card-body" });
    this.node = h("div", { class: `card interrupt kind-${record.kind}`, "data-interrupt": record.interrupt.id }, [
      h("div", { class: "card-title" }, [h("span", { class: "badge" }, TITLES[record.kind]), " ", this.title()]),
      this.body,
    ]);
    this.lastPayload = undefined;
    this.open();
    this.watchExpiry();
  }

  title() {
    const { interrupt, toolName, kind } = this.record;
    if (kind === "automatic") return `${toolName} runs in this page`;
    if (kind === "confirm") return "The agent asks you to confirm";
    if (kind === "form") return formSubtitle(interrupt);
    return interrupt.message ?? (toolName ? `${toolName}` : "The agent is waiting for an answer");
  }

  /** Show the interactive UI (again, after a refused resume: `notice` says why). */
  open(notice) {
    const { kind, interrupt } = this.record;
    this.state = "open";
    const parts = [notice ? h("p", { class: "card-notice" }, notice) : null];
    if (isExpired(interrupt)) {
      parts.push(h("p", { class: "card-expired" }, `This request expired at ${localTime(interrupt.expiresAt)}; it can only be cancelled.`));
      parts.push(this.buttons([]));
    } else {
      parts.push(...BUILDERS[kind].call(this));
    }
    this.body.replaceChildren(...parts.filter(Boolean));
    this.node.classList.remove("answered", "done");
  }

  /** Locked with the answer shown, until every interrupt of the run is answered. */
  answered(entry, summary) {
    this.state = "answered";
    this.entry = entry;
    this.lastPayload = entry.payload;
    this.node.classList.add("answered");
    this.body.replaceChildren(h("p", { class: "card-answer" }, summary), h("p", { class: "card-waiting" }, "Sending…"));
    this.onAnswer(entry, summary);
  }

  waiting(count) {
    const note = this.body.querySelector(".card-waiting");
    if (note) note.textContent = count ? `Waiting for ${count} more answer(s) before resuming…` : "Sending…";
  }

  done() {
    this.state = "done";
    localStorage.removeItem(draftKey(this.record.interrupt));
    this.node.classList.add("done");
    this.body.querySelector(".card-waiting")?.remove();
  }

  resolve(payload, summary, metadata) {
    const entry = { interruptId: this.record.interrupt.id, status: "resolved", payload };
    if (metadata) entry.metadata = metadata;
    this.answered(entry, summary);
  }

  cancel() {
    this.answered({ interruptId: this.record.interrupt.id, status: "cancelled" }, "Cancelled.");
  }

  buttons(list) {
    const cancel = { label: "Cancel", action: () => this.cancel(), style: "quiet" };
    return h(
      "div",
      { class: "card-actions" },
      [...list, cancel].map(({ label, action, style }) =>
        h("button", { type: "button", class: style ?? "", onclick: action }, label),
      ),
    );
  }

  watchExpiry() {
    const at = Date.parse(this.record.interrupt.expiresAt ?? "");
    if (!Number.isFinite(at)) return;
    const delay = at - Date.now();
    if (delay > 0 && delay < 2 ** 31) setTimeout(() => this.state === "open" && this.open(), delay + 50);
  }
}

const TITLES = {
  approval: "Approval",
  form: "Form",
  confirmation: "Confirm",
  confirm: "Confirm",
  automatic: "Page tool",
  client: "Client tool",
};

const BUILDERS = {
  approval() {
    const { args, toolName, interrupt } = this.record;
    const offered = interrupt.responseSchema?.properties ?? {};
    const editable = "editedArgs" in offered;
    // Drawn only where the schema offers them: a tool that takes no grant offers no `remember`.
    const always = "remember" in offered ? h("input", { type: "checkbox", name: "remember" }) : null;
    const reason =
      "reason" in offered
        ? h("input", {
            type: "text",
            name: "reason",
            maxlength: String(offered.reason.maxLength ?? 2000),
            placeholder: "拒绝理由 Why not? (the agent reads it)",
            "aria-label": "Reason",
          })
        : null;
    const approve = () => {
      const remember = Boolean(always?.checked);
      const summary = remember ? `Approved ${toolName}; always allowed in this chat.` : `Approved ${toolName}.`;
      this.resolve(remember ? { approved: true, remember: "thread" } : { approved: true }, summary);
    };
    const reject = () => {
      const why = reason?.value.trim();
      const summary = why ? `Rejected ${toolName}: ${why}` : `Rejected ${toolName}.`;
      this.resolve(why ? { approved: false, reason: why } : { approved: false }, summary);
    };
    const actions = [
      { label: "Approve", action: approve, style: "primary" },
      { label: "Reject", action: reject, style: "danger" },
    ];
    if (editable) actions.push({ label: "Edit", action: () => this.body.replaceChildren(...editArguments.call(this)) });
    return [
      h("pre", { class: "args" }, pretty(args)),
      always ? h("label", { class: "always-allow" }, [always, " 在此会话中始终允许 Always allow in this chat"]) : null,
      reason,
      this.buttons(actions),
    ];
  },

  form() {
    const { interrupt } = this.record;
    const schema = interrupt.responseSchema ?? {};
    const form = schemaForm(schema, { idPrefix: `i-${interrupt.id}`, values: this.lastPayload });
    // What the person typed so far survives a reload (until the form is answered).
    if (this.lastPayload === undefined) form.setRaw(loadDraft(interrupt));
    const keep = () => localStorage.setItem(draftKey(interrupt), JSON.stringify(form.raw()));
    form.element.addEventListener("input", keep);
    form.element.addEventListener("change", keep);
    const submit = () => {
      const { ok, value } = form.read();
      if (!ok) return;
      const metadata = { submittedBy: "demo-user", requestId: newId() };
      this.resolve(value, `Submitted: ${describeValues(value, schema)}`, metadata);
    };
    return [
      h("form", { class: "interrupt-form", novalidate: true, onsubmit: (e) => (e.preventDefault(), submit()) }, [
        form.element,
        h("div", { class: "card-actions" }, [
          h("button", { type: "submit", class: "primary" }, "Submit"),
          h("button", { type: "button", class: "quiet", onclick: () => this.cancel() }, "Cancel"),
        ]),
      ]),
    ];
  },

  confirmation() {
    const payload = (yes) => confirmationPayload(this.record.interrupt.responseSchema, yes);
    return [
      this.buttons([
        { label: "Yes", action: () => this.resolve(payload(true), "Yes."), style: "primary" },
        { label: "No", action: () => this.resolve(payload(false), "No."), style: "danger" },
      ]),
    ];
  },

  confirm() {
    const action = this.record.args.action ?? this.record.toolName;
    return [
      h("p", { class: "confirm-question" }, ["Do you want the agent to ", h("strong", {}, action), "?"]),
      this.buttons([
        { label: "Approve", action: () => this.resolve({ confirmed: true }, `Approved: ${action}.`), style: "primary" },
        { label: "Reject", action: () => this.resolve({ confirmed: false }, `Rejected: ${action}.`), style: "danger" },
      ]),
    ];
  },

  automatic() {
    // Shown only when the page's own answer needs a person: after a refused resume.
    const send = () => this.resolve(this.lastPayload, `Sent again: ${pretty(this.lastPayload)}`);
    return [
      h("pre", { class: "args" }, pretty(this.lastPayload ?? null)),
      this.buttons(this.lastPayload === undefined ? [] : [{ label: "Send again", action: send, style: "primary" }]),
    ];
  },

  client() {
    const { interrupt, toolName } = this.record;
    const form = schemaForm(interrupt.responseSchema ?? {}, { idPrefix: `c-${interrupt.id}` });
    const send = () => {
      const { ok, value } = form.read();
      if (ok) this.resolve(value, `Answered ${toolName ?? "the call"}: ${pretty(value)}`);
    };
    return [
      h("p", {}, `The agent called ${toolName ?? "a tool"}, which this page does not know. Answer it by hand:`),
      form.element,
      this.buttons([{ label: "Send", action: send, style: "primary" }]),
    ];
  },
};

/** Approve with edits: the proposed arguments in a form built from the tool's parameters (or as JSON). */
function editArguments() {
  const { args, toolName, interrupt } = this.record;
  const parameters = this.toolParameters(toolName);
  const form = parameters?.properties
    ? schemaForm(parameters, { idPrefix: `e-${interrupt.id}`, values: args })
    : schemaForm({}, { idPrefix: `e-${interrupt.id}`, values: args });
  const send = () => {
    const { ok, value } = form.read();
    if (ok) this.resolve({ approved: true, editedArgs: value }, `Approved ${toolName} with ${describeValues(value, parameters)}.`);
  };
  return [
    h("p", { class: "hint" }, `Edit the arguments of ${toolName}, then approve:`),
    h("form", { class: "interrupt-form", novalidate: true, onsubmit: (e) => (e.preventDefault(), send()) }, [
      form.element,
      h("div", { class: "card-actions" }, [
        h("button", { type: "submit", class: "primary" }, "Approve with edits"),
        h("button", { type: "button", onclick: () => this.open() }, "Back"),
        h("button", { type: "button", class: "quiet", onclick: () => this.cancel() }, "Cancel"),
      ]),
    ]),
  ];
}

/** The line under a form's title, for the person: the schema's description (the interrupt's message is for the model). */
function formSubtitle(interrupt) {
  const schema = interrupt.responseSchema ?? {};
  if (schema.description) return schema.description;
  if (schema.title) return "Fill in the form; the agent goes on once you submit it.";
  return interrupt.message ?? "The agent is waiting for an answer";
}

function draftKey(interrupt) {
  return `agui-demo:form-draft:${interrupt.id}`;
}

function loadDraft(interrupt) {
  try {
    return JSON.parse(localStorage.getItem(draftKey(interrupt)) ?? "{}");
  } catch {
    return {};
  }
}

function confirmationPayload(schema, yes) {
  const properties = schema?.properties ?? {};
  if ("approved" in properties) return { approved: yes };
  if ("confirmed" in properties) return { confirmed: yes };
  if (schema?.type === "boolean") return yes;
  return { confirmed: yes };
}
