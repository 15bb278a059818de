// The demo page: a chat with the agent on the left, the app (form draft, orders, settings) on the right.
//
//   send message -> run -> events update the conversation -> RUN_FINISHED
//     outcome "interrupt": one card per interrupt; the page runs its own tools at once, a person
//     answers the rest; once every interrupt has an answer, ONE resume run carries them all.
//     success with pendingToolCallIds (the adapter's default, AG-UI 1.0 FE-2): the same cards, one per
//     pending call; once each has an answer, ONE run carries them as ToolMessages in its messages.
//
//   reload: the thread id and, while a run streams, its id, the last event id shown and what was shown are in
//     localStorage (the origin's, so any replica behind it will do); the page reads the thread once, draws it with
//     what waits in it, and reads the run's events after that id until the run ends (no event twice).

import {
  AguiHttpError,
  AguiUnreachable,
  getCapabilities,
  getThread,
  newId,
  reattach,
  runAgent,
  stopRun,
} from "./agui-client.js";
import { applyEvent, callArguments, findCall, resumed, sendable, unansweredCalls } from "./messages.js";
import { ChatView } from "./chat-view.js";
import { InterruptCard, isExpired, kindOf } from "./interrupts.js";
import { CLIENT_TOOLS, toolbox } from "./tools.js";
import { Draft } from "./form-draft.js";
import { draftPanel, setUpTabs, showPage, toast } from "./panel.js";
import { threadList } from "./thread-list.js";

const API = new URL("agui", document.baseURI).pathname;
const KEY = "agui-demo";
const $ = (selector) => document.querySelector(selector);

const state = {
  threadId: localStorage.getItem(`${KEY}:thread`) ?? newId("thread"),
  messages: [],
  notes: loadNotes(), // what the page said; those on how a run ended are kept, as the stored thread does not say it
  cards: new Map(), // by tool call id (or interrupt id when there is no call)
  pending: [], // the open interrupts of the last run: {interrupt, toolName, args, kind, card, entry}
  answerWith: "resume", // how `pending` is answered: "resume" entries, or "messages" (ToolMessages, for pending calls)
  running: false,
  run: null, // the run in flight: {runId, lastId (its last event id shown; 0: none yet), numbered, kept}
  serverTools: new Map(),
  ranWith: loadRanWith(), // by tool call id: the arguments a person approved with edits (the server keeps the proposal)
};
localStorage.setItem(`${KEY}:thread`, state.threadId);
// The server knows a thread once its first run started: until then there is nothing to restore (and no 404 to log).
const STARTED = `${KEY}:started:${state.threadId}`;
const RUN = `${KEY}:run:${state.threadId}`; // the run in flight, as last drawn: what a reload comes back to

const draft = new Draft(`${KEY}:draft:${state.threadId}`);
const tools = toolbox({ showPage, toast, draft });
const view = new ChatView($("#log"));
let refreshThreads = () => {}; // the conversations tab, once set up

// ---- rendering ----------------------------------------------------------------------------------

let frame = 0;
function render() {
  if (!frame) frame = requestAnimationFrame(renderNow);
}

function renderNow() {
  frame = 0;
  view.render(state);
  const waiting = state.pending.some((r) => !r.entry);
  const busy = state.running || state.pending.length > 0;
  $("#message").disabled = busy;
  $("#send").disabled = busy;
  $("#message").placeholder = waiting
    ? "Answer the request above first (or cancel it)."
    : state.running
      ? "The agent is working…"
      : "Message the agent…";
  for (const chip of document.querySelectorAll(".suggestions button")) chip.disabled = busy;
  $("#status").textContent = state.running ? "running" : waiting ? "waiting for you" : "idle";
  $("#status").dataset.state = state.running ? "running" : waiting ? "waiting" : "idle";
  $("#stop").hidden = !(state.running && state.run);
  keepRun();
}

