// Driven by tests/tests/sdk.rs across a restart of `kairon up` on the same address (the twin of
// sdk/python/scripts/across_restart.py): makes a sandbox, prints `created`, waits for a line on
// stdin (sent once the server is down), then works through the restart. A request that never
// reached the server is retried until it is back; a create is never sent twice (a second send
// would surface as AlreadyExists).
import { once } from "node:events";
import { createInterface } from "node:readline";
import { Client, Sandbox, UIClient } from "../src/index.js";

const url = process.env.KAIRON_URL ?? "";
const token = process.env.KAIRON_TOKEN ?? "";
// More retries than the default: a debug build of `kairon up` takes a few seconds to come back.
const kube = new Client(url, token, { namespace: "restart-ts", retries: 9 });
const ui = new UIClient(url, token, { namespace: "restart-ts", retries: 9 });
const sb = await Sandbox.create(kube, ui, { template: "busybox", name: "survivor" });
console.log("created");
const lines = createInterface({ input: process.stdin });
await once(lines, "line");
lines.close();
const downAt = Date.now();
// Sent while the server is down: refused connections, retried until it is back; created once.
const during = await Sandbox.create(kube, ui, { template: "busybox", name: "during" });
const waited = (Date.now() - downAt) / 1000;
if ((await during.run("echo made", { check: true })).stdout !== "made\n") throw new Error("the new sandbox does not run");
const m = (await sb.info()) as { metadata?: { name?: string } };
if (m.metadata?.name !== "survivor") throw new Error(`info() answered ${JSON.stringify(m.metadata)}`);
if ((await sb.run("echo back", { check: true })).stdout !== "back\n") throw new Error("the old sandbox does not run");
console.log(`ok after ${waited.toFixed(1)} s`);
