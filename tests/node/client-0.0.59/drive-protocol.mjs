// Reasoning, content parts and sub-agents (tests/node/protocol.mjs) through @ag-ui/client 0.0.59.
// Usage: node drive-protocol.mjs <base-url>

import { HttpAgent } from "@ag-ui/client";
import { runScenarios } from "../harness.mjs";
import { protocolScenarios } from "../protocol.mjs";

await runScenarios("client-0.0.59", HttpAgent, protocolScenarios("0.0.59"));