/** Keep the run in flight as drawn: its last event id with the messages then, never one without the other. */
function keepRun() {
  const run = state.run;
  if (!run || run.kept === run.lastId) return;
  run.kept = run.lastId;
  const { runId, lastId, numbered } = run;
  localStorage.setItem(RUN, JSON.stringify({ runId, lastId, numbered, messages: state.messages }));
}

function loadRun() {
  try {
    const run = JSON.parse(localStorage.getItem(RUN) ?? "null");
    return run && typeof run.runId === "string" && Number.isInteger(run.lastId) ? run : null;
  } catch {
    return null;
  }
}

/** The run is over (or never started): nothing to come back to. */
function forgetRun() {
  state.run = null;
  localStorage.removeItem(RUN);
}

/** Say something in the conversation, after its last message; `kept`: it tells how a run ended, so it outlives a
 * reload (a stopped or failed run's answer, drawn again from the store, would look like a finished reply). */
function note(kind, text, code, { kept = false } = {}) {
  const after = state.messages.at(-1)?.id ?? null;
  state.notes.push({ id: newId("note"), after, kind, text, code, kept });
  if (kept) localStorage.setItem(notesKey(), JSON.stringify(state.notes.filter((n) => n.kept)));
  render();
}

function notesKey() {
  return `${KEY}:notes:${localStorage.getItem(`${KEY}:thread`)}`;
}

function loadNotes() {
  try {
    const kept = JSON.parse(localStorage.getItem(notesKey()) ?? "[]");
    return Array.isArray(kept) ? kept : [];
  } catch {
    return [];
  }
}

// ---- runs ---------------------------------------------------------------------------------------

async function send(text) {
  state.messages.push({ id: newId("user"), role: "user", content: text });
  localStorage.setItem(STARTED, "1");
  render();
  const outcome = await run({});
  await settle(outcome, { resuming: false });
  if (!$('[data-page="threads"]').hidden) refreshThreads(); // its title and time just changed
}

/**
 * One run: stream its events into the conversation; if the stream breaks, read the rest from wherever the run
 * goes on. Returns `{terminal, failure}`: the terminal event (or null), and why there is none: "unreachable"
 * (nothing was sent), "refused", or "broken".
 */
async function run(extra) {
  const input = {
    threadId: state.threadId,
    runId: newId("run"),
    protocolVersion: "1.0", // an AG-UI 1.0 client: it reads pendingToolCallIds and interrupts
    state: {},
    messages: sendable(state.messages),
    tools: CLIENT_TOOLS,
    context: [draft.context()],
    forwardedProps: {},
    ...extra,
  };
  state.run = { runId: input.runId, lastId: 0, numbered: true, kept: null };
  let outcome = await follow(() => runAgent(`${API}/`, input));
  if (outcome.failure === "refused" && !outcome.terminal) forgetRun(); // refused before it started
  if (outcome.failure === "broken" && state.run?.numbered) {
    const rest = await follow(() => reattach(API, state.threadId, state.run.runId, state.run.lastId)); // it goes on
    if (rest.terminal || rest.failure === "broken") outcome = rest;
  }
  report(outcome, { sending: true });
  return outcome;
}

/**
 * Read a run's frames into the conversation until its terminal event, keeping its last event id (`whole`: see
 * `applyEvent`). Returns `{terminal, failure, error}`: the terminal event (or null), and why there is none:
 * "unreachable", "refused" (an HTTP refusal, or RUN_ERROR), "broken", or "gone" (nothing is left to read of it).
 */
async function follow(open, whole) {
  state.running = true;
  render();
  let terminal = null;
  let failure = null;
  let error = null;
  try {
    const frames = await open();
    for await (const { id, event } of frames ?? []) {
      if (state.run && id === null) state.run.numbered = false;
      if (state.run && id !== null) state.run.lastId = id;
      if (event.type === "RUN_FINISHED" || event.type === "RUN_ERROR") {
        terminal = event;
        forgetRun();
      } else applyEvent(state.messages, event, whole);
      render();
    }
    if (frames === null) failure = "gone";
    else if (terminal?.type === "RUN_ERROR") failure = "refused";
    else if (!terminal) failure = "broken";
  } catch (caught) {
    error = caught;
    failure = caught instanceof AguiUnreachable ? "unreachable" : "broken";
    if (caught instanceof AguiHttpError) failure = "refused";
  } finally {
    state.running = false;
    render();
  }
  return { terminal, failure, error };
}

