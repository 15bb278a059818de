// Chat-assisted form fill: the ONE form draft the page owns. The person and the agent both change it; every change
// increments its version, so a change made for an older version is refused instead of overwriting.

import { checkValue } from "./schema-form.js";

export const FORM_ID = "compute-request";

export const DRAFT_SCHEMA = {
  type: "object",
  title: "计算资源申请 · Compute resource request",
  properties: {
    quantity: { type: "integer", minimum: 1, maximum: 100, title: "数量 Quantity" },
    region: {
      type: "string",
      title: "地域 Region",
      oneOf: [
        { const: "Beijing", title: "北京" },
        { const: "Shanghai", title: "上海" },
        { const: "Guangzhou", title: "广州" },
      ],
    },
    purpose: { type: "string", title: "用途 Purpose", maxLength: 200 },
  },
  required: ["quantity", "region", "purpose"],
};

const INITIAL = { quantity: 1, region: "Shanghai", purpose: "" };

/** The draft: values, version, who changed what, and whether it was submitted. Saved in localStorage. */
export class Draft {
  constructor(storageKey) {
    this.storageKey = storageKey;
    this.listeners = new Set();
    const saved = load(storageKey);
    this.values = saved?.values ?? { ...INITIAL };
    this.version = saved?.version ?? 1;
    this.log = saved?.log ?? [];
    this.submitted = saved?.submitted ?? null;
  }

  /** What each message carries to the agent, as the `formContext` context entry. */
  context() {
    const context = { formId: FORM_ID, expectedVersion: this.version, values: { ...this.values } };
    if (this.submitted) context.status = "submitted";
    return { description: "formContext", value: JSON.stringify(context) };
  }

  /** The person changed one field (already validated by the form). */
  edit(field, value) {
    if (this.submitted || this.values[field] === value) return;
    this.values = { ...this.values, [field]: value };
    this.bump("user", [field]);
  }

  /** The agent's `update_form_draft` call: check everything, then apply all changes or none. */
  apply(args) {
    const refusal = this.refusal(args ?? {});
    if (refusal) return this.result(false, refusal.code, refusal.reason, []);
    const fields = Object.keys(args.changes);
    this.values = { ...this.values, ...args.changes };
    this.bump("agent", fields);
    return this.result(true, null, null, fields);
  }

  refusal({ formId, expectedVersion, changes }) {
    if (formId !== FORM_ID) return { code: "FORM_MISMATCH", reason: `this page shows form ${FORM_ID}, not ${formId}` };
    if (this.submitted) return { code: "ALREADY_SUBMITTED", reason: "the form was already submitted" };
    if (expectedVersion !== this.version) {
      return {
        code: "VERSION_CONFLICT",
        reason: `the draft is at version ${this.version}, the change was made for version ${expectedVersion}; the newer values were kept`,
      };
    }
    if (!changes || typeof changes !== "object" || Array.isArray(changes) || !Object.keys(changes).length) {
      return { code: "NO_CHANGES", reason: "the call names no field to change" };
    }
    for (const [field, value] of Object.entries(changes)) {
      const property = DRAFT_SCHEMA.properties[field];
      if (!property) return { code: "UNKNOWN_FIELD", reason: `${field} is not a field of this form` };
      const problem = checkValue(property, value);
      if (problem) return { code: "INVALID_VALUE", reason: `${field} ${problem}` };
    }
    return null;
  }

  result(applied, code, reason, fields) {
    return { applied, reason, code, version: this.version, fields, values: { ...this.values } };
  }

  /** "确认提交": a separate step from filling the draft. Returns what was submitted. */
  submit() {
    this.submitted = { values: { ...this.values }, version: this.version, at: new Date().toISOString() };
    this.save();
    this.emit({ by: "user", fields: [], submitted: true });
    return this.submitted;
  }

  /** Start a new request after a submission: the initial values, under the next version. */
  reset() {
    this.values = { ...INITIAL };
    this.submitted = null;
    this.bump("user", ["(new request)"]);
  }

  bump(by, fields) {
    this.version += 1;
    this.log = [...this.log, { version: this.version, by, fields }].slice(-8);
    this.save();
    this.emit({ by, fields });
  }

  subscribe(listener) {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  emit(change) {
    for (const listener of this.listeners) listener(change);
  }

  save() {
    const { values, version, log, submitted } = this;
    localStorage.setItem(this.storageKey, JSON.stringify({ values, version, log, submitted }));
  }
}

function load(key) {
  try {
    return JSON.parse(localStorage.getItem(key) ?? "null");
  } catch {
    return null;
  }
}
