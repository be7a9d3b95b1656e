// The SDK's browser build in a real browser (Debian's Chromium, driven by playwright-core) against
// a real `kairon up`. Run by tests/tests/sdk.rs after `npm run build` and `npm run bundle:browser`,
// with KAIRON_URL, KAIRON_TOKEN and KAIRON_NAMESPACE. The page and the bundle are served under
// KAIRON_URL/__kairon-sdk/ by the browser's request interception, so the SDK talks to its own
// origin as a web app served by the same host would. Exits non-zero with the reason on failure.
import { launchChromium } from "./chromium.mjs";
import { readFileSync } from "node:fs";

const { KAIRON_URL, KAIRON_TOKEN, KAIRON_NAMESPACE } = process.env;
if (!KAIRON_URL || !KAIRON_TOKEN || !KAIRON_NAMESPACE) throw new Error("KAIRON_URL, KAIRON_TOKEN and KAIRON_NAMESPACE must be set");
const file = (p) => readFileSync(new URL(p, import.meta.url));
const served = {
  "index.html": ["text/html", "<!doctype html><title>kairon sdk</title><p>kairon sdk in a browser</p>"],
  "kairon.js": ["text/javascript", file("../dist/browser/kairon.js")],
  "scenario.js": ["text/javascript", file("./scenario.js")],
};

const browser = await launchChromium([
  // A page fulfilled by interception has no address of its own, so Chromium counts it as public
  // and blocks its WebSockets to loopback (net::ERR_BLOCKED_BY_LOCAL_NETWORK_ACCESS_CHECKS); a
  // page the server itself served, as the dashboard is, is loopback's own and never is.
  "--disable-features=LocalNetworkAccessChecks",
]);
try {
  const context = await browser.newContext({ ignoreHTTPSErrors: true });
  const origin = new URL(KAIRON_URL).origin;
  await context.route(`${origin}/__kairon-sdk/**`, (route) => {
    const [type, body] = served[new URL(route.request().url()).pathname.slice("/__kairon-sdk/".length)] ?? [];
    return body ? route.fulfill({ status: 200, contentType: type, body }) : route.fulfill({ status: 404, body: "" });
  });
  const page = await context.newPage();
  const errors = [];
  const elsewhere = [];
  const said = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("console", (m) => said.push(`${m.type()}: ${m.text()}`));
  page.on("request", (r) => {
    if (!r.url().startsWith(origin) && !r.url().startsWith(origin.replace(/^http/, "ws"))) elsewhere.push(r.url());
  });
  await page.goto(`${origin}/__kairon-sdk/index.html`);
  const passed = await page
    .evaluate(async (args) => (await import("/__kairon-sdk/scenario.js")).run(args), {
      token: KAIRON_TOKEN,
      namespace: KAIRON_NAMESPACE,
      template: process.env.KAIRON_TEMPLATE ?? "busybox",
    })
    .catch((e) => {
      // The browser's console says what the page cannot (why a WebSocket was refused).
      throw new Error(`${e.message}\n--- the browser's console\n${said.join("\n")}`);
    });
  if (errors.length) throw new Error(`the page reported errors: ${errors.join("; ")}`);
  if (elsewhere.length) throw new Error(`the page sent requests to other origins: ${elsewhere.join(", ")}`);
  for (const p of passed) console.log(`ok: ${p}`);
  console.log(`browser: ${passed.length} checks passed in ${(await browser.version())}`);
} finally {
  await browser.close();
}