/** A note saying why a run has no end the page saw (`sending`: the page had just sent its input). */
function report({ terminal, failure, error }, { sending = false } = {}) {
  if (terminal?.type === "RUN_ERROR") {
    note("error", terminal.message || "The run failed.", terminal.code ?? "RUN_ERROR", { kept: true });
  } else if (failure === "unreachable") {
    const unsent = sending && !state.run?.lastId ? " Nothing was sent." : "";
    note("error", `The server could not be reached (${error.message}).${unsent}`, error.code);
  } else if (failure === "refused") {
    note("error", `${error.message} (HTTP ${error.status})`, error.code);
  } else if (failure === "broken" && error) {
    note("error", `The connection broke during the run: ${error.message}`, "NETWORK_ERROR");
  } else if (failure === "broken" || failure === "gone") {
    note("error", "The stream ended before the run finished.", "STREAM_ENDED");
  }
}

async function stop() {
  const run = state.run;
  if (!run) return;
  $("#stop").disabled = true;
  try {
    await stopRun(API, state.threadId, run.runId);
  } catch (error) {
    note("error", `Could not stop the run: ${error.message}`, error.code);
  } finally {
    $("#stop").disabled = false;
  }
}

async function settle({ terminal, failure }, { resuming }) {
  if (terminal?.type !== "RUN_FINISHED") {
    if (resuming && failure === "unreachable") askAgain(UNSENT);
    else if (resuming) await afterFailedResume(failure);
    return;
  }
  if (resuming) closeBatch();
  const outcome = terminal.outcome ?? { type: "success" };
  if (outcome.type === "interrupt") openBatch(outcome.interrupts ?? []);
  else if (outcome.pendingToolCallIds?.length) openBatch(outcome.pendingToolCallIds.map(asInterrupt), "messages");
  else if (outcome.type === "cancelled") {
    note("info", "The agent stopped before it finished (cancelled).", undefined, { kept: true });
  }
}

// ---- interrupts ---------------------------------------------------------------------------------

/** A pending call as the card of an interrupt about it; its answer becomes a ToolMessage, not a resume entry. */
function asInterrupt(toolCallId) {
  return { id: toolCallId, toolCallId, reason: "tool_call" };
}

function openBatch(interrupts, answerWith = "resume") {
  const saved = loadAnswers();
  state.answerWith = answerWith;
  state.pending = interrupts.map((interrupt) => {
    const call = findCall(state.messages, interrupt.toolCallId);
    const callName = call?.function?.name;
    const record = {
      interrupt,
      toolName: interrupt.metadata?.toolName ?? callName,
      args: callArguments(call),
      kind: kindOf(interrupt, callName),
      entry: null,
    };
    record.card = new InterruptCard(record, {
      toolParameters: (name) => state.serverTools.get(name),
      onAnswer: (entry, summary) => answered(record, entry, summary),
    });
    state.cards.set(interrupt.toolCallId ?? interrupt.id, record.card);
    return record;
  });
  for (const record of state.pending) {
    const previous = saved[record.interrupt.id];
    if (previous) record.card.answered(previous.entry, previous.summary); // never run a tool twice
    else if (record.kind === "automatic" && !isExpired(record.interrupt)) runPageTool(record);
  }
  render();
}

function runPageTool(record) {
  let result;
  try {
    result = tools.run(record.toolName, record.args);
  } catch (error) {
    result = { error: String(error.message ?? error) };
  }
  record.card.resolve(result, `Done in this page; the result goes back to the agent.`);
}

