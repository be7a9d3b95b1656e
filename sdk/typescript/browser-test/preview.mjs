// Preview links in a real browser (Debian's Chromium, driven by playwright-core) against a real `kairon up`, the
// links made with the TypeScript SDK (`sb.previewUrl`). Run by tests/tests/sdk.rs after `npm run build`, with
// KAIRON_URL, KAIRON_TOKEN and KAIRON_CA_FILE. Chromium trusts kairon up's CA (its key's hash, as web platform
// tests do) and resolves `*.localhost` to loopback by itself, so it opens a link as a person would: no header.
// Shows: a page whose inline script sets the title runs; a page in link A cannot read link B's responses, cannot
// set a cookie sent to B or to the API's host, and its service worker (which does control A) does not control B;
// the capability on another port, a revoked link, one past its ttl, and one whose sandbox is deleted are refused.
// Prints `ok <step>` for each; exits non-zero with the reason on the first failure.
import { launchChromium } from "./chromium.mjs";
import { createHash, X509Certificate } from "node:crypto";
import { readFileSync } from "node:fs";
import { Client, Sandbox, UIClient } from "../dist/src/index.js";

const { KAIRON_URL, KAIRON_TOKEN, KAIRON_CA_FILE } = process.env;
if (!KAIRON_URL || !KAIRON_TOKEN || !KAIRON_CA_FILE) throw new Error("KAIRON_URL, KAIRON_TOKEN and KAIRON_CA_FILE must be set");
const fail = (m) => {
  throw new Error(m);
};
const expect = (cond, m) => cond || fail(m);

const caKey = new X509Certificate(readFileSync(KAIRON_CA_FILE)).publicKey.export({ type: "spki", format: "der" });
const spki = createHash("sha256").update(caKey).digest("base64");

const kube = new Client(KAIRON_URL, KAIRON_TOKEN, { namespace: "previews-ts" });
const ui = new UIClient(KAIRON_URL, KAIRON_TOKEN, { namespace: "previews-ts" });

const PAGE_A = `<!doctype html><title>not run</title><script>document.title = "set by " + "the page's script";</script><p>A`;
// The worker answers /hijack itself: proof that it controls the pages it may.
const WORKER = `self.addEventListener("install", () => self.skipWaiting());
self.addEventListener("activate", (e) => e.waitUntil(self.clients.claim()));
self.addEventListener("fetch", (e) => {
  if (new URL(e.request.url).pathname === "/hijack") e.respondWith(new Response("from A's worker"));
});`;

// A dev server's live reload, in miniature: a page whose script opens a WebSocket to its own origin, and the echo
// that answers it (Python's standard library only).
const LIVE = String.raw`import base64, hashlib, socket, threading
PAGE = b'<!doctype html><title>waiting</title><script>const ws = new WebSocket("wss://" + location.host + "/live"); ws.onopen = () => ws.send("ping"); ws.onmessage = (e) => { document.title = e.data; };</script>'
CRLF = b"\r\n"
def exactly(c, n):
    got = b""
    while len(got) < n:
        more = c.recv(n - len(got))
        if not more: raise EOFError
        got += more
    return got
def serve(c):
    head = b""
    while CRLF + CRLF not in head: head += c.recv(4096)
    key = [l.split(b":", 1)[1].strip() for l in head.split(CRLF) if l.lower().startswith(b"sec-websocket-key:")]
    if not key:
        c.sendall(CRLF.join([b"HTTP/1.1 200 OK", b"Content-Type: text/html", b"Content-Length: %d" % len(PAGE), b"Connection: close", b"", PAGE]))
        return c.close()
    accept = base64.b64encode(hashlib.sha1(key[0] + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest())
    c.sendall(CRLF.join([b"HTTP/1.1 101 Switching Protocols", b"Upgrade: websocket", b"Connection: Upgrade", b"Sec-WebSocket-Accept: " + accept, b"", b""]))
    while True:
        op, n = exactly(c, 2)
        mask = exactly(c, 4)
        data = bytes(b ^ mask[i % 4] for i, b in enumerate(exactly(c, n & 127)))
        if op & 15 == 8: return c.close()
        out = b"echo: " + data
        c.sendall(bytes([0x81, len(out)]) + out)
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 8002))
s.listen()
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
`;

