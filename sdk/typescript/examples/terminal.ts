// Driven by tests/tests/sdk.rs against `kairon up`: a terminal from the SDK (`sb.pty()`) on a sandbox of the
// python template and on a VM booted from KAIRON_IMAGE (its guest agent's terminal): `tput cols` prints 80,
// then 120 after `resize(120, 40)`; ^C interrupts `sleep`; the exit code comes back; `kill()` ends the command
// and what it started. Prints `ok <kind>` for each.
import assert from "node:assert/strict";
import { Client, Sandbox, UIClient } from "../src/index.js";

const env = (k: string): string => {
  const v = process.env[k];
  if (v === undefined) throw new Error(`set ${k}`);
  return v;
};
const kube = new Client(env("KAIRON_URL"), env("KAIRON_TOKEN"), { namespace: "terminals-ts" });
const ui = new UIClient(env("KAIRON_URL"), env("KAIRON_TOKEN"), { namespace: "terminals-ts" });
// Every process's command line (no `ps` in Debian's minbase).
const PROCS = "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done 2>/dev/null";
const procs = async (sb: Sandbox) => (await sb.run(PROCS)).stdout;

async function check(sb: Sandbox, kind: string): Promise<void> {
  const shown: Uint8Array[] = [];
  {
    await using term = await sb.pty({ onData: (d) => shown.push(d) });
    // The terminal echoes what is typed: the markers are only whole in the command's output.
    term.write("echo C$(tput cols)R$(tput lines)E\n");
    await term.readUntil("C80R24E");
    term.resize(120, 40);
    term.write("echo C$(tput cols)R$(tput lines)E\n");
    await term.readUntil("C120R40E");
    term.write("echo sleep-starts; sleep 300\n");
    await term.readUntil("sleep-starts\r\n");
    const started = Date.now();
    term.write("\x03");
    term.write("echo after-$?\n");
    await term.readUntil("after-130");
    assert.ok(Date.now() - started < 10_000, "^C did not interrupt sleep");
    term.write("exit 3\n");
    assert.equal(await term.wait(30), 3);
  }
  assert.ok(shown.map((b) => new TextDecoder().decode(b)).join("").includes("C120R40E"));
  // kill() ends the command and its children: nothing is left running.
  const term = await sb.pty({ command: "sleep 4242 & echo started; sleep 4243; echo never" });
  await term.readUntil("started");
  assert.ok((await procs(sb)).includes("sleep 4242"));
  await term.kill();
  assert.equal(await term.wait(30), -9);
  for (let i = 0; (await procs(sb)).includes("sleep 424"); i++) {
    if (i === 50) throw new Error(`${kind}: the killed terminal's commands still run: ${await procs(sb)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  console.log(`ok ${kind}`);
}

{
  await using sb = await Sandbox.create(kube, ui, { template: "python", readyTimeout: 900 });
  await check(sb, "sandbox");
}
{
  await using vm = await Sandbox.create(kube, ui, { image: env("KAIRON_IMAGE"), readyTimeout: 600 });
  await check(vm, "vm");
}
