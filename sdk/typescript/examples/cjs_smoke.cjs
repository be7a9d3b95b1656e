// Driven by tests/tests/sdk.rs: the CommonJS build (`require("kairon")`) against a real server,
// configured from KAIRON_URL / KAIRON_TOKEN / KAIRON_CA_FILE: a sandbox made, used and removed.
"use strict";
const assert = require("node:assert/strict");
const { Kairon, Sandbox } = require("../dist/cjs/index.js");

(async () => {
  const k = new Kairon({ namespace: "sdk-cjs" });
  const sb = await k.sandbox.create({ template: "busybox" });
  try {
    assert.ok(sb instanceof Sandbox);
    const r = await sb.run("echo from-commonjs", { check: true });
    assert.equal(r.stdout, "from-commonjs\n");
  } finally {
    await sb.close();
    k.close();
  }
  console.log("commonjs ok");
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
