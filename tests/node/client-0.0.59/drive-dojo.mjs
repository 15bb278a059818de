// The Dojo's state features (examples/dojo_features.py) through @ag-ui/client 0.0.59.
// Usage: node drive-dojo.mjs <dojo-app-url>

import { HttpAgent } from "@ag-ui/client";
import { runScenarios } from "../harness.mjs";
import { dojoStateScenarios } from "../dojo-state.mjs";

await runScenarios("client-0.0.59", HttpAgent, dojoStateScenarios);
