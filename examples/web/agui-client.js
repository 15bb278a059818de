// A small AG-UI client: POST a RunAgentInput, read the text/event-stream answer as events.
// No dependencies: fetch, a ReadableStream reader and an SSE frame parser.

/** A refusal before any stream opened: the server's `{"error": {code, message, details?}}` body. */
export class AguiHttpError extends Error {
  constructor(status, code, message, details) {
    super(message);
    this.name = "AguiHttpError";
    this.status = status;
    this.code = code;
    this.details = details;
  }
}

/** The request never reached the server (offline, server down, connection refused): nothing was sent. */
export class AguiUnreachable extends Error {
  constructor(cause) {
    super(cause?.message ?? String(cause));
    this.name = "AguiUnreachable";
    this.code = "NETWORK_ERROR";
  }
}

/** Run the agent once and yield each AG-UI event as it arrives. */
export async function* runAgent(endpoint, input, { signal } = {}) {
  let response;
  try {
    response = await fetch(endpoint, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "text/event-stream" },
      body: JSON.stringify(input),
      signal,
    });
  } catch (error) {
    throw new AguiUnreachable(error);
  }
  if (!response.ok) throw await httpError(response);
  if (!response.body) throw new AguiHttpError(response.status, "NO_BODY", "The server sent no event stream.");
  yield* readEvents(response.body);
}

/**
 * Parse an SSE byte stream: frames end with a blank line, `data:` lines carry JSON, `:` lines are comments.
 * Linear in the bytes, as the adapter's own reader is: the unfinished frame is kept in pieces, joined once
 * when it ends, and only the text that just arrived is searched for an end.
 */
export async function* readEvents(body) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let pieces = []; // the unfinished frame
  let endsInLF = false; // whether it ends with the first LF of a blank line to come
  let afterCR = false; // a CRLF may be cut between two chunks
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      const raw = afterCR && value.startsWith("\n") ? value.slice(1) : value;
      afterCR = raw.endsWith("\r");
      const text = raw.replace(/\r\n?/g, "\n");
      let start = 0;
      if (endsInLF && text.startsWith("\n")) {
        const event = parseFrame(pieces.join("").slice(0, -1));
        pieces = [];
        start = 1;
        if (event !== null) yield event;
      }
      let end;
      while ((end = text.indexOf("\n\n", start)) >= 0) {
        const event = parseFrame(pieces.join("") + text.slice(start, end));
        pieces = [];
        start = end + 2;
        if (event !== null) yield event;
      }
      const rest = text.slice(start);
      if (rest) pieces.push(rest);
      endsInLF = rest ? rest.endsWith("\n") : start === 0 && endsInLF;
    }
    const last = parseFrame(pieces.join(""));
    if (last !== null) yield last;
  } finally {
    reader.cancel().catch(() => {});
  }
}

/** One SSE frame to its event, or null for a frame without data (a keep-alive comment). */
export function parseFrame(frame) {
  const data = [];
  for (const line of frame.split("\n")) {
    if (line === "" || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "data") data.push(value);
  }
  return data.length ? JSON.parse(data.join("\n")) : null;
}

/** The stored thread `{threadId, messages, interrupts}`, or null when the server does not know it. */
export async function getThread(base, threadId) {
  const response = await fetch(`${base}/threads/${encodeURIComponent(threadId)}`);
  if (response.status === 404) return null;
  if (!response.ok) throw await httpError(response);
  return response.json();
}

/** The agent's declared capabilities (its own tools are in `tools.items`). */
export async function getCapabilities(base) {
  const response = await fetch(`${base}/capabilities`);
  if (!response.ok) throw await httpError(response);
  return response.json();
}

async function httpError(response) {
  let body = null;
  try {
    body = await response.json();
  } catch {
    // not JSON: fall back to the status line below
  }
  const error = body && typeof body === "object" ? body.error : null;
  if (error && typeof error === "object") {
    return new AguiHttpError(response.status, error.code ?? "HTTP_ERROR", error.message ?? "", error.details);
  }
  return new AguiHttpError(response.status, `HTTP_${response.status}`, response.statusText || "Request failed");
}

/** A random id; `crypto.randomUUID` needs a secure context, which 127.0.0.1 is. */
export function newId(prefix = "") {
  const uuid = globalThis.crypto?.randomUUID
    ? crypto.randomUUID()
    : `${Date.now().toString(16)}-${Math.random().toString(16).slice(2)}`;
  return prefix ? `${prefix}_${uuid}` : uuid;
}
