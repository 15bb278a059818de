// Every demo scenario through the official @ag-ui/client 1.0.0 HttpAgent.
// Usage: node drive.mjs <agui-url> [interrupt|pending] [client|server]: the demo's `frontend_outcome`, "interrupt" by
// default. Client tools are resumed with `runAgent({resume})` in interrupt mode and answered with a
// ToolMessage in pending mode; approvals and forms are interrupts either way.
//
// The agent's own pipeline (enforce, verify, apply) checks every event: a thrown verification error,
// an unexpected RUN_ERROR or any client warning fails the scenario.

import { HttpAgent } from "@ag-ui/client";
import { runScenarios } from "../harness.mjs";
import {
  clientToolByMessage,
  clientToolByResume,
  clientToolScenarios,
  serverHistoryScenarios,
  serverScenarios,
} from "../scenarios.mjs";

const mode = process.argv[3] ?? "interrupt";
const clientTool = { interrupt: clientToolByResume, pending: clientToolByMessage }[mode];
if (clientTool === undefined) throw new Error(`unknown mode ${mode}`);

const history = process.argv[4] ?? "client"; // the demo's `history`: "server" adds its own scenarios
const extra = history === "server" ? serverHistoryScenarios : [];
const label = `client-1.0 (${mode}${history === "server" ? ", server history" : ""})`;
await runScenarios(label, HttpAgent, [...serverScenarios, ...clientToolScenarios(clientTool), ...extra]);
