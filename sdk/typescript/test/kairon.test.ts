// `new Kairon()` and its configuration, connect/list/info, waits that give up on a refusal at once,
// connection errors, retries and the User-Agent, against the real `kairon up` of sdk.test.ts
// (KAIRON_URL, KAIRON_TOKEN, KAIRON_CA_FILE); the retry tests count requests on a small HTTP
// server of their own on loopback.
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { createServer as createNetServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, it } from "node:test";
import {
  Client,
  ConfigError,
  errorFrom,
  FetchTransport,
  ForbiddenError,
  GatewayTimeoutError,
  GuestAgentDisabledError,
  Kairon,
  KaironConnectionError,
  KaironError,
  machineSource,
  networkSpec,
  secretEnv,
  NotFoundError,
  QuotaExceededError,
  Sandbox,
  ServerError,
  TimeoutError,
  UIClient,
  UnauthorizedError,
  VERSION,
} from "../src/index.js";

const env = (k: string): string => {
  const v = process.env[k];
  if (!v) throw new Error(`set ${k} (tests/tests/sdk.rs starts kairon up and sets it)`);
  return v;
};
const NS = "sdk-ts-tests";
const TEMPLATE = process.env.KAIRON_TEST_TEMPLATE ?? "busybox";
const URL_ = env("KAIRON_URL");
const TOKEN = env("KAIRON_TOKEN");
const CA = process.env.KAIRON_CA_FILE ?? env("NODE_EXTRA_CA_CERTS");
const rand = () => Math.random().toString(16).slice(2, 10);
const VARS = ["KAIRON_URL", "KAIRON_TOKEN", "KAIRON_NAMESPACE", "KAIRON_CA_FILE", "KUBECONFIG", "HOME"] as const;

const kubeconfig = (path: string, namespace: string): string => {
  const ca = readFileSync(CA).toString("base64");
  mkdirSync(join(path, ".."), { recursive: true });
  writeFileSync(
    path,
    `apiVersion: v1
kind: Config
clusters:
- name: other
  cluster:
    server: https://127.0.0.1:1
- name: kairon
  cluster:
    server: ${URL_}
    certificate-authority-data: ${ca}
users:
- name: kairon-admin
  user:
    token: ${TOKEN}
contexts:
- name: kairon
  context:
    cluster: kairon
    user: kairon-admin
    namespace: ${namespace}   # the context's namespace
current-context: kairon
`,
  );
  return path;
};

// Both clients reach the server, in the configured namespace.
const works = async (k: Kairon): Promise<void> => {
  const missing = `missing-${rand()}`;
  await assert.rejects(k.ui.getMachine(missing), (e: unknown) => {
    assert.ok(e instanceof NotFoundError);
    assert.match(e.serverMessage, new RegExp(missing));
    return true;
  });
  assert.ok(Array.isArray(await k.kube.listMachines()));
  assert.ok(Array.isArray(await k.sandbox.list()));
};

