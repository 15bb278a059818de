// The conformance kit's reference agent, played with @ag-ui/client 1.0.0 (tests/conformance/test_conformance_reference.py).
import { HttpAgent } from "@ag-ui/client";
import { playAll } from "../reference.mjs";

await playAll("client-1.0", HttpAgent);
