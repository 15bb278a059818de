// The right-hand panel: tabs the `navigate` tool switches, the form draft the agent helps fill, and toasts.

import { h } from "./dom.js";
import { schemaForm } from "./schema-form.js";
import { DRAFT_SCHEMA } from "./form-draft.js";
import { valuesList } from "./chat-view.js";

/** Switch the panel to `page` (a `data-page` section); returns false for an unknown page. */
export function showPage(page) {
  const section = document.querySelector(`.panel [data-page="${CSS.escape(page)}"]`);
  if (!section) return false;
  for (const other of document.querySelectorAll(".panel [data-page]")) other.hidden = other !== section;
  for (const tab of document.querySelectorAll(".tabs [data-tab]")) {
    const active = tab.dataset.tab === page;
    tab.classList.toggle("active", active);
    tab.setAttribute("aria-selected", String(active));
  }
  document.querySelector(".panel").dataset.current = page;
  return true;
}

export function setUpTabs() {
  for (const tab of document.querySelectorAll(".tabs [data-tab]")) tab.addEventListener("click", () => showPage(tab.dataset.tab));
}

/** A toast in the corner, gone after a few seconds. */
export function toast(message) {
  const item = h("div", { class: "toast", role: "status" }, message);
  document.querySelector("#toasts").append(item);
  setTimeout(() => item.classList.add("leaving"), 3500);
  setTimeout(() => item.remove(), 4000);
}

/**
 * The compute-resource request: the person edits it here, the agent through `update_form_draft`.
 * `onSubmit(submitted)` runs when "确认提交" is pressed on a valid draft.
 */
export function draftPanel(root, draft, { onSubmit, canSubmit }) {
  const form = schemaForm(DRAFT_SCHEMA, {
    idPrefix: "draft",
    values: draft.values,
    onChange: (field, result) => {
      if (!result.error) draft.edit(field, result.value);
    },
  });
  const version = h("span", { class: "version", "data-testid": "draft-version" });
  const history = h("ol", { class: "draft-log" });
  const receipt = h("div", { class: "receipt", "data-testid": "receipt" });
  const message = h("p", { class: "field-error", role: "alert" });
  const submit = h("button", { type: "submit", class: "primary", "data-testid": "submit-draft" }, "确认提交 Submit");
  const element = h("form", { class: "draft", novalidate: true, onsubmit: (e) => (e.preventDefault(), confirm()) }, [
    h("div", { class: "draft-head" }, [h("h2", {}, DRAFT_SCHEMA.title), version]),
    form.element,
    h("div", { class: "card-actions" }, [submit, message]),
    history,
    receipt,
  ]);
  root.replaceChildren(element);

  function confirm() {
    const { ok, value } = form.read();
    if (!ok) return (message.textContent = "Fix the fields above first.");
    if (!canSubmit()) return (message.textContent = "Wait until the agent has finished.");
    for (const [field, fieldValue] of Object.entries(value)) draft.edit(field, fieldValue);
    message.textContent = "";
    onSubmit(draft.submit());
  }

  function update(change) {
    form.setValues(draft.values);
    form.setDisabled(Boolean(draft.submitted));
    submit.disabled = Boolean(draft.submitted);
    version.textContent = `v${draft.version}`;
    history.replaceChildren(
      ...draft.log.map((entry) =>
        h("li", {}, `v${entry.version}: ${entry.by === "agent" ? "agent" : "you"} changed ${entry.fields.join(", ")}`),
      ),
    );
    receipt.replaceChildren(...(draft.submitted ? receiptParts(draft.submitted, draft) : []));
    if (change?.by === "agent") flash(form, change.fields);
  }

  draft.subscribe(update);
  update();
}

function receiptParts(submitted, draft) {
  return [
    h("h3", {}, `已提交 Submitted (v${submitted.version})`),
    valuesList(submitted.values, DRAFT_SCHEMA),
    h("p", { class: "hint" }, "Local demo: no real resource was created."),
    h("button", { type: "button", onclick: () => draft.reset() }, "New request"),
  ];
}

function flash(form, fields) {
  for (const field of form.fields) {
    if (!fields.includes(field.name)) continue;
    field.element.classList.remove("flash");
    void field.element.offsetWidth; // restart the animation
    field.element.classList.add("flash", "by-agent");
  }
}