describe("new Kairon()", { timeout: 120_000 }, () => {
  const saved: Record<string, string | undefined> = {};
  let tmp: string;
  beforeEach(() => {
    for (const k of VARS) {
      saved[k] = process.env[k];
      delete process.env[k];
    }
    tmp = mkdtempSync(join(tmpdir(), "kairon-sdk-"));
    process.env.HOME = join(tmp, "home");
  });
  afterEach(() => {
    for (const k of VARS) {
      if (saved[k] === undefined) delete process.env[k];
      else process.env[k] = saved[k];
    }
  });

  it("from options", async () => {
    const k = new Kairon({ url: URL_, token: TOKEN, namespace: NS, caFile: CA });
    assert.deepEqual([k.url, k.namespace, k.config.source], [URL_.replace(/\/+$/, ""), NS, "options"]);
    await works(k);
    k.close();
  });

  it("from the environment", async () => {
    Object.assign(process.env, { KAIRON_URL: URL_, KAIRON_TOKEN: TOKEN, KAIRON_CA_FILE: CA, KAIRON_NAMESPACE: NS });
    const k = new Kairon();
    assert.deepEqual([k.namespace, k.config.source], [NS, "environment"]);
    await works(k);
    k.close();
    assert.equal(new Kairon({ namespace: "elsewhere" }).namespace, "elsewhere");
  });

  it("from a kubeconfig: $KUBECONFIG, then kairon up's default", async () => {
    const kc = kubeconfig(join(tmp, "kc", "config"), NS);
    process.env.KUBECONFIG = kc;
    let k = new Kairon();
    assert.deepEqual([k.url, k.namespace, k.config.source], [URL_.replace(/\/+$/, ""), NS, kc]);
    assert.match(k.config.caData ?? "", /BEGIN CERTIFICATE/);
    await works(k);
    k.close();
    delete process.env.KUBECONFIG;
    kubeconfig(join(tmp, "home", ".local/state/kairon/kubeconfig"), NS);
    k = new Kairon();
    assert.match(k.config.source, /\.local\/state\/kairon\/kubeconfig$/);
    await works(k);
    k.close();
    // A token from the environment with the kubeconfig's server and CA.
    process.env.KAIRON_TOKEN = "not-a-token";
    k = new Kairon();
    await assert.rejects(k.ui.getMachine("x"), UnauthorizedError);
    k.close();
  });

  it("without a server says what to set", () => {
    assert.throws(() => new Kairon(), (e: unknown) => {
      assert.ok(e instanceof ConfigError && e instanceof KaironError);
      assert.match(e.message, /KAIRON_URL/);
      assert.match(e.message, /kubeconfig/);
      return true;
    });
    assert.throws(() => new Kairon({ kubeconfig: "/nonexistent/kubeconfig" }), ConfigError);
  });
});

const kube = new Client(URL_, TOKEN, { namespace: NS });
const ui = new UIClient(URL_, TOKEN, { namespace: NS });

const eventually = async (what: string, check: () => Promise<boolean>, timeoutMs = 180_000): Promise<void> => {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() >= deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
};
const gone = (get: () => Promise<unknown>) => async (): Promise<boolean> => {
  try {
    await get();
    return false;
  } catch (e) {
    if (e instanceof NotFoundError) return true;
    throw e;
  }
};

describe("network", () => {
  it("is the node's policy, none, or an allowlist", () => {
    assert.equal(networkSpec(undefined), undefined);
    assert.equal(networkSpec("internet"), undefined);
    assert.deepEqual(networkSpec("none"), { egress: { mode: "None" } });
    assert.deepEqual(networkSpec(["pypi.org", ".pythonhosted.org"]), {
      egress: { mode: "Allowlist", allow: ["pypi.org", ".pythonhosted.org"] },
    });
    const refusals: [unknown, string][] = [["offline", '"none"'], ["pypi.org", '["pypi.org"]'], [[], '"none"']];
    for (const [bad, says] of refusals) {
      assert.throws(() => networkSpec(bad as never), (e: unknown) => e instanceof TypeError && e.message.includes(says));
    }
  });
});

describe("secrets", () => {
  it("name a Secret and its key", () => {
    assert.deepEqual(secretEnv({ OPENAI_API_KEY: "openai/api-key" }), { OPENAI_API_KEY: { name: "openai", key: "api-key" } });
    assert.deepEqual(secretEnv(undefined), {});
    for (const bad of ["openai", "openai/", "/key", "a/b/c"]) {
      assert.throws(() => secretEnv({ K: bad }), (e: unknown) => e instanceof TypeError && e.message.includes("SECRET/KEY"));
    }
  });
});

describe("what boots", () => {
  it("one rule: a template, or a VM image path on the node", async () => {
    assert.deepEqual(machineSource({ template: "python" }), { sandbox: { templateName: "python" } });
    const vm = "/var/lib/fluxvm/images/kairon-hw.qcow2";
    assert.deepEqual(machineSource({ image: vm }), { image: { path: vm } });
    const refusals: [{ image?: string; template?: string }, string][] = [
      [{ image: "python" }, "pass template='python'"],
      [{ image: "ghcr.io/org/app:1" }, "kaironctl build template NAME --node NODE --image ghcr.io/org/app:1"],
      [{ image: "images/vm.qcow2" }, "is not a path on the node"],
      [{ image: vm, template: "python" }, "not both"],
      [{}, "pass template"],
      [{ template: "ghcr.io/org/app:1" }, "is not a template name"],
    ];
    for (const [source, says] of refusals) {
      assert.throws(() => machineSource(source), (e: unknown) => e instanceof TypeError && e.message.includes(says));
    }
    // Refused before any request: this client's server does not exist.
    const nowhere = new Client("https://127.0.0.1:9", "token", { namespace: NS });
    await assert.rejects(
      Sandbox.create(nowhere, new UIClient("https://127.0.0.1:9", "token", { namespace: NS }), { image: "python" }),
      TypeError,
    );
  });
});

