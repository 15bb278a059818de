// Folds event streams with @ag-ui/client 1.0's own apply step, for tests/clients/test_client_reasoning.py.
// Usage: node fold-events.mjs < threads.json: a list of threads, each a list of runs, each a list of wire events.
// Prints, for each thread, its messages after each run, as JSON.

import { AbstractAgent } from "@ag-ui/client";
import { from } from "rxjs";

/** An agent whose run replays the events it is given. */
class Replay extends AbstractAgent {
  constructor(events, messages) {
    super({ threadId: "t1", initialMessages: messages });
    this.events = events;
  }

  run() {
    return from(this.events);
  }
}

let text = "";
for await (const chunk of process.stdin) text += chunk;
const folded = [];
for (const runs of JSON.parse(text)) {
  let messages = [];
  const after = [];
  for (const events of runs) {
    const agent = new Replay(events, messages);
    await agent.runAgent({});
    messages = agent.messages;
    after.push(messages);
  }
  folded.push(after);
}
process.stdout.write(JSON.stringify(folded));
