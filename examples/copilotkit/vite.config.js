import react from "@vitejs/plugin-react";
import { defineConfig } from "vite";

// `npm run dev` serves the page with hot reload and sends /api to the runtime server (node server.mjs, port 4000).
export default defineConfig({
  plugins: [react()],
  // CopilotKit's chat brings its markdown, diagram and code highlighters: big chunks, expected.
  build: { chunkSizeWarningLimit: 4000 },
  server: { proxy: { "/api": "http://127.0.0.1:4000" } },
});
