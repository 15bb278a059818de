// A small JSON Schema form renderer: text, number, integer, boolean, enum (select), date-time and a
// JSON textarea for anything else; required fields and client-side validation with messages.
// The server validates again; this is for the person filling the form.

import { h } from "./dom.js";

/**
 * Build a form for `schema`.
 * An object schema gives one field per property; any other schema gives one field, and the form's
 * value is that field's value (a string schema is one text input; `{}` is a JSON textarea).
 *
 * Returns `{element, read(), setValues(values), setDisabled(flag), showErrors(errors), raw(), setRaw(raw)}`;
 * `read()` is `{ok, value, errors}` with `errors` keyed by field name; `raw()` is what the inputs hold,
 * half-typed or not (a draft to restore with `setRaw`).
 */
export function schemaForm(schema, { values, idPrefix = "f", onChange } = {}) {
  const single = !isObjectSchema(schema);
  const properties = single ? { value: schema ?? {} } : schema.properties;
  const required = new Set(single ? ["value"] : schema.required ?? []);
  const fields = Object.entries(properties).map(([name, property]) =>
    makeField(name, property ?? {}, { required: required.has(name), id: `${idPrefix}-${name}`, single, onChange }),
  );
  const element = h("div", { class: "schema-form" }, fields.map((field) => field.element));
  const form = {
    element,
    fields,
    read() {
      const errors = {};
      const value = {};
      for (const field of fields) {
        const result = field.read();
        if (result.error) errors[field.name] = result.error;
        else if (result.value !== undefined) value[field.name] = result.value;
      }
      form.showErrors(errors);
      const ok = Object.keys(errors).length === 0;
      return { ok, errors, value: single ? value.value : value };
    },
    setValues(next) {
      const byName = single ? { value: next } : (next ?? {});
      for (const field of fields) if (field.name in byName) field.write(byName[field.name]);
    },
    setDisabled(flag) {
      for (const field of fields) field.input.disabled = flag;
    },
    showErrors(errors) {
      for (const field of fields) field.showError(errors[field.name] ?? "");
    },
    raw() {
      return Object.fromEntries(fields.map((f) => [f.name, f.input.type === "checkbox" ? f.input.checked : f.input.value]));
    },
    setRaw(raw) {
      for (const field of fields) {
        if (!(field.name in (raw ?? {}))) continue;
        if (field.input.type === "checkbox") field.input.checked = Boolean(raw[field.name]);
        else field.input.value = raw[field.name];
      }
    },
  };
  const initial = values ?? defaults(properties, single);
  if (initial !== undefined) form.setValues(initial);
  return form;
}

function isObjectSchema(schema) {
  return Boolean(schema && schema.type === "object" && schema.properties && typeof schema.properties === "object");
}

function defaults(properties, single) {
  const found = Object.fromEntries(
    Object.entries(properties)
      .filter(([, p]) => p && "default" in p)
      .map(([name, p]) => [name, p.default]),
  );
  return single ? found.value : found;
}

/** The options of an enum: plain `enum`, or `oneOf`/`anyOf` branches with `const` (and a `title` label). */
export function enumOptions(property) {
  if (Array.isArray(property.enum)) return property.enum.map((value) => ({ value, label: String(value) }));
  const branches = property.oneOf ?? property.anyOf;
  if (Array.isArray(branches) && branches.length && branches.every((b) => b && "const" in b)) {
    return branches.map((b) => ({ value: b.const, label: b.title ?? String(b.const) }));
  }
  return null;
}

/** A value as a person reads it: an option's title, a local date and time, yes/no; JSON for the rest. */
export function displayValue(property, value) {
  const option = property ? enumOptions(property)?.find((o) => o.value === value) : null;
  if (option) return option.label;
  if (property?.format === "date-time" && typeof value === "string") return localTime(value);
  if (typeof value === "boolean") return value ? "yes" : "no";
  return typeof value === "string" ? value : JSON.stringify(value);
}

/** Values on one line, labelled with the schema's titles: "Topic: Planning · Start time: 4 May 2030, 10:30". */
export function describeValues(values, schema) {
  if (!values || typeof values !== "object" || Array.isArray(values)) return displayValue(schema, values);
  const properties = schema?.properties ?? {};
  return Object.entries(values)
    .map(([key, value]) => `${properties[key]?.title ?? key}: ${displayValue(properties[key], value)}`)
    .join(" · ");
}

/** An ISO 8601 time in the reader's own locale and time zone (the raw text when it is not a time). */
export function localTime(iso) {
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? String(iso) : date.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
}

function kindOf(property) {
  if (enumOptions(property)) return "enum";
  const type = Array.isArray(property.type) ? property.type.find((t) => t !== "null") : property.type;
  if (type === "string") return property.format === "date-time" ? "datetime" : "text";
  if (type === "integer" || type === "number" || type === "boolean") return type;
  return "json";
}

function makeField(name, property, { required, id, single, onChange }) {
  const kind = kindOf(property);
  const input = INPUTS[kind](property, id);
  const label = property.title ?? (single ? "Answer" : name);
  const error = h("div", { class: "field-error", role: "alert", id: `${id}-error` });
  input.setAttribute("aria-describedby", `${id}-error`);
  input.name = name;
  const caption = h("label", { for: id }, [label, required ? h("span", { class: "required", title: "required" }, " *") : null]);
  const hint = property.description ? h("small", { class: "hint" }, property.description) : null;
  const element =
    kind === "boolean"
      ? h("div", { class: "field field-boolean", "data-field": name }, [h("label", { for: id }, [input, " ", label]), hint, error])
      : h("div", { class: `field field-${kind}`, "data-field": name }, [caption, input, hint, error]);
  const field = {
    name,
    element,
    input,
    read: () => readField(kind, property, input, required),
    write: (value) => writeField(kind, property, input, value),
    showError(message) {
      error.textContent = message;
      element.classList.toggle("invalid", Boolean(message));
      input.setAttribute("aria-invalid", message ? "true" : "false");
    },
  };
  // A field that shows an error is checked again as it changes: filled in, it loses "This field is required." at
  // once, not at the next submit. A field without an error is left alone while the person types.
  const recheck = () => element.classList.contains("invalid") && field.showError(field.read().error ?? "");
  input.addEventListener("input", recheck);
  input.addEventListener("change", recheck);
  if (onChange) {
    input.addEventListener("change", () => {
      const result = field.read();
      field.showError(result.error ?? "");
      onChange(name, result);
    });
  }
  return field;
}