function answered(record, entry, summary) {
  record.entry = entry;
  saveAnswers({ ...loadAnswers(), [entry.interruptId]: { entry, summary } });
  const waiting = state.pending.filter((r) => !r.entry).length;
  for (const r of state.pending) if (r.entry) r.card.waiting(waiting);
  render();
  if (waiting === 0 && !state.running) resume();
}

async function resume() {
  if (state.answerWith === "messages") {
    state.messages.push(...state.pending.map(toolMessage));
    const outcome = await run({});
    await settle(outcome, { resuming: true });
    return;
  }
  const entries = state.pending.map((record) => record.entry);
  const outcome = await run({ resume: entries });
  await settle(outcome, { resuming: true });
}

/** The ToolMessage that answers a pending call: the page's result, or the person's cancellation. */
function toolMessage({ interrupt, toolName, entry }) {
  const message = { id: `tool_${interrupt.toolCallId}`, role: "tool", toolCallId: interrupt.toolCallId };
  if (entry.status === "cancelled") return { ...message, content: `The user cancelled ${toolName}; it was not executed.`, error: "cancelled" };
  return { ...message, content: JSON.stringify(entry.payload ?? null) };
}

function closeBatch() {
  for (const record of state.pending) {
    const edited = record.entry?.payload?.editedArgs;
    if (edited && record.interrupt.toolCallId) state.ranWith[record.interrupt.toolCallId] = edited;
    record.card.done();
    // the call's result row says it all once the agent has it; other cards stay as a record of the answer
    if (record.kind === "automatic") state.cards.delete(record.interrupt.toolCallId ?? record.interrupt.id);
  }
  state.pending = [];
  state.answerWith = "resume";
  saveAnswers({});
  localStorage.setItem(`${KEY}:ran:${state.threadId}`, JSON.stringify(state.ranWith));
}

const UNSENT = "The server could not be reached, so these answers were not sent. Answer again once it is back, or cancel.";
const NOTICES = {
  refused: "The server did not accept these answers (see the error below). Answer again or cancel.",
  broken: "The connection broke before the server confirmed these answers. Answer again or cancel.",
};

/** A resume failed after reaching the server: the stored thread says whether the interrupts still wait. */
async function afterFailedResume(failure) {
  let thread = null;
  try {
    thread = await getThread(API, state.threadId);
  } catch (error) {
    note("error", `Could not reload the thread: ${error.message}`, error.code);
  }
  const open = new Set((thread?.interrupts ?? []).map((i) => i.id));
  if (state.answerWith === "messages") {
    // the answers were ToolMessages: a call is still open unless the stored thread holds its answer
    const stored = new Set((thread?.messages ?? []).filter((m) => m.role === "tool").map((m) => m.toolCallId));
    for (const record of state.pending) if (!stored.has(record.interrupt.toolCallId)) open.add(record.interrupt.id);
  }
  if (thread && !state.pending.some((r) => open.has(r.interrupt.id))) {
    closeBatch();
    state.messages = thread.messages;
    render();
    return;
  }
  askAgain(NOTICES[failure] ?? NOTICES.refused);
}

/** Open the cards again, with `notice` saying why. */
function askAgain(notice) {
  saveAnswers({});
  if (state.answerWith === "messages") {
    const calls = new Set(state.pending.map((record) => record.interrupt.toolCallId)); // their answers were not taken
    state.messages = state.messages.filter((m) => !(m.role === "tool" && calls.has(m.toolCallId)));
  }
  for (const record of state.pending) {
    record.entry = null;
    record.card.open(notice);
  }
  render();
}

function loadAnswers() {
  try {
    return JSON.parse(localStorage.getItem(`${KEY}:answers:${state.threadId}`) ?? "{}");
  } catch {
    return {};
  }
}

function saveAnswers(answers) {
  localStorage.setItem(`${KEY}:answers:${state.threadId}`, JSON.stringify(answers));
}

function loadRanWith() {
  try {
    return JSON.parse(localStorage.getItem(`${KEY}:ran:${localStorage.getItem(`${KEY}:thread`)}`) ?? "{}");
  } catch {
    return {};
  }
}

