// A small AG-UI client: POST a RunAgentInput, read the text/event-stream answer as events; come back to a run
// (its events after the last id read), stop it, and list, rename and delete threads.
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

/** Run the agent once and yield each frame `{id, event}` as it arrives (`id`: the SSE `id:`, a number, or null). */
export async function* runAgent(endpoint, input, { signal } = {}) {
  const response = await reach(endpoint, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "text/event-stream" },
    body: JSON.stringify(input),
    signal,
  });
  if (!response.ok) throw await httpError(response);
  yield* readFrames(stream(response));
}

/**
 * Come back to a run: its frames after the one whose id is `lastId` (0: all of them), then the live ones until its
 * end, from whichever replica answers. Null when nothing is left to read: the run ended after `lastId` (204), or the
 * server has no such run (404).
 */
export async function reattach(base, threadId, runId, lastId, { signal } = {}) {
  const url = `${threadUrl(base, threadId)}/runs/${encodeURIComponent(runId)}/events`;
  const headers = { accept: "text/event-stream", "last-event-id": String(lastId) };
  const response = await reach(url, { headers, signal });
  if (response.status === 204 || response.status === 404) return null;
  if (!response.ok) throw await httpError(response);
  return readFrames(stream(response));
}

/** Ask a run to stop, wherever it runs; it ends with RUN_FINISHED, outcome "cancelled". */
export async function stopRun(base, threadId, runId) {
  const url = `${threadUrl(base, threadId)}/runs/${encodeURIComponent(runId)}/stop`;
  const response = await reach(url, { method: "POST" });
  if (!response.ok) throw await httpError(response);
  return response.json();
}

/** The caller's threads, newest first: `{threads: [{threadId, title, updatedAt, interrupts}], next}`. */
export async function listThreads(base) {
  const response = await reach(`${base}/threads?limit=20`, {});
  if (!response.ok) throw await httpError(response);
  return response.json();
}

/** Set a thread's title (null clears it). */
export async function renameThread(base, threadId, title) {
  const init = { method: "PATCH", headers: { "content-type": "application/json" }, body: JSON.stringify({ title }) };
  const response = await reach(threadUrl(base, threadId), init);
  if (!response.ok) throw await httpError(response);
  return response.json();
}

/** Delete a thread, its messages, its open turn and its runs. */
export async function deleteThread(base, threadId) {
  const response = await reach(threadUrl(base, threadId), { method: "DELETE" });
  if (!response.ok && response.status !== 404) throw await httpError(response);
}

/** Revoke the thread's grant of `tool` ("always allow in this chat"): its next call asks again. */
export async function revokeGrant(base, threadId, tool) {
  const response = await reach(`${threadUrl(base, threadId)}/grants/${encodeURIComponent(tool)}`, { method: "DELETE" });
  if (!response.ok) throw await httpError(response);
}

async function reach(url, init) {
  try {
    return await fetch(url, init);
  } catch (error) {
    throw new AguiUnreachable(error);
  }
}

function stream(response) {
  if (!response.body) throw new AguiHttpError(response.status, "NO_BODY", "The server sent no event stream.");
  return response.body;
}

function threadUrl(base, threadId) {
  return `${base}/threads/${encodeURIComponent(threadId)}`;
}

/** The AG-UI events of an SSE byte stream, without their ids. */
export async function* readEvents(body) {
  for await (const frame of readFrames(body)) yield frame.event;
}

/**
 * Parse an SSE byte stream into frames `{id, event}`: frames end with a blank line, `data:` lines carry JSON, `id:`
 * the event's number in the run's journal, `:` lines are comments. Linear in the bytes, as the adapter's own reader
 * is: the unfinished frame is kept in pieces, joined once when it ends, and only the text that just arrived is
 * searched for an end.
 */
export async function* readFrames(body) {
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
        const frame = parseFrame(pieces.join("").slice(0, -1));
        pieces = [];
        start = 1;
        if (frame !== null) yield frame;
      }
      let end;
      while ((end = text.indexOf("\n\n", start)) >= 0) {
        const frame = parseFrame(pieces.join("") + text.slice(start, end));
        pieces = [];
        start = end + 2;
        if (frame !== null) yield frame;
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

/**
 * One SSE frame to `{id, event}`, or null for a frame without data (a keep-alive comment). `id` is null for a frame
 * without one: an event outside the run's journal (a dead replica's RUN_INTERRUPTED), or a server without journals.
 */
export function parseFrame(frame) {
  const data = [];
  let id = null;
  for (const line of frame.split("\n")) {
    if (line === "" || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "data") data.push(value);
    else if (field === "id" && /^\d+$/.test(value)) id = Number(value);
  }
  return data.length ? { id, event: JSON.parse(data.join("\n")) } : null;
}

/** The stored thread `{threadId, messages, interrupts, grants}`, or null when the server does not know it. */
export async function getThread(base, threadId) {
  const response = await reach(threadUrl(base, threadId), {});
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
