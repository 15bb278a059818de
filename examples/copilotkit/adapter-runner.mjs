// A CopilotKit AgentRunner that keeps no conversation of its own: the AG-UI adapter's store is the record.
//
// CopilotKit's runtime sends each run to `runner.run()` and, when a page opens a chat on a known thread (a
// <CopilotChat threadId> mounts), asks `runner.connect({ threadId })` for the thread's events. Its default,
// InMemoryAgentRunner, answers from a copy of every event in the runtime's memory, which a restart loses. This
// runner answers from the adapter instead:
//   - the messages and the open interrupts: GET {agent}threads/{threadId};
//   - a run the page left while it was going: GET {agent}threads/{threadId}/runs/{runId}/events, the adapter's
//     journal of the run, followed until its terminal event (and resumed with Last-Event-ID if that stream is cut);
//   - a stop: POST {agent}threads/{threadId}/runs/{runId}/stop, which ends the run in the adapter, wherever it runs.
// What it remembers is the run of each thread it started and did not see end (its id and input), to reattach to it.

import { randomUUID } from "@ag-ui/client";
import { AgentRunner } from "@copilotkit/runtime/v2";
import { Observable } from "rxjs";

const TERMINAL = new Set(["RUN_FINISHED", "RUN_ERROR"]);
const MAX_OPEN_RUNS = 1000; // threads whose last run this runtime may reattach to; the oldest is forgotten first
const MAX_EARLY_ENDS = 3; // a run's event stream that ends this many times in a row with nothing new is an error

export class AdapterRunner extends AgentRunner {
  #base;
  #fetch;
  #open = new Map(); // threadId -> {runId, pageRunId, messages, headers, agent}: a run started here, its end unseen

  /** `url` is the adapter's mount, the URL the runtime's HttpAgent posts runs to. */
  constructor({ url, fetch: fetchImpl = globalThis.fetch }) {
    super();
    this.#base = url.endsWith("/") ? url : `${url}/`;
    this.#fetch = fetchImpl;
  }

  /**
   * Run on the adapter through the runtime's agent (its middlewares and checks apply), as InMemoryAgentRunner does.
   * When the page leaves before the end, the runtime stops reading and the adapter goes on with the run; connect()
   * reattaches to it. A resume goes upstream under a run id of its own: CopilotKit's useInterrupt sends it with the
   * interrupted run's id, and the adapter keeps one journal per run id (a second run under it could not be followed).
   */
  run({ threadId, agent, input }) {
    const runId = input.resume?.length ? randomUUID() : input.runId;
    const open = { runId, pageRunId: input.runId, messages: input.messages, headers: { ...agent.headers }, agent };
    return new Observable((subscriber) => {
      this.#remember(threadId, open);
      let ended = false;
      const onEvent = ({ event }) => {
        ended ||= TERMINAL.has(event.type);
        subscriber.next(event.runId === runId ? { ...event, runId: input.runId } : event);
      };
      agent.runAgent({ ...input, runId }, { onEvent }).then(
        () => subscriber.complete(),
        (error) => {
          if (!ended) subscriber.next({ type: "RUN_ERROR", message: `the adapter could not be reached: ${error}` });
          subscriber.complete();
        },
      );
      return () => {
        if (ended) this.#forget(threadId, open);
        else agent.abortRun(); // the page left: only the adapter goes on
      };
    });
  }

