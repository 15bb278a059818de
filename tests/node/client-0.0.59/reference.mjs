// The conformance kit's reference agent, played with @ag-ui/client 0.0.59 (tests/conformance/test_conformance_reference.py).
import { HttpAgent } from "@ag-ui/client";
import { playAll } from "../reference.mjs";

await playAll("client-0.0.59", HttpAgent);