const browser = await launchChromium([`--ignore-certificate-errors-spki-list=${spki}`]);
let sb;
try {
  sb = await Sandbox.create(kube, ui, { template: "python", readyTimeout: 900 });
  await sb.run("mkdir -p /srv/a /srv/b", { check: true });
  await sb.files.write("/srv/a/index.html", PAGE_A);
  await sb.files.write("/srv/a/sw.js", WORKER);
  await sb.files.write("/srv/b/index.html", "<!doctype html><title>B</title><p>the secret of B");
  await sb.start(["/bin/sh", "-c", "cd /srv/a && exec python3 -m http.server 8000"]);
  await sb.start(["/bin/sh", "-c", "cd /srv/b && exec python3 -m http.server 8001"]);
  await sb.files.write("/srv/live.py", LIVE);
  await sb.start(["python3", "/srv/live.py"]);
  const up = "for p in 8000 8001 8002; do for i in $(seq 100); do python3 -c \"import socket; socket.create_connection(('127.0.0.1', $p))\" 2>/dev/null && break; sleep 0.1; done; done";
  await sb.run(up, { check: true });

  const a = await sb.previewUrl(8000, { ttl: 600 });
  const b = await sb.previewUrl(8001, { ttl: 600 });
  expect(new URL(a).hostname !== new URL(b).hostname, `two links share a host: ${a} ${b}`);
  expect(new URL(a).hostname.endsWith(".localhost"), a);

  const context = await browser.newContext();
  const page = await context.newPage();
  const opened = await page.goto(a);
  expect(opened?.status() === 200, `A answered ${opened?.status()}`);
  expect((await page.title()) === "set by the page's script", `the page's script did not run: title ${await page.title()}`);
  expect((await opened.headerValue("referrer-policy")) === "no-referrer", "no Referrer-Policy");
  console.log("ok script");

  // A reads B: refused by the browser (another origin, no CORS), whatever the request's mode.
  const read = await page.evaluate(async (b) => {
    try {
      const r = await fetch(b);
      return `read: ${await r.text()}`;
    } catch (e) {
      const opaque = await fetch(b, { mode: "no-cors" });
      return `refused (${e.name}); no-cors gives ${opaque.type} with ${(await opaque.text()).length} bytes`;
    }
  }, b);
  expect(read === "refused (TypeError); no-cors gives opaque with 0 bytes", `A and B: ${read}`);
  console.log("ok read");

  // Cookies: A may set its own, never one for localhost (every link's parent) or another host.
  await page.evaluate(() => {
    document.cookie = "own=a; path=/; secure";
    document.cookie = "parent=a; domain=localhost; path=/; secure";
    document.cookie = "dotted=a; domain=.localhost; path=/; secure";
  });
  const all = await context.cookies();
  expect(all.length === 1 && all[0].name === "own" && all[0].domain === new URL(a).hostname, `cookies: ${JSON.stringify(all)}`);
  const api = new URL(KAIRON_URL);
  const elsewhere = await context.cookies([b, KAIRON_URL, `https://localhost:${api.port}/`]);
  expect(elsewhere.length === 0, `cookies A set are sent elsewhere: ${JSON.stringify(elsewhere)}`);
  console.log("ok cookies");

  // A service worker registered in A controls A (it answers /hijack there) and nothing of B's.
  const registered = await page.evaluate(async () => {
    await navigator.serviceWorker.register("/sw.js");
    return (await navigator.serviceWorker.ready).active?.state;
  });
  await page.reload();
  const inA = await page.evaluate(async () => [navigator.serviceWorker.controller !== null, await (await fetch("/hijack")).text()]);
  expect(inA[0] && inA[1] === "from A's worker", `A's worker (${registered}) does not control A: ${inA}`);
  const pageB = await context.newPage();
  await pageB.goto(b);
  const inB = await pageB.evaluate(async () => [
    navigator.serviceWorker.controller === null,
    (await navigator.serviceWorker.getRegistrations()).length,
    (await fetch("/hijack")).status,
  ]);
  expect(inB[0] && inB[1] === 0 && inB[2] === 404, `A's worker reaches B: ${inB}`);
  expect((await pageB.textContent("p")) === "the secret of B", "B's own page");
  console.log("ok worker");

  // A dev server's WebSocket on its own origin, through the link.
  const live = await browser.newContext().then((c) => c.newPage());
  await live.goto(await sb.previewUrl(8002));
  await live.waitForFunction(() => document.title === "echo: ping", null, { timeout: 30_000 }).catch(async () => {
    fail(`the page's WebSocket got no echo: title ${await live.title()}`);
  });
  console.log("ok websocket");

  // Refused: the capability on another port, a revoked link, one past its ttl.
  const status = async (url) => (await (await browser.newContext()).newPage().then((p) => p.goto(url)))?.status();
  const swapped = a.replace(/-8000\./, "-8001.");
  expect((await status(swapped)) === 404, `A's capability opened port 8001`);
  const listed = await sb.previews();
  expect(listed.length === 3 && listed.every((p) => p.url === undefined), `listed: ${JSON.stringify(listed)}`);
  await sb.revokePreview(listed.find((p) => p.port === 8001));
  expect((await status(b)) === 404, "a revoked link opened");
  const short = await sb.previewUrl(8000, { ttl: 2 });
  expect((await status(short)) === 200, "a fresh link did not open");
  await new Promise((r) => setTimeout(r, 3000));
  expect((await status(short)) === 404, "a link past its ttl opened");
  console.log("ok refused");

  await sb.close();
  sb = undefined;
  expect((await status(a)) === 404, "a link outlived its sandbox");
  console.log("ok deleted");
  console.log("checks passed");
} finally {
  if (sb) await sb.close().catch(() => {});
  await browser.close();
}
