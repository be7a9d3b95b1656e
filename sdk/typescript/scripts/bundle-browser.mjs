// The browser build as a bundler makes it: esbuild bundles the package's `browser` export
// (dist/src/browser.js, from `npm run build`) for the browser platform into dist/browser/kairon.js.
// esbuild cannot resolve a `node:` module for a browser, so the build fails if the browser
// graph imports one; the output is also checked for any left.
import { build } from "esbuild";
import { readFileSync } from "node:fs";

const out = new URL("../dist/browser/kairon.js", import.meta.url).pathname;
const result = await build({
  entryPoints: [new URL("../dist/src/browser.js", import.meta.url).pathname],
  bundle: true,
  format: "esm",
  platform: "browser",
  target: "es2022",
  outfile: out,
  metafile: true,
  logLevel: "error",
});
const inputs = Object.keys(result.metafile.inputs);
const nodeOnly = inputs.filter((i) => i.startsWith("node:") || /(^|\/)node_modules\/ws\//.test(i));
const text = readFileSync(out, "utf8");
const left = [...text.matchAll(/["'](node:[a-z/_]+)["']/g)].map((m) => m[1]);
if (nodeOnly.length || left.length) {
  console.error(`the browser build holds Node modules: ${[...nodeOnly, ...left].join(", ")}`);
  process.exit(1);
}
console.log(`browser bundle: ${out} (${inputs.length} modules, ${Math.round(text.length / 1024)} KiB, no node: imports)`);
