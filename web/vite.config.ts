import { defineConfig } from "vite";

// Served by kairon under /ui/ from the committed dist/ (embedded in the binary). The build is
// deterministic: a fresh `npm ci && npm run build` must equal the committed dist/ byte for byte.
export default defineConfig({
  base: "/ui/",
  esbuild: { jsx: "automatic", jsxImportSource: "preact", legalComments: "none" },
  build: {
    outDir: "dist",
    emptyOutDir: true,
    sourcemap: false,
    target: "es2022",
    // No inline script anywhere (the page's Content-Security-Policy forbids it).
    modulePreload: { polyfill: false },
    assetsInlineLimit: 0,
    reportCompressedSize: false,
  },
  test: { include: ["test/**/*.test.ts"], environment: "node" },
} as never);