describe("sandboxes", { timeout: 600_000 }, () => {
  it("connect, list and info", async () => {
    const k = new Kairon({ url: URL_, token: TOKEN, namespace: NS });
    const suite = rand();
    const sb = await k.sandbox.create({ template: TEMPLATE, labels: { suite } });
    try {
      const info = await sb.info();
      assert.deepEqual([info.metadata?.name, info.status?.phase], [sb.name, "Running"]);
      assert.deepEqual((await k.sandbox.list({ labels: { suite } })).map((s) => s.name), [sb.name]);
      assert.deepEqual(await Sandbox.list(kube, ui, { labels: { suite: `${suite}-none` } }), []);
      const same = await Sandbox.connect(kube, ui, sb.name, { readyTimeout: 60 });
      assert.deepEqual([same.name, same.namespace, same.claim], [sb.name, NS, undefined]);
      assert.equal((await same.run("echo attached", { check: true })).stdout, "attached\n");
      await assert.rejects(k.sandbox.connect(`missing-${suite}`), NotFoundError);
      // A connected sandbox closes as any other: the Machine is deleted.
      await same.close();
      await assert.rejects(sb.info(), NotFoundError);
    } finally {
      await sb.close();
    }
  });

  it("claimFrom a pool without guest agent throws GuestAgentDisabledError at once", async () => {
    const pool = `noagent-${rand().slice(0, 6)}`;
    await kube.createPool({
      metadata: { name: pool },
      spec: { replicas: 1, warmupSeconds: 1, template: { spec: { sandbox: { templateName: TEMPLATE } } } },
    });
    try {
      await eventually(`pool ${pool} to have a warm member`, async () => {
        const p = (await kube.getPool(pool)) as { status?: { warm?: number } };
        return (p.status?.warm ?? 0) >= 1;
      });
      const started = Date.now();
      await assert.rejects(Sandbox.claimFrom(kube, ui, pool), (e: unknown) => {
        assert.ok(e instanceof GuestAgentDisabledError);
        assert.match(e.serverMessage, /spec\.guestAgent/);
        return true;
      });
      const took = (Date.now() - started) / 1000;
      assert.ok(took < 30, `claimFrom took ${took} s to give up`);
    } finally {
      await kube.deletePool(pool);
      await eventually(`pool ${pool} to be gone`, gone(() => kube.getPool(pool)));
    }
  });
});

const closedPort = async (): Promise<number> => {
  const s = createNetServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const port = (s.address() as { port: number }).port;
  await new Promise((r) => s.close(r));
  return port;
};

/** A loopback HTTP server that answers every request with `status` (or hangs up when 0) and records method and User-Agent. */
const recorder = async (status: number): Promise<{ url: string; seen: [string, string][]; close: () => Promise<void> }> => {
  const seen: [string, string][] = [];
  const server: Server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      seen.push([req.method ?? "", req.headers["user-agent"] ?? ""]);
      if (status === 0) {
        req.socket.destroy();
        return;
      }
      res.writeHead(status, { "Content-Type": "application/json" });
      res.end(JSON.stringify({ reason: "ServiceUnavailable", message: "busy" }));
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  return {
    url,
    seen,
    close: () => new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    }),
  };
};

