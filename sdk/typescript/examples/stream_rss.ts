// Driven by tests/tests/sdk.rs: streams a 100 MiB file into a sandbox (from a generator) and
// back out (to a local file), checks every byte, and prints how much the process's peak RSS
// grew. Files go as they are produced and read, never whole: it must stay under 20 MiB.
import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client, Sandbox, UIClient } from "../src/index.js";

const MIB = 1 << 20;
const SIZE_MIB = 100;
const url = process.env.KAIRON_URL!;
const token = process.env.KAIRON_TOKEN!;
const kube = new Client(url, token, { namespace: "stream-ts" });
const ui = new UIClient(url, token, { namespace: "stream-ts" });

// Node frees a buffer only when its garbage collector next runs, which may be tens of MiB of
// garbage later; run under --expose-gc, this collects every 20 ms, so the peak measures what the
// SDK keeps rather than what the collector has not reached yet.
const collect = (globalThis as { gc?: () => void }).gc;
const collector = collect ? setInterval(collect, 20) : undefined;

const sb = await Sandbox.create(kube, ui, { template: "busybox" });
try {
  await sb.run("true", { check: true }); // every import and connection made before the baseline
  const base = process.resourceUsage().maxRSS;
  const sent = createHash("sha256");
  // One block refilled each time: this script's own data costs nothing, so what grows is the
  // SDK's (the next block is asked for only once the last one was sent).
  const block = Buffer.alloc(MIB);
  const blocks = function* () {
    for (let i = 0; i < SIZE_MIB; i++) {
      block.fill(i);
      sent.update(block);
      yield block;
    }
  };
  await sb.files.write("/tmp/stream-100m.bin", blocks());
  const afterUpload = (process.resourceUsage().maxRSS - base) / 1024;
  const size = Number((await sb.run("wc -c < /tmp/stream-100m.bin", { check: true })).stdout);
  if (size !== SIZE_MIB * MIB) throw new Error(`the guest has ${size} bytes`);

  const dir = await mkdtemp(join(tmpdir(), "kairon-rss-"));
  let grew: number;
  try {
    const local = join(dir, "back.bin");
    const n = await sb.files.download("/tmp/stream-100m.bin", local);
    // Measured before this script reads the file back to check it (its own reading, not the SDK's).
    grew = Math.max(0, process.resourceUsage().maxRSS - base) / 1024;
    const got = createHash("sha256");
    for await (const c of createReadStream(local)) got.update(c as Buffer);
    if (n !== SIZE_MIB * MIB || got.digest("hex") !== sent.digest("hex")) throw new Error("the bytes that came back differ");
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  await sb.files.remove("/tmp/stream-100m.bin");
  console.log(`streamed ${SIZE_MIB} MiB in and out; client peak RSS grew ${grew.toFixed(1)} MiB (${afterUpload.toFixed(1)} MiB by the end of the upload)`);
  if (grew >= 20) throw new Error(`the client's peak RSS grew ${grew.toFixed(1)} MiB: a file was held whole`);
} finally {
  clearInterval(collector);
  await sb.close();
}
