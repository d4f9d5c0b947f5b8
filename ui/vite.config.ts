import { defineConfig } from "vite";
import { svelte } from "@sveltejs/vite-plugin-svelte";
import { fileURLToPath } from "node:url";

// The window loads ui/dist (embedded into kerf-desktop at build time). Tests run in jsdom.
export default defineConfig({
  root: fileURLToPath(new URL(".", import.meta.url)),
  plugins: [
    svelte(),
    // WebKitGTK does not run a `crossorigin` module script served over Tauri's custom protocol
    // (tauri://localhost): the window stays blank. Same-origin assets need no CORS mode anyway.
    {
      name: "kerf-same-origin-scripts",
      transformIndexHtml: (html: string) => html.replace(/ crossorigin(="[^"]*")?/g, ""),
    },
  ],
  clearScreen: false,
  build: {
    outDir: "dist",
    emptyOutDir: true,
    target: "safari16",
    chunkSizeWarningLimit: 2000,
  },
  server: { port: 5173, strictPort: true },
  resolve: process.env.VITEST ? { conditions: ["browser"] } : undefined,
  test: {
    environment: "jsdom",
    include: ["src/**/*.test.ts"],
  },
});
