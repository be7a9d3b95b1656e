// The dashboard in a real browser (Debian's Chromium, driven by playwright-core) against a real
// `kairon up` with runc sandboxes. Run by tests/tests/web.rs, which starts Kairon and passes:
//   KAIRON_URL, ADMIN_TOKEN, VIEWER_TOKEN (a viewer of namespace `web`), OUT_DIR (screenshots),
//   MACHINE (`web/<name>`, a running sandbox labelled kairon.zyvor.dev/sandbox=true with an idle timeout),
//   NODE_POOL (a runtime pool of one busybox member on node `local`).
// Exits non-zero with the reason on the first failed expectation.

import { chromium } from "playwright-core";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { createRequire } from "node:module";

// axe-core runs in the page through the DevTools protocol (which the page's CSP does not govern).
const AXE = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");

const { KAIRON_URL, ADMIN_TOKEN, VIEWER_TOKEN, OUT_DIR, MACHINE, NODE_POOL } = process.env;
for (const [k, v] of Object.entries({ KAIRON_URL, ADMIN_TOKEN, VIEWER_TOKEN, OUT_DIR, MACHINE, NODE_POOL })) {
  if (!v) throw new Error(`${k} is not set`);
}
mkdirSync(OUT_DIR, { recursive: true });
const [NS, NAME] = MACHINE.split("/");
const T = 60_000;

const log = (...a) => console.log(new Date().toISOString(), ...a);
const fail = (m) => {
  throw new Error(m);
};

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-background-networking", "--disable-component-update", "--disable-dev-shm-usage"],
});

/** A fresh signed-out page that records every request it makes. */
async function newPage() {
  const context = await browser.newContext({ ignoreHTTPSErrors: true, acceptDownloads: true, viewport: { width: 1440, height: 900 } });
  const page = await context.newPage();
  const requests = [];
  page.on("request", (r) => requests.push({ url: r.url(), at: Date.now(), method: r.method() }));
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("console", (m) => m.type() === "error" && errors.push(m.text()));
  return { context, page, requests, errors };
}

async function shot(page, name) {
  await page.screenshot({ path: join(OUT_DIR, `${name}.png`), fullPage: true });
  log("screenshot", name);
}

async function signIn(page, token) {
  await page.goto(`${KAIRON_URL}/ui/`);
  await page.getByLabel("Bearer token").fill(token);
  await page.getByRole("button", { name: "Sign in" }).click();
}

async function nav(page, view) {
  await page.getByRole("navigation", { name: "Views" }).getByRole("button", { name: view, exact: true }).click();
  await page.getByRole("heading", { level: 2, name: view }).waitFor({ timeout: T });
}

/** Selects a tab of the Machine's details (clicked again if a re-render swallowed the click). */
async function selectTab(page, name) {
  const tab = page.getByRole("tab", { name, exact: true });
  for (let i = 0; i < 5; i++) {
    await tab.click();
    if ((await tab.getAttribute("aria-selected")) === "true") return;
    await page.waitForTimeout(200);
  }
  fail(`the ${name} tab does not open`);
}

/** The rows of a terminal (`terminal` or `console`) as their trimmed text. */
const terminalRows = (page, id) =>
  page.evaluate((id) => [...document.querySelectorAll(`[data-testid="${id}"] .xterm-rows > div`)].map((d) => d.textContent?.trim() ?? ""), id);

/**
 * Types `line` into a terminal once its shell shows a prompt, as a person would (typed earlier,
 * the prompt lands on the output's row), and waits for a row that reads `expected`.
 */
