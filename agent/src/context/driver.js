// The JavaScript code context of `kairon-agent context javascript` (see agent/src/context.rs):
// one long-lived Node realm whose globals (var, let, const, functions) outlive each run.
// Requests are JSON lines on stdin ({"id", "code", "timeoutSeconds"}); each answer is one line
// on stdout after the marker. A run's console and process.stdout/stderr writes are captured; a
// promise it ends with is awaited.
"use strict";
const vm = require("node:vm");
const util = require("node:util");
const readline = require("node:readline");

const MARK = "\x1ekairon-context ";
const CAP = 1 << 20;
const realOut = process.stdout.write.bind(process.stdout);
const realErr = process.stderr.write.bind(process.stderr);
const say = (message) => realOut(MARK + JSON.stringify(message) + "\n");
globalThis.require = require;
let runs = 0;

function capture() {
  const got = { stdout: "", stderr: "" };
  const into = (stream) => (chunk, encoding, cb) => {
    if (got[stream].length < CAP) got[stream] += typeof chunk === "string" ? chunk : Buffer.from(chunk).toString("utf8");
    if (typeof encoding === "function") encoding();
    else if (typeof cb === "function") cb();
    return true;
  };
  process.stdout.write = into("stdout");
  process.stderr.write = into("stderr");
  return () => {
    process.stdout.write = realOut;
    process.stderr.write = realErr;
    for (const s of ["stdout", "stderr"]) if (got[s].length >= CAP) got[s] = got[s].slice(0, CAP) + "\n[output truncated at 1 MiB]\n";
    return got;
  };
}

async function run(req) {
  runs += 1;
  const filename = `<cell ${runs}>`;
  const answer = { id: req.id ?? null, text: null, error: null };
  const release = capture();
  try {
    const timeout = Number(req.timeoutSeconds) > 0 ? Number(req.timeoutSeconds) * 1000 : undefined;
    let value = new vm.Script(String(req.code ?? ""), { filename }).runInThisContext({ timeout, displayErrors: false });
    if (value && typeof value.then === "function") value = await value;
    if (value !== undefined) answer.text = util.inspect(value);
  } catch (e) {
    const err = e instanceof Error ? e : new Error(util.inspect(e));
    // The stack down to the run's own frames: where vm took over is the driver's business.
    const lines = (err.stack ?? `${err.name}: ${err.message}`).split("\n");
    const own = lines.findIndex((l) => /^\s+at (new Script|Script\.runInThisContext) /.test(l));
    answer.error = { name: err.name, value: err.message, traceback: (own < 0 ? lines : lines.slice(0, own)).join("\n") };
  } finally {
    Object.assign(answer, release());
  }
  say(answer);
}

say({ ready: true, language: "javascript", version: process.versions.node });
// One run at a time, in the order asked.
let queue = Promise.resolve();
readline.createInterface({ input: process.stdin, terminal: false }).on("line", (line) => {
  let req;
  try {
    req = JSON.parse(line);
  } catch (e) {
    say({ id: null, error: { name: "ProtocolError", value: String(e), traceback: "" } });
    return;
  }
  queue = queue.then(() => run(req));
});