  /** The thread as the adapter has it, then the rest of a run of it still going, then what the thread waits for. */
  connect({ threadId, headers = {} }) {
    return new Observable((subscriber) => {
      const leave = new AbortController();
      this.#restore(threadId, headers, leave.signal, (event) => subscriber.next(event)).then(
        () => subscriber.complete(),
        (error) => leave.signal.aborted || subscriber.error(error),
      );
      return () => leave.abort();
    });
  }

  isRunning({ threadId }) {
    return Promise.resolve(this.#open.has(threadId));
  }

  /**
   * Stop the thread's run in the adapter. The runtime leaves it first: @ag-ui/client 0.0.x cannot parse the
   * `cancelled` outcome a stopped run ends with.
   */
  async stop({ threadId, runId }) {
    const open = this.#open.get(threadId);
    if (!open || (runId !== undefined && runId !== open.pageRunId)) return false;
    this.#forget(threadId, open);
    open.agent.abortRun();
    const response = await this.#fetch(this.#url(threadId, "runs", open.runId, "stop"), {
      method: "POST",
      headers: open.headers,
    });
    return response.ok && (await response.json()).stopping === true;
  }

  async #restore(threadId, headers, signal, emit) {
    let thread = await this.#thread(threadId, headers, signal);
    if (thread === null) return; // a thread the adapter does not know (or will not show this caller): a new chat
    const runId = randomUUID();
    const open = this.#open.get(threadId);
    // The adapter stores a run's messages when the run saves, so the input of a run still going comes from here.
    const messages = open ? union(thread.messages, open.messages) : thread.messages;
    emit({ type: "RUN_STARTED", threadId, runId });
    emit({ type: "MESSAGES_SNAPSHOT", messages });
    if (open) {
      const shown = shownIn(messages);
      const end = await this.#follow(threadId, open.runId, headers, signal, (event) => {
        if (!repeats(event, shown)) emit(event);
      });
      this.#forget(threadId, open);
      if (end?.type === "RUN_ERROR") return emit(end);
      thread = (await this.#thread(threadId, headers, signal)) ?? thread; // what it waits for now, after that run
    }
    emit(
      thread.interrupts.length > 0
        ? { type: "RUN_FINISHED", threadId, runId, outcome: { type: "interrupt", interrupts: thread.interrupts } }
        : { type: "RUN_FINISHED", threadId, runId },
    );
  }

  /** GET /threads/{threadId}: `{messages, interrupts}`, or null for a 404. */
  async #thread(threadId, headers, signal) {
    const response = await this.#fetch(this.#url(threadId), { headers, signal });
    if (response.status === 404) return null;
    if (!response.ok) throw new Error(`GET ${response.url}: ${response.status} ${await response.text()}`);
    return response.json();
  }

  /**
   * Emit the run's journaled events but its terminal one, which it returns (null: no journal, or it ended with
   * nothing after the last id seen). A stream that ends before the run does is read again after the last id seen.
   */
  async #follow(threadId, runId, headers, signal, emit) {
    let last = 0;
    for (let early = 0; early < MAX_EARLY_ENDS; ) {
      const response = await this.#fetch(this.#url(threadId, "runs", runId, "events"), {
        headers: { ...headers, accept: "text/event-stream", ...(last > 0 && { "last-event-id": String(last) }) },
        signal,
      });
      if (response.status === 204 || response.status === 404) return null;
      if (!response.ok) throw new Error(`GET ${response.url}: ${response.status} ${await response.text()}`);
      const before = last;
      for await (const { id, event } of sseEvents(response.body)) {
        if (TERMINAL.has(event.type)) return event;
        last = id ?? last;
        emit(event);
      }
      early = last === before ? early + 1 : 0;
    }
    throw new Error(`the adapter's stream of run ${runId} ended ${MAX_EARLY_ENDS} times before the run did`);
  }

  #url(threadId, ...rest) {
    return new URL(["threads", threadId, ...rest].map(encodeURIComponent).join("/"), this.#base).href;
  }

  #remember(threadId, open) {
    this.#open.delete(threadId); // re-inserted last: Map order is then oldest first
    this.#open.set(threadId, open);
    if (this.#open.size > MAX_OPEN_RUNS) this.#open.delete(this.#open.keys().next().value);
  }

  #forget(threadId, open) {
    if (this.#open.get(threadId) === open) this.#open.delete(threadId);
  }
}

/** `stored`, then the messages of `input` it does not hold, in their order. */
function union(stored, input) {
  const ids = new Set(stored.map((message) => message.id));
  return [...stored, ...input.filter((message) => !ids.has(message.id))];
}

/** The ids a MESSAGES_SNAPSHOT of `messages` already shows: messages, tool calls, and calls that have an answer. */
function shownIn(messages) {
  const shown = new Set();
  for (const message of messages) {
    shown.add(message.id);
    for (const call of message.toolCalls ?? []) shown.add(call.id);
    if (message.role === "tool") shown.add(`answer:${message.toolCallId}`);
  }
  return shown;
}

/** Whether a replayed event would add again what the snapshot shows (a text delta twice, a call twice). */
function repeats(event, shown) {
  if (event.type === "RUN_STARTED") return true; // the connect stream is one run, with a RUN_STARTED of its own
  if (event.type === "TOOL_CALL_RESULT") return shown.has(event.messageId) || shown.has(`answer:${event.toolCallId}`);
  if (event.type.startsWith("TOOL_CALL_")) return shown.has(event.toolCallId);
  return event.messageId !== undefined && shown.has(event.messageId);
}

/** `{id, event}` for each `data:` frame of an SSE body (`id` null when the frame has none); comments skipped. */
async function* sseEvents(body) {
  const decoder = new TextDecoder();
  let rest = "";
  for await (const chunk of body) {
    rest += decoder.decode(chunk, { stream: true });
    let cut;
    while ((cut = rest.indexOf("\n\n")) >= 0) {
      const lines = rest.slice(0, cut).split("\n");
      rest = rest.slice(cut + 2);
      const id = lines.find((line) => line.startsWith("id:"))?.slice(3).trim();
      const data = lines.filter((line) => line.startsWith("data:")).map((line) => line.slice(5).replace(/^ /, ""));
      if (data.length > 0) yield { id: id ? Number(id) : null, event: JSON.parse(data.join("\n")) };
    }
  }
}