// ---- start-up -----------------------------------------------------------------------------------

/** Draw the thread again after a reload, from one read; then come back to the run that was streaming, if any. */
async function restore() {
  try {
    const capabilities = await getCapabilities(API);
    for (const spec of capabilities.tools?.items ?? []) state.serverTools.set(spec.name, spec.parameters);
  } catch {
    // editing falls back to a JSON textarea
  }
  const thread = localStorage.getItem(STARTED) ? await readThread() : null;
  const run = loadRun();
  state.messages = resumed(thread?.messages ?? [], run?.messages ?? []);
  if (!run) return reopen(thread);
  state.run = { ...run, kept: run.lastId };
  if (run.numbered === false) return catchUp(); // its events had no ids: none to start again after
  const whole = new Set((thread?.messages ?? []).map((m) => m.id)); // the store holds these complete
  const outcome = await follow(() => reattach(API, state.threadId, run.runId, run.lastId), whole);
  if (outcome.terminal?.type === "RUN_FINISHED") return settle(outcome, { resuming: false });
  if (outcome.failure === "gone" || outcome.terminal) return catchUp(outcome);
  report(outcome);
}

/** The run ended without this page seeing all of it: the stored thread says what it left, and what waits. */
async function catchUp(outcome) {
  forgetRun();
  if (outcome?.terminal) report(outcome);
  const thread = await readThread();
  if (thread) state.messages = resumed(thread.messages ?? [], state.messages);
  reopen(thread);
}

async function readThread() {
  try {
    return await getThread(API, state.threadId);
  } catch (error) {
    note("error", `Could not load the conversation: ${error.message}`, error.code ?? "NETWORK_ERROR");
    return null;
  }
}

/** Open the cards of what waits in the stored thread: its interrupts, or the page's calls it left unanswered. */
function reopen(thread) {
  if (thread?.interrupts?.length) openBatch(thread.interrupts);
  else if (thread) {
    const clientTools = new Set(CLIENT_TOOLS.map((t) => t.name));
    const open = unansweredCalls(state.messages).filter((call) => clientTools.has(call.function?.name));
    if (open.length) openBatch(open.map((call) => asInterrupt(call.id)), "messages"); // calls left pending
  }
  render();
}

function submitted({ values, version }) {
  const region = { Beijing: "北京", Shanghai: "上海", Guangzhou: "广州" }[values.region] ?? values.region;
  send(`确认提交：数量 ${values.quantity}，地域 ${region}，用途 ${values.purpose}（第 ${version} 版）`);
}

function setUp() {
  setUpTabs();
  draftPanel($("#draft"), draft, { onSubmit: submitted, canSubmit: () => !state.running && !state.pending.length });
  $("#thread").textContent = state.threadId;
  $("#composer").addEventListener("submit", (event) => {
    event.preventDefault();
    const text = $("#message").value.trim();
    if (!text || state.running || state.pending.length) return;
    $("#message").value = "";
    send(text);
  });
  $("#message").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      $("#composer").requestSubmit();
    }
  });
  for (const chip of document.querySelectorAll(".suggestions button")) {
    chip.addEventListener("click", () => !state.running && !state.pending.length && send(chip.textContent.trim()));
  }
  $("#new-thread").addEventListener("click", newThread);
  $("#stop").addEventListener("click", stop);
  refreshThreads = threadList($("#threads"), {
    base: API,
    current: state.threadId,
    open: (threadId) => {
      localStorage.setItem(`${KEY}:thread`, threadId);
      localStorage.setItem(`${KEY}:started:${threadId}`, "1");
      location.reload();
    },
    forgotten: newThread,
  });
  document.querySelector('.tabs [data-tab="threads"]').addEventListener("click", () => refreshThreads());
  showPage("form");
  restore();
}

function newThread() {
  localStorage.removeItem(`${KEY}:thread`);
  location.reload();
}

setUp();
