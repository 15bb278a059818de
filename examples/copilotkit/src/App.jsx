// CopilotKit's chat in front of the AG-UI adapter. The runtime (server.mjs) forwards each run to the adapter;
// the page declares three kinds of tool help with CopilotKit's own hooks:
//   - navigate and show_toast run here in the browser and return their result (useFrontendTool);
//   - confirm_action shows a card and waits for the person (useHumanInTheLoop);
//   - the server's refund_order approval arrives as an AG-UI interrupt, answered with a resume (useInterrupt).
// The thread id is in the URL (?thread=...): a reload opens the chat on the same thread, and CopilotKit asks the
// runtime for it (its runner reads it from the adapter: the messages, an open approval, a run still going).

import {
  CopilotChat,
  CopilotKitProvider,
  useAgent,
  useFrontendTool,
  useHumanInTheLoop,
  useInterrupt,
} from "@copilotkit/react-core/v2";
import "@copilotkit/react-core/v2/styles.css";
import { useState } from "react";
import { z } from "zod";

import "./app.css";

const PAGES = ["form", "orders", "settings"];

export function App() {
  const [threadId] = useState(threadInUrl);
  return (
    <CopilotKitProvider runtimeUrl="/api/copilotkit" enableInspector={false}>
      <Workspace threadId={threadId} />
    </CopilotKitProvider>
  );
}

/** The URL's ?thread=, or a new thread id written into the URL (replacing the entry, so Back still leaves). */
function threadInUrl() {
  const url = new URL(window.location.href);
  if (!url.searchParams.get("thread")) {
    url.searchParams.set("thread", crypto.randomUUID());
    window.history.replaceState(null, "", url);
  }
  return url.searchParams.get("thread");
}

function Workspace({ threadId }) {
  const [page, setPage] = useState("orders");
  const [toasts, setToasts] = useState([]);

  useFrontendTool({
    name: "navigate",
    description: `Open a page of the app beside the chat. Pages: ${PAGES.join(", ")}.`,
    parameters: z.object({ page: z.string().describe(`One of: ${PAGES.join(", ")}`) }),
    handler: async ({ page: wanted }) => {
      const name = String(wanted).toLowerCase();
      if (!PAGES.includes(name)) return { opened: null, error: `no page called ${wanted}`, pages: PAGES };
      setPage(name);
      return { opened: name };
    },
  });

  useFrontendTool({
    name: "show_toast",
    description: "Show a short notification to the user.",
    parameters: z.object({ message: z.string() }),
    handler: async ({ message }) => {
      setToasts((shown) => [...shown, message]);
      return { shown: true };
    },
  });

  useHumanInTheLoop({
    name: "confirm_action",
    description: "Ask the user to confirm an action before it happens. Answers {confirmed: true|false}.",
    parameters: z.object({ action: z.string() }),
    render: ConfirmCard,
  });

  useInterrupt({ render: (props) => <InterruptCard {...props} /> });

  return (
    <main className="workspace">
      <section className="app-pane" aria-label="The app">
        <nav aria-label="Pages">
          {PAGES.map((name) => (
            <button key={name} aria-current={name === page ? "page" : undefined} onClick={() => setPage(name)}>
              {name}
            </button>
          ))}
        </nav>
        <h1 data-testid="current-page">{page}</h1>
        <p className="hint">
          Try: “go to settings”, “toast: hello”, “confirm delete report.pdf”, “refund order A100”. Reload the page
          at any time: the conversation comes back. <a href="/">New conversation</a>
        </p>
        <ul className="toasts" aria-label="Notifications" data-testid="toasts">
          {toasts.map((text, index) => (
            <li key={index} role="status">
              {text}
            </li>
          ))}
        </ul>
      </section>
      <CopilotChat className="chat-pane" threadId={threadId} labels={{ chatInputPlaceholder: "Ask the agent…" }} />
    </main>
  );
}

/** confirm_action: the person's answer is the tool's result, {confirmed: true|false}. */
function ConfirmCard({ args, status, respond, result }) {
  return (
    <div className="card" data-testid="confirm-card">
      <p>
        Confirm: <strong>{args.action}</strong>?
      </p>
      {status === "executing" ? (
        <div className="actions">
          <button onClick={() => respond({ confirmed: true })}>Confirm</button>
          <button onClick={() => respond({ confirmed: false })}>Decline</button>
        </div>
      ) : (
        <p className="answer">{status === "complete" ? `Answered: ${result}` : "…"}</p>
      )}
    </div>
  );
}

/**
 * An AG-UI interrupt from the adapter, answered with a resume. A server tool's approval (its metadata names the
 * tool) is resumed with {approved: true|false}; this page renders no other kind (forms, questions), so it offers
 * to cancel them rather than leave the conversation stuck.
 */
function InterruptCard({ interrupt, resolve, cancel }) {
  const { agent } = useAgent();
  const [answered, setAnswered] = useState(false);
  const call = agent.messages
    .flatMap((message) => message.toolCalls ?? [])
    .find((toolCall) => toolCall.id === interrupt?.toolCallId);
  const answer = (respond) => {
    setAnswered(true);
    respond();
  };
  if (!interrupt?.metadata?.toolName) {
    return (
      <div className="card" data-testid="interrupt-card">
        <p>{interrupt?.message ?? "The agent is waiting for an answer this page cannot give."}</p>
        <button disabled={answered} onClick={() => answer(() => cancel())}>
          Cancel
        </button>
      </div>
    );
  }
  return (
    <div className="card" data-testid="approval-card">
      <p>{interrupt.message}</p>
      {call && <pre>{call.function.arguments}</pre>}
      <div className="actions">
        <button disabled={answered} onClick={() => answer(() => resolve({ approved: true }))}>
          Approve
        </button>
        <button disabled={answered} onClick={() => answer(() => resolve({ approved: false }))}>
          Reject
        </button>
      </div>
    </div>
  );
}
