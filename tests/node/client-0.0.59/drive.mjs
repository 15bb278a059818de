// The demo scenarios through @ag-ui/client 0.0.59, the version CopilotKit and assistant-ui pin.
// Usage: node drive.mjs <agui-url> [pending|interrupt] [client|server]: the demo's `frontend_outcome`, "pending" by
// default, the mode meant for clients older than AG-UI 1.0.
//
// 0.0.59 predates 1.0. Its core parses a success outcome strictly, so `pendingToolCallIds` would make
// it reject the run: the adapter leaves that list out for an input without `protocolVersion`, which
// 0.0.59 never sends. It knows interrupt outcomes and `runAgent({resume})`, so approvals and forms are
// resumed as on 1.0, and so are client tools in interrupt mode. It knows no `cancelled` outcome.

import { HttpAgent } from "@ag-ui/client";
import { runScenarios } from "../harness.mjs";
import {
  clientToolByMessage,
  clientToolByResume,
  clientToolScenarios,
  serverHistoryScenarios,
  serverScenarios,
} from "../scenarios.mjs";

const mode = process.argv[3] ?? "pending";
const clientTool = { interrupt: clientToolByResume, pending: clientToolByMessage }[mode];
if (clientTool === undefined) throw new Error(`unknown mode ${mode}`);

const history = process.argv[4] ?? "client"; // the demo's `history`: "server" adds its own scenarios
const extra = history === "server" ? serverHistoryScenarios : [];
const label = `client-0.0.59 (${mode}${history === "server" ? ", server history" : ""})`;
await runScenarios(label, HttpAgent, [...serverScenarios, ...clientToolScenarios(clientTool), ...extra]);
