// Tiny DOM helpers: no framework, just elements.

/**
 * Create an element. `attrs` keys starting with "on" add listeners; null/false values are skipped.
 * `children` may be a string, a node, null, or a (nested) array of those.
 */
export function h(tag, attrs = {}, children = []) {
  const element = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs ?? {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") element.addEventListener(key.slice(2), value);
    else if (key === "class") element.className = value;
    else if (key === "text") element.textContent = value;
    else element.setAttribute(key, value === true ? "" : String(value));
  }
  append(element, children);
  return element;
}

function append(element, children) {
  if (children === null || children === undefined || children === false) return;
  if (Array.isArray(children)) {
    for (const child of children) append(element, child);
  } else {
    element.append(children instanceof Node ? children : String(children));
  }
}

/** JSON for people: compact, on one (wrapping) line. Strings that are not JSON stay as they are. */
export function pretty(value) {
  if (typeof value === "string") {
    try {
      value = JSON.parse(value);
    } catch {
      return value;
    }
  }
  return JSON.stringify(value, null, 1)?.replace(/\n\s*/g, " ") ?? String(value);
}
