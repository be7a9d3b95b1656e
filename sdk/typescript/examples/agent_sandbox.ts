// The example of agent-sandboxes.md ("SDKs") in TypeScript, runnable against `kairon up`:
//   KAIRON_URL=https://127.0.0.1:7443 KAIRON_TOKEN=$(kairon token --sub me --role admin) \
//   NODE_EXTRA_CA_CERTS=~/.local/state/kairon/tls/ca.crt node dist/examples/agent_sandbox.js
// KAIRON_IMAGE picks the VM image (default: the spec's); KAIRON_TEMPLATE=python runs the same
// story in a runc sandbox of that template instead.
import { Client, Sandbox, UIClient } from "../src/index.js";

const env = (k: string, d?: string): string => {
  const v = process.env[k] ?? d;
  if (v === undefined) throw new Error(`set ${k}`);
  return v;
};
const KUBE_URL = env("KAIRON_URL");
const KUBE_TOKEN = env("KAIRON_TOKEN");
const UI_URL = env("KAIRON_UI_URL", KUBE_URL);
const UI_TOKEN = env("KAIRON_UI_TOKEN", KUBE_TOKEN);
const TEMPLATE = process.env.KAIRON_TEMPLATE;
const IMAGE = TEMPLATE ? undefined : env("KAIRON_IMAGE", "/var/lib/fluxvm/images/kairon-hw.qcow2");

const kube = new Client(KUBE_URL, KUBE_TOKEN, { namespace: "agents" });
const ui = new UIClient(UI_URL, UI_TOKEN, { namespace: "agents" });
{
  await using sb = await Sandbox.create(kube, ui, { image: IMAGE, template: TEMPLATE, idleTimeout: 600, maxLifetime: 3600 });
  console.log((await sb.run("uname -a", { check: true })).stdout);
  await sb.writeFile("/tmp/task.py", new TextEncoder().encode("print('hi')"));
  const proc = await sb.start("python3 /tmp/task.py");
  await proc.wait();
  console.log(await proc.logs());
  const child = await sb.fork(); // live copy of the sandbox
  await child.close();
}