const INPUTS = {
  text: (p, id) => {
    const long = (p.maxLength ?? 0) > 200 || p.format === "textarea";
    const input = h(long ? "textarea" : "input", { id, type: long ? null : formatType(p.format), rows: long ? 3 : null });
    if (p.maxLength) input.maxLength = p.maxLength;
    return input;
  },
  datetime: (p, id) => h("input", { id, type: "datetime-local" }),
  integer: (p, id) => h("input", { id, type: "number", step: "1", inputmode: "numeric" }),
  number: (p, id) => h("input", { id, type: "number", step: "any", inputmode: "decimal" }),
  boolean: (p, id) => h("input", { id, type: "checkbox" }),
  enum: (p, id) =>
    h("select", { id }, [
      h("option", { value: "" }, "— choose —"),
      ...enumOptions(p).map((option, index) => h("option", { value: String(index) }, option.label)),
    ]),
  json: (p, id) => h("textarea", { id, rows: 3, class: "json", spellcheck: "false", placeholder: "JSON, e.g. {\"ok\": true}" }),
};

function formatType(format) {
  return { email: "email", uri: "url", date: "date" }[format] ?? "text";
}

function readField(kind, property, input, required) {
  const raw = kind === "boolean" ? input.checked : input.value;
  if (kind !== "boolean" && String(raw).trim() === "") {
    return required ? { error: "This field is required." } : { value: undefined };
  }
  const parsed = PARSERS[kind](raw, property);
  if (parsed.error) return parsed;
  const problem = check(kind, property, parsed.value);
  return problem ? { error: problem } : parsed;
}

const PARSERS = {
  text: (raw) => ({ value: raw }),
  boolean: (raw) => ({ value: raw }),
  enum: (raw, p) => ({ value: enumOptions(p)[Number(raw)]?.value }),
  datetime: (raw) => {
    const date = new Date(raw);
    return Number.isNaN(date.getTime()) ? { error: "Enter a date and time." } : { value: date.toISOString() };
  },
  integer: (raw) => {
    const value = Number(raw);
    return Number.isInteger(value) ? { value } : { error: "Enter a whole number." };
  },
  number: (raw) => {
    const value = Number(raw);
    return Number.isFinite(value) ? { value } : { error: "Enter a number." };
  },
  json: (raw) => {
    try {
      return { value: JSON.parse(raw) };
    } catch {
      return { error: "This is not valid JSON." };
    }
  },
};

function check(kind, p, value) {
  if (kind === "text") {
    if (p.minLength !== undefined && value.length < p.minLength) return `Enter at least ${p.minLength} characters.`;
    if (p.maxLength !== undefined && value.length > p.maxLength) return `Enter at most ${p.maxLength} characters.`;
    if (p.pattern && !new RegExp(p.pattern, "u").test(value)) return `Does not match the expected format (${p.pattern}).`;
    if (p.format === "email" && !/^[^@\s]+@[^@\s]+$/.test(value)) return "Enter an email address.";
  }
  if (kind === "integer" || kind === "number") {
    if (p.minimum !== undefined && value < p.minimum) return `Must be at least ${p.minimum}.`;
    if (p.maximum !== undefined && value > p.maximum) return `Must be at most ${p.maximum}.`;
    if (p.exclusiveMinimum !== undefined && value <= p.exclusiveMinimum) return `Must be more than ${p.exclusiveMinimum}.`;
    if (p.exclusiveMaximum !== undefined && value >= p.exclusiveMaximum) return `Must be less than ${p.exclusiveMaximum}.`;
  }
  if (kind === "enum" && value === undefined) return "Choose one of the options.";
  return null;
}

function writeField(kind, property, input, value) {
  if (kind === "boolean") input.checked = Boolean(value);
  else if (kind === "enum") {
    const index = enumOptions(property).findIndex((option) => option.value === value);
    input.value = index < 0 ? "" : String(index);
  } else if (kind === "datetime") input.value = value ? toLocalInput(value) : "";
  else if (kind === "json") input.value = value === undefined ? "" : JSON.stringify(value, null, 2);
  else input.value = value ?? "";
}

function toLocalInput(iso) {
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return "";
  const local = new Date(date.getTime() - date.getTimezoneOffset() * 60000);
  return local.toISOString().slice(0, 16);
}

/** Check a value against the same rules without a form (the page uses it for agent proposals). */
export function checkValue(property, value) {
  const kind = kindOf(property);
  if (kind === "enum") return enumOptions(property).some((o) => o.value === value) ? null : "is not one of the options";
  if (kind === "integer" && !Number.isInteger(value)) return "must be a whole number";
  if (kind === "number" && typeof value !== "number") return "must be a number";
  if (kind === "text" && typeof value !== "string") return "must be text";
  if (kind === "boolean" && typeof value !== "boolean") return "must be true or false";
  const problem = check(kind, property, value);
  return problem ? problem.replace(/\.$/, "").replace(/^Must/, "must").replace(/^Enter/, "needs") : null;
}
