// The CopilotKit runtime with the adapter as its AG-UI agent, and the built page (dist/) on the same origin.
//
//   node server.mjs --agent http://127.0.0.1:8000/agui/ --port 4000
//
// The runtime answers the page at /api/copilotkit and forwards each run to the adapter over AG-UI (HttpAgent,
// the connection CopilotKit documents for an external AG-UI agent). Its runner (adapter-runner.mjs) reads a thread
// back from the adapter when the page reloads into it. Port 0 picks a free port; the first line printed says
// which: "CopilotKit runtime: http://HOST:PORT/api/copilotkit".

import { readFile } from "node:fs/promises";
import { createServer } from "node:http";
import { extname, join, normalize } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

import { HttpAgent } from "@ag-ui/client";
import { CopilotRuntime } from "@copilotkit/runtime/v2";
import { createCopilotNodeListener } from "@copilotkit/runtime/v2/node";

import { AdapterRunner } from "./adapter-runner.mjs";

const { values: args } = parseArgs({
  options: {
    agent: { type: "string", default: process.env.AGUI_URL ?? "http://127.0.0.1:8000/agui/" },
    host: { type: "string", default: "127.0.0.1" },
    port: { type: "string", default: "4000" },
  },
});

const BASE_PATH = "/api/copilotkit";
const DIST = fileURLToPath(new URL("./dist/", import.meta.url));
const TYPES = { ".html": "text/html; charset=utf-8", ".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml" };

// "default" is the agent id the page's <CopilotKitProvider> uses when it names none.
const runtime = new CopilotRuntime({
  agents: { default: new HttpAgent({ url: args.agent }) },
  runner: new AdapterRunner({ url: args.agent }),
});
const copilot = createCopilotNodeListener({ runtime, basePath: BASE_PATH });

/** The built page: dist/index.html for / and any unknown path, the files Vite wrote under dist/assets/. */
async function page(request, response) {
  const path = normalize(new URL(request.url, "http://x").pathname).replace(/^(\.\.[/\\])+/, "");
  const file = path.startsWith("/assets/") ? join(DIST, path) : join(DIST, "index.html");
  try {
    const body = await readFile(file);
    response.writeHead(200, { "content-type": TYPES[extname(file)] ?? "application/octet-stream" });
    response.end(body);
  } catch {
    response.writeHead(404, { "content-type": "text/plain" });
    response.end(file.endsWith("index.html") ? "No build yet: run `npm run build` in examples/copilotkit.\n" : "");
  }
}

const server = createServer((request, response) =>
  request.url.startsWith(BASE_PATH) ? copilot(request, response) : page(request, response),
);
server.listen(Number(args.port), args.host, () => {
  const { port } = server.address();
  console.log(`CopilotKit runtime: http://${args.host}:${port}${BASE_PATH} (agent: ${args.agent})`);
});
for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, () => process.exit(0));