async function runLine(page, id, line, expected) {
  const until = async (what, ok) => {
    const deadline = Date.now() + T;
    for (;;) {
      const rows = await terminalRows(page, id);
      if (ok(rows)) return;
      if (Date.now() > deadline) fail(`${id}: no ${what} in ${T} ms; it shows ${JSON.stringify(rows.filter(Boolean))}`);
      await page.waitForTimeout(100);
    }
  };
  // xterm draws only while it is on screen (it pauses off it): look at it first, as a person would.
  await page.getByTestId(id).scrollIntoViewIfNeeded();
  // A prompt (`/ # `) may share its row with what the shell says next ("can't access tty").
  await until("prompt", (rows) => rows.some((r) => /(^|\s)[#$](\s|$)/.test(r)));
  await page.getByTestId(id).click();
  await page.keyboard.type(line);
  await page.keyboard.press("Enter");
  await until(`row reading ${JSON.stringify(expected)}`, (rows) => rows.includes(expected));
}

const row = (page) => page.locator(`[data-machine="${MACHINE}"]`);

/** axe-core finds no serious or critical issue on the page as it is now. */
async function accessible(page, view) {
  if (!(await page.evaluate(() => typeof window.axe !== "undefined"))) await page.evaluate(AXE);
  const found = await page.evaluate(async () => {
    const r = await window.axe.run(document, { resultTypes: ["violations"] });
    return r.violations
      .filter((v) => v.impact === "serious" || v.impact === "critical")
      .map((v) => `${v.id} (${v.impact}): ${v.help} — ${v.nodes.slice(0, 3).map((n) => n.target.join(" ")).join(", ")}`);
  });
  if (found.length) fail(`accessibility of ${view}: ${found.join("; ")}`);
  log(`${view}: axe-core finds no serious or critical issue`);
}

/** Requests of a quiet view over `ms`: the same URL twice is polling. */
async function noPolling(page, requests, view, ms = 6000) {
  await page.waitForTimeout(1500);
  const from = Date.now();
  await page.waitForTimeout(ms);
  const seen = requests.filter((r) => r.at >= from && r.url.includes("/api/"));
  const counts = new Map();
  for (const r of seen) counts.set(`${r.method} ${r.url}`, (counts.get(`${r.method} ${r.url}`) ?? 0) + 1);
  const repeated = [...counts].filter(([, n]) => n > 1);
  if (repeated.length) fail(`the ${view} view polls: ${JSON.stringify(repeated)}`);
  log(`${view}: ${seen.length} API requests in ${ms} ms, none repeated`);
}

// 1. A bad token says so clearly.
{
  const { page, context } = await newPage();
  await signIn(page, "not-a-token");
  const msg = page.locator("#signin-error");
  await msg.waitFor({ timeout: T });
  const text = await msg.innerText();
  if (!text.includes("This token was refused")) fail(`bad token message: ${text}`);
  if (page.url().includes("not-a-token")) fail("the token went into the URL");
  await shot(page, "signin-bad-token");
  await accessible(page, "sign-in");
  await context.close();
}

// 2. The admin: Machines live, countdown, pause/resume, terminal, files, pools, claims, usage, nodes.
const { page, requests, errors } = await newPage();
try {
await signIn(page, ADMIN_TOKEN);
await page.getByTestId("whoami").filter({ hasText: "admin" }).waitFor({ timeout: T });
for (const r of requests) if (r.url.includes(ADMIN_TOKEN)) fail(`a token in a URL: ${r.url}`);
// The namespace filter (there may be many other Machines).
await page.getByRole("option", { name: NS, exact: true }).waitFor({ state: "attached", timeout: T });
await page.getByLabel("Namespace").selectOption(NS);

await row(page).getByTestId("phase").filter({ hasText: /^Running$/ }).waitFor({ timeout: T });
await row(page).click();
const lifecycle = page.getByTestId("lifecycle");
const before = await lifecycle.innerText();
if (!/^idle \S+ of 10m0s/.test(before)) fail(`lifecycle line: ${before}`);
await page.waitForTimeout(2500);
const after = await lifecycle.innerText();
if (after === before) fail(`the idle countdown does not move: ${after}`);
log("countdown", before, "→", after);
// Live metrics from its node: a line of figures and a CPU sparkline that grows each second.
const metricsLine = page.getByTestId("metrics-line");
await metricsLine.filter({ hasText: /^CPU [\d.]+% of [\d.]+ · memory / }).waitFor({ timeout: T });
const points = async () => (await page.getByTestId("cpu-sparkline").locator("polyline").getAttribute("points")) ?? "";
const firstPoints = (await points()).split(" ").length;
await page.waitForTimeout(2500);
if ((await points()).split(" ").length <= firstPoints) fail(`the CPU sparkline does not grow: ${await points()}`);
log("metrics", await metricsLine.innerText());
// A preview link: a URL on an origin of its own that opens in a new tab. Nothing listens on port 8000
// of this busybox sandbox, so the link's relay says so (502), not the dashboard; revoked, it is gone.
await page.getByTestId("preview").getByRole("button", { name: "preview link" }).click();
const previewLink = page.getByTestId("preview-link");
await previewLink.waitFor({ timeout: T });
const href = (await previewLink.getAttribute("href")) ?? "";
if (!/^https:\/\/[0-9a-f]{32}-8000\.localhost:\d+\/$/.test(href)) fail(`preview link: ${href}`);
const previewTab = await page.context().newPage();
const previewAnswer = await previewTab.goto(href);
if (previewAnswer?.status() !== 502) fail(`the preview of a closed port answered ${previewAnswer?.status()}`);
await previewTab.close();
await page.getByTestId("preview").getByRole("button", { name: "revoke" }).click();
await previewLink.waitFor({ state: "detached", timeout: T });
log("preview", href);
await shot(page, "machines");
await accessible(page, "a Machine's details");

// Pause and resume: the phase changes without a reload.
const navigations = [];
page.on("framenavigated", (f) => f === page.mainFrame() && navigations.push(f.url()));
await page.getByTestId("actions").getByRole("button", { name: "pause", exact: true }).click();
await row(page).getByTestId("phase").filter({ hasText: /^Paused$/ }).waitFor({ timeout: T });
await page.getByTestId("actions").getByRole("button", { name: "resume", exact: true }).click();
await row(page).getByTestId("phase").filter({ hasText: /^Running$/ }).waitFor({ timeout: T });
if (navigations.length) fail(`the page reloaded: ${navigations}`);
// A refusal is shown verbatim: hibernate is refused for a runc sandbox.
await page.getByTestId("actions").getByRole("button", { name: "hibernate", exact: true }).click();
const refused = page.getByTestId("msg-error");
await refused.waitFor({ timeout: T });
log("refusal:", await refused.innerText());
await shot(page, "machine-refusal");

// The terminal: echo hi.
await selectTab(page, "Terminal");
await page.getByTestId("terminal-state").filter({ hasText: "connected" }).waitFor({ timeout: T });
await runLine(page, "terminal", "echo hi", "hi");
await shot(page, "terminal");

// The console WebSocket, in the same terminal.
await selectTab(page, "Console");
await page.getByTestId("console-state").filter({ hasText: "connected" }).waitFor({ timeout: T });
await runLine(page, "console", "echo from-the-console", "from-the-console");
await shot(page, "console");

// Files: upload (with progress), list, download, delete.
await selectTab(page, "Files");
await page.getByTestId("files-upload").setInputFiles({ name: "hello.txt", mimeType: "text/plain", buffer: Buffer.from("hello from the browser\n") });
await page.getByTestId("msg-ok").filter({ hasText: "uploaded hello.txt" }).waitFor({ timeout: T });
const fileRow = page.locator('[data-file="hello.txt"]');
await fileRow.waitFor({ timeout: T });
const [dl] = await Promise.all([page.waitForEvent("download"), fileRow.getByRole("button", { name: "download" }).click()]);
const got = await readFile(await dl.path(), "utf8");
if (got !== "hello from the browser\n") fail(`downloaded ${JSON.stringify(got)}`);
await shot(page, "files");
await fileRow.getByRole("button", { name: "delete" }).click();
await fileRow.waitFor({ state: "detached", timeout: T });

// Pools: create one, wait for a warm member, claim it.
await nav(page, "Pools");
const form = page.getByRole("form", { name: "New pool" });
await form.getByLabel("Name", { exact: true }).fill("agents");
await form.getByLabel("Namespace", { exact: true }).fill(NS);
await form.getByLabel("Template", { exact: true }).fill("busybox");
await form.getByLabel("Replicas", { exact: true }).fill("1");
await form.getByLabel("Network", { exact: true }).selectOption("allowlist");
await form.getByLabel("Allow", { exact: true }).fill("pypi.org, .pythonhosted.org");
await form.getByRole("button", { name: "Create pool" }).click();
const pool = page.locator(`[data-pool="${NS}/agents"]`);
await pool.getByTestId("network").filter({ hasText: "allow: pypi.org, .pythonhosted.org" }).waitFor({ timeout: T });
await pool.getByTestId("warm").filter({ hasText: /^1$/ }).waitFor({ timeout: 2 * T });
await shot(page, "pools");
await pool.getByRole("button", { name: "Claim" }).click();
await pool.getByTestId("claimed").filter({ hasText: /^1$/ }).waitFor({ timeout: T });

// Claims: bound, usage growing as accrual runs.
await nav(page, "Claims");
const claim = page.locator("[data-claim]").first();
await claim.getByTestId("claim-phase").filter({ hasText: "Bound" }).waitFor({ timeout: T });
const active0 = await claim.getByTestId("active").innerText();
await page.waitForFunction(
  (a0) => {
    const el = document.querySelector('[data-claim] [data-testid="active"]');
    return el && el.textContent !== a0;
  },
  active0,
  { timeout: T },
);
log("usage grows:", active0, "→", await claim.getByTestId("active").innerText());
await shot(page, "claims");

// Usage: charts and CSV.
await nav(page, "Usage");
const [csv] = await Promise.all([page.waitForEvent("download"), page.getByRole("button", { name: "Export CSV" }).click()]);
const csvText = await readFile(await csv.path(), "utf8");
if (!csvText.startsWith("day,namespace,")) fail(`CSV: ${csvText.slice(0, 80)}`);
await shot(page, "usage");

// Nodes.
await nav(page, "Nodes");
await page.locator('[data-node="local"]').waitFor({ timeout: T });
await page.locator('[data-node="local"]').getByRole("button", { name: "Templates and pools" }).click();
await page.locator(".templates li").filter({ hasText: "busybox" }).first().waitFor({ timeout: T });
// The node's runtime pool (NODE_POOL, made by web.rs), read again on each change of the watched
// node (its heartbeat), so its member shows Ready without a reload.
const nodePool = page.getByRole("region", { name: "Pools of local" }).locator(`[data-node-pool="${NODE_POOL}"]`);
await nodePool.waitFor({ timeout: T });
await nodePool.getByTestId("size").filter({ hasText: /^1$/ }).waitFor({ timeout: T });
await nodePool.getByTestId("ready").filter({ hasText: /^1$/ }).waitFor({ timeout: 2 * T });
// A claim made elsewhere shows on the next change of the node, with no reload or timer.
const claimed = await page.evaluate(async (pool) => {
  const r = await fetch(`/api/v1/nodes/local/pools/${pool}/claim`, {
    method: "POST",
    headers: { Authorization: `Bearer ${sessionStorage.getItem("kairon.token")}`, "Content-Type": "application/json" },
    body: "{}",
  });
  return r.status;
}, NODE_POOL);
if (claimed !== 200) fail(`claiming from the node pool: HTTP ${claimed}`);
await nodePool.getByTestId("claimed").filter({ hasText: /^1$/ }).waitFor({ timeout: T });
await shot(page, "nodes");

// 1,000 Machines (pinned to a node with no agent): few rows in the DOM, smooth scrolling.
if (process.env.MANY) {
  await nav(page, "Machines");
  const want = Number(process.env.MANY) + 1;
  await page.waitForFunction(
    (n) => {
      const m = /^(\d+) of (\d+)$/.exec(document.querySelector('[data-testid="machine-count"]')?.textContent ?? "");
      return m && Number(m[1]) >= n && m[1] === m[2];
    },
    want,
    { timeout: 2 * T },
  );
  const frames = await page.evaluate(async () => {
    const el = document.querySelector('[data-testid="machine-scroll"]');
    const deltas = [];
    let last = performance.now();
    let running = true;
    const tick = (t) => {
      deltas.push(t - last);
      last = t;
      if (running) requestAnimationFrame(tick);
    };
    requestAnimationFrame(tick);
    let most = 0;
    for (let i = 0; i < 150; i++) {
      el.scrollTop += 220;
      await new Promise((r) => requestAnimationFrame(r));
      most = Math.max(most, document.querySelectorAll("[data-machine]").length);
    }
    running = false;
    return { deltas: deltas.slice(1), most };
  });
  const sorted = [...frames.deltas].sort((a, b) => a - b);
  const p95 = sorted[Math.floor(sorted.length * 0.95)];
  log(`${await page.getByTestId("machine-count").innerText()} Machines: at most ${frames.most} rows in the DOM, p95 frame ${p95.toFixed(1)} ms over ${sorted.length} frames`);
  if (frames.most >= 200) fail(`${frames.most} rows in the DOM`);
  if (p95 >= 50) fail(`p95 frame time ${p95} ms while scrolling`);
  await shot(page, "machines-1000");
}

// No view polls: each view, left alone, sends no request twice.
for (const view of ["Machines", "Pools", "Claims", "Usage", "Nodes"]) {
  await nav(page, view);
  await noPolling(page, requests, view);
  await accessible(page, view);
}
// Refusals (401, 403, 409) are answers the page shows, not errors of the page.
const serious = errors.filter((e) => !e.includes("favicon") && !e.startsWith("Failed to load resource"));
if (serious.length) fail(`errors in the page: ${serious.join("; ")}`);
} catch (e) {
  console.error("FAILED:", e, "\npage errors:", errors);
  await page.screenshot({ path: join(OUT_DIR, "failure.png"), fullPage: true }).catch(() => {});
  await browser.close();
  process.exit(1);
}

// 3. A viewer sees no action buttons.
{
  const { page, context } = await newPage();
  await signIn(page, VIEWER_TOKEN);
  await page.getByTestId("whoami").filter({ hasText: "viewer" }).waitFor({ timeout: T });
  await row(page).click();
  await page.getByTestId("lifecycle").waitFor({ timeout: T });
  if (await page.getByTestId("actions").count()) fail("a viewer sees the actions");
  if (await page.getByRole("tab", { name: "Terminal" }).count()) fail("a viewer sees the terminal");
  await nav(page, "Pools");
  await page.locator(`[data-pool="${NS}/agents"]`).waitFor({ timeout: T });
  if (await page.getByRole("button", { name: "Claim", exact: true }).count()) fail("a viewer sees the claim button");
  if (await page.getByRole("form", { name: "New pool" }).count()) fail("a viewer sees the pool form");
  await shot(page, "viewer");
  await context.close();
}

writeFileSync(join(OUT_DIR, "requests.json"), JSON.stringify(requests.map((r) => `${r.method} ${r.url}`), null, 1));
await browser.close();
log("dashboard: every check passed");
