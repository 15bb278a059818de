// The Dojo's state features (examples/dojo_features.py) through @ag-ui/client 1.0.
// Usage: node drive-dojo.mjs <dojo-app-url>

import { HttpAgent } from "@ag-ui/client";
import { runScenarios } from "../harness.mjs";
import { dojoStateScenarios } from "../dojo-state.mjs";

await runScenarios("client-1.0", HttpAgent, dojoStateScenarios);