describe("transport", { timeout: 60_000 }, () => {
  it("an unreachable server is a KaironConnectionError after the retries", async () => {
    const url = `http://127.0.0.1:${await closedPort()}`;
    const c = new Client(url, "t", { retries: 2 });
    const u = new UIClient(url, "t", { retries: 2 });
    for (const call of [() => c.getMachine("x"), () => u.getMachine("x"), () => c.createMachine({ metadata: { name: "x" } })]) {
      const started = Date.now();
      await assert.rejects(call(), (e: unknown) => {
        assert.ok(e instanceof KaironConnectionError && e instanceof KaironError);
        assert.match(e.message, /unreachable after 3 attempts/);
        return true;
      });
      assert.ok(Date.now() - started < 10_000);
    }
  });

  // Node's transport (node:http) and the browser's (fetch), each with 2 retries.
  for (const [which, wire] of [["node:http", undefined], ["fetch", new FetchTransport({ retries: 2 })]] as const) {
    it(`a create is sent once, a GET is retried (${which})`, async () => {
      const r = await recorder(503);
      try {
        const c = new Client(r.url, "t", { retries: 2, wire });
        const u = new UIClient(r.url, "t", { retries: 2, wire });
        await assert.rejects(c.createMachine({ metadata: { name: "x" } }), (e: unknown) => {
          assert.ok(e instanceof ServerError);
          assert.equal(e.status, 503);
          assert.ok(e.transient);
          return true;
        });
        assert.deepEqual(r.seen.map(([m]) => m), ["POST"]);
        await assert.rejects(u.exec("x", ["true"]), ServerError);
        assert.deepEqual(r.seen.map(([m]) => m), ["POST", "POST"]);
        r.seen.length = 0;
        await assert.rejects(c.getMachine("x"), ServerError);
        await assert.rejects(u.getMachine("x"), ServerError);
        assert.deepEqual(r.seen.map(([m]) => m), Array(6).fill("GET"));
      } finally {
        await r.close();
      }
    });
  }

  it("a create whose connection broke is not sent again", async () => {
    const r = await recorder(0);
    try {
      const c = new Client(r.url, "t", { retries: 2 });
      await assert.rejects(c.createMachine({ metadata: { name: "x" } }), KaironConnectionError);
      assert.deepEqual(r.seen.map(([m]) => m), ["POST"]);
      await assert.rejects(c.getMachine("x"), KaironConnectionError);
      assert.deepEqual(r.seen.map(([m]) => m), ["POST", "GET", "GET", "GET"]);
    } finally {
      await r.close();
    }
  });

  it("sends the User-Agent", async () => {
    const r = await recorder(503);
    try {
      await assert.rejects(new Client(r.url, "t", { retries: 0 }).getMachine("x"), ServerError);
      await assert.rejects(new UIClient(r.url, "t", { retries: 0 }).getMachine("x"), ServerError);
      const want = `kairon-sdk-typescript/${VERSION}`;
      assert.deepEqual(r.seen.map(([, ua]) => ua), [want, want]);
    } finally {
      await r.close();
    }
  });

  it("the browser's transport (fetch) retries a GET it could not send, never a create", async () => {
    const down = new Client(`http://127.0.0.1:${await closedPort()}`, "t", { wire: new FetchTransport({ retries: 2 }) });
    await assert.rejects(down.getMachine("x"), (e: unknown) => e instanceof KaironConnectionError && /unreachable after 3 attempts/.test(e.message));
    // A browser cannot tell a connection never made from one broken mid-way: a create is not sent again.
    await assert.rejects(down.createMachine({ metadata: { name: "x" } }), (e: unknown) => e instanceof KaironConnectionError && !/attempts/.test(e.message));
  });

  it("VERSION is the package's", () => {
    const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string };
    assert.equal(VERSION, pkg.version);
  });

  it("error classes", () => {
    assert.equal(GatewayTimeoutError, TimeoutError);
    assert.ok(new TimeoutError(504, "Timeout", "waited").transient);
    assert.ok(!new GuestAgentDisabledError(409, "GuestAgentDisabled", "no agent").transient);
    const quota = errorFrom(403, { reason: "QuotaExceeded", message: "exceeded quota: limits, requested: machines=1" });
    assert.ok(quota instanceof QuotaExceededError && quota instanceof ForbiddenError && !quota.transient);
    assert.equal(errorFrom(403, { reason: "Forbidden", message: "no" }).constructor, ForbiddenError);
  });
});
