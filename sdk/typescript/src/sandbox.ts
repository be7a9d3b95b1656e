/**
 * `Sandbox`: one Machine an agent works in.
 *
 *     await using sb = await Sandbox.create(kube, ui, { image: "/var/lib/fluxvm/images/kairon-hw.qcow2",
 *                                                      idleTimeout: 600, maxLifetime: 3600 });
 *     console.log((await sb.run("uname -a", { check: true })).stdout);
 *
 * What boots is one of two things, by one rule shared with the Python SDK and the MCP tools
 * (`machineSource`): `template: "python"` names a sandbox template built on the node
 * (`spec.sandbox.templateName`, a runc sandbox), and `image: "/var/lib/..."` is the path, on the
 * node, of a VM disk image (`spec.image.path`), so it starts with `/`. Anything else given as
 * `image` (`"python"`, `"ghcr.io/org/app:1"`) is refused before any request, saying which to use:
 * an OCI image is built into a template first (`kaironctl build template NAME --node N --image REF`).
 *
 * With `const k = new Kairon()` the same reads `k.sandbox.create({ template })`,
 * `k.sandbox.claimFrom(pool)`, `k.sandbox.connect(name)` and `k.sandbox.list()`.
 *
 * Waits retry only what may go away by itself (`ApiError.transient`): a Machine not yet
 * scheduled, a guest agent not yet up. A refusal such as `GuestAgentDisabledError` is thrown at once.
 */

import { CONTEXT_SCRIPT, CodeContext } from "./code.js";
import { Client, UIClient, type Json, type Machine, type MachineMetrics, type Preview, type Signal } from "./client.js";
import { ApiError, CommandError, KaironConnectionError, KaironError, KaironTimeoutError, NotFoundError } from "./errors.js";
import { Files } from "./files.js";
import { EXEC_DEFAULT_TIMEOUT } from "./retry.js";
import { nodeOnly, platform, type LocalForward } from "./platform.js";
import { Pty, type PtyOptions } from "./pty.js";

/** The label `Sandbox.create` puts on its Machines (and the operator-exec rule looks for). */
export const SANDBOX_LABEL = "kairon.zyvor.dev/sandbox";
/** The label naming the MachineClaim a pool member is bound to. */
export const CLAIM_LABEL = "kairon.zyvor.dev/claim";

/** What a finished command printed and how it exited. */
export interface RunResult {
  /** Everything the command wrote to stdout. */
  stdout: string;
  /** Everything it wrote to stderr. */
  stderr: string;
  /** Its exit code. */
  exitCode: number;
  /** Whether it was killed at its timeout. */
  timedOut: boolean;
}

/** What `network` may be: the node's policy (`"internet"`), nothing (`"none"`), or the hosts to allow. */
export type NetworkOption = "internet" | "none" | string[];

/** The `spec.network` for `network`: `undefined` or `"internet"` leaves the node's egress policy (the
 * internet, never the inside), `"none"` reaches nothing, and a list of hosts (`["pypi.org",
 * ".pythonhosted.org", "198.51.100.0/24"]`) only those. A Machine only narrows its node's policy.
 * Throws a `TypeError` saying what to pass instead. */
export function networkSpec(network: NetworkOption | undefined): Record<string, unknown> | undefined {
  if (network === undefined || network === "internet") return undefined;
  if (network === "none") return { egress: { mode: "None" } };
  if (typeof network === "string") {
    throw new TypeError(`network: ${JSON.stringify(network)}: pass "internet", "none", or a list of hosts to allow ([${JSON.stringify(network)}] allows that one)`);
  }
  if (!Array.isArray(network) || network.length === 0 || !network.every((h) => typeof h === "string" && h)) {
    throw new TypeError('network as a list names the hosts to allow (such as ["pypi.org", ".pythonhosted.org"]); for no network at all pass "none"');
  }
  return { egress: { mode: "Allowlist", allow: [...network] } };
}

/** The `spec.secretEnv` for `secrets`: `{ OPENAI_API_KEY: "my-secret/api-key" }` gives the variable the key
 * `api-key` of the Secret `my-secret` in the sandbox's namespace (an Opaque Secret labelled
 * `kairon.zyvor.dev/secret-env=true`). Throws a `TypeError` saying what to pass. */
export function secretEnv(secrets: Record<string, string> | undefined): Record<string, { name: string; key: string }> {
  const out: Record<string, { name: string; key: string }> = {};
  for (const [name, ref] of Object.entries(secrets ?? {})) {
    const at = ref.indexOf("/");
    const secret = ref.slice(0, at);
    const key = ref.slice(at + 1);
    if (at <= 0 || !key || key.includes("/")) {
      throw new TypeError(`secrets.${name}: ${JSON.stringify(ref)}: write it as "SECRET/KEY" (a Secret of the sandbox's namespace and one of its keys)`);
    }
    out[name] = { name: secret, key };
  }
  return out;
}

/** The part of a Machine's spec saying what boots: `{ sandbox: { templateName } }` or
 * `{ image: { path } }`. Exactly one of the two; `image` is an absolute path on the node. Throws a
 * `TypeError` saying what to pass instead. */
export function machineSource(source: { image?: string; template?: string }): Record<string, unknown> {
  const { image, template } = source;
  if (image !== undefined && template !== undefined) {
    throw new TypeError("pass template (a sandbox template) or image (a VM disk image on the node), not both");
  }
  if (template !== undefined) {
    if (!template || template.includes("/") || template.includes(":")) {
      throw new TypeError(
        `template ${JSON.stringify(template)} is not a template name: name a template built on the node ` +
          "(kaironctl get templates --node NODE), such as 'python'",
      );
    }
    return { sandbox: { templateName: template } };
  }
  if (image === undefined) {
    throw new TypeError(
      "pass template (a sandbox template such as 'python') or image (the path of a VM disk image on the node, " +
        "such as /var/lib/fluxvm/images/kairon-hw.qcow2)",
    );
  }
  if (!image.startsWith("/")) {
    const hint =
      !image.includes("/") && !image.includes(":")
        ? `for the sandbox template '${image}' pass template='${image}'`
        : `an OCI image is built into a template first (kaironctl build template NAME --node NODE --image ${image}), ` +
          "then passed as template='NAME'";
    throw new TypeError(
      `image ${JSON.stringify(image)} is not a path on the node: image takes the path of a VM disk image, ` +
        `such as /var/lib/fluxvm/images/kairon-hw.qcow2; ${hint}`,
    );
  }
  return { image: { path: image } };
}

/** Options of `Sandbox.create`. */
export interface CreateOptions {
  /** A sandbox template built on the node (`python`); or give `image`. */
  template?: string;
  /** The path, on the node, of a VM disk image (`/var/lib/fluxvm/images/kairon-hw.qcow2`). */
  image?: string;
  /** Seconds. */
  idleTimeout?: number;
  /** Seconds. */
  maxLifetime?: number;
  /** What happens once idle (default `Pause`). */
  idleAction?: "Pause" | "Hibernate" | "Halt" | "Stop" | "Delete";
  /** Whether a connection wakes it when suspended (default true). */
  wakeOnConnect?: boolean;
  /** CPUs (`"1"`, `"500m"`; whole CPUs for a VM). */
  cpu?: string;
  /** Memory (`"512Mi"`). */
  memory?: string;
  /** The Machine's name (default `sb-` and random hex). */
  name?: string;
  /** Labels added to the Machine (find it again with `Sandbox.list`). */
  labels?: Record<string, string>;
  /** Environment variables of every command and process in the sandbox (a run's own `env` wins).
   * Not for secrets: every reader of the namespace sees them. */
  env?: Record<string, string>;
  /** Delete it this many seconds after creation (`spec.ttlSeconds`): 300 when neither this nor
   * `maxLifetime` is given, `null` for no deadline. `setTimeout` and `extend` change it later; the
   * earliest deadline wins. */
  timeout?: number | null;
  /** What it reaches (see `networkSpec`): by default the internet its node allows; a refusal shows in
   * `events("EgressDenied")`. */
  network?: NetworkOption;
  /** Variables read from Secrets for each command (`{ OPENAI_API_KEY: "my-secret/api-key" }`, see
   * `secretEnv`): never stored on the Machine. */
  secrets?: Record<string, string>;
  /** Seconds to wait until commands run (default 300). */
  readyTimeout?: number;
}

/** A sandbox's deadline when its maker gives none, in seconds: a forgotten sandbox does not run forever. */
export const DEFAULT_TIMEOUT = 300;

/** The `ttlSeconds` to ask for: `timeout` (null: none), else the default unless another deadline is set. */
function ttlSeconds(timeout: number | null | undefined, otherDeadline: boolean): number | undefined {
  if (timeout === null) return undefined;
  if (timeout === undefined) return otherDeadline ? undefined : DEFAULT_TIMEOUT;
  return Math.round(timeout);
}

/** Options of `Sandbox.run`. */
export interface RunOptions {
  /** Throw `CommandError` when the exit code is not 0. */
  check?: boolean;
  /** Text sent to the command's stdin. */
  stdin?: string;
  /** The working directory (absolute). */
  cwd?: string;
  /** Environment variables added for this command. */
  env?: Record<string, string>;
  /** Run it as this user: `uid[:gid]`, or a name the guest knows (default root). */
  user?: string;
  /** The command's timeout in seconds: 300 when unset, buffered or streamed (the server allows up to
   * 3600); the client waits as long as the command may run. */
  timeout?: number;
  /** Handed stdout as it is produced (text, in pieces as they come); the command then runs as a
   * background process, killed after `timeout` with the output so far kept. No `stdin` then. */
  onStdout?: (text: string) => void;
  /** Handed stderr as it is produced, as `onStdout`. */
  onStderr?: (text: string) => void;
}

const hex = (n: number) =>
  Array.from(crypto.getRandomValues(new Uint8Array(n)), (b) => b.toString(16).padStart(2, "0")).join("").slice(0, n);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
// A string is a shell command line, as a person types it; an array is argv as is.
const argv = (cmd: string | string[]) => (typeof cmd === "string" ? ["/bin/sh", "-c", cmd] : [...cmd]);

/** A piece of a process's output, as it was produced. */
export interface Output {
  /** Which stream it came on. */
  stream: "stdout" | "stderr";
  /** The text, as it was produced. */
  data: string;
}

/** A background process: from `Sandbox.start`, or re-attached by its id with `sandbox.process(pid)` (from
 * another client, after a reconnect: the server keeps its output). Iterating it (`for await`) yields its
 * `Output` as it is produced until it exits, then sets `exitCode`; a dropped connection is resumed where it
 * stopped, and iterating again goes on from there. */
export class SandboxProcess {
  /** Its exit code once it exited and that was read, else null. */
  exitCode: number | null = null;
  /** Whether it was seen to exit. */
  exited = false;
  /** Where this handle has read each stream up to (byte offsets the server gave). */
  readonly offsets = { stdout: 0, stderr: 0 };
  constructor(
    /** The sandbox it runs in. */
    readonly sandbox: Sandbox,
    /** Its id on the server (re-attach with `sandbox.process(pid)`). */
    readonly pid: string,
    /** Its command (argv). */
    readonly command: string[],
  ) {}

  [Symbol.asyncIterator](): AsyncGenerator<Output> {
    return this.output();
  }

  /** The output from where this handle stopped, as it comes, until the process exits. A broken
   * connection is opened again from the offsets seen, for `reconnectFor` seconds at most. */
  async *output(reconnectFor = 60): AsyncGenerator<Output> {
    const { ui, name, namespace } = this.sandbox;
    let brokenSince: number | null = null;
    while (!this.exited) {
      try {
        const events = ui.processEvents(name, this.pid, { stdoutOffset: this.offsets.stdout, stderrOffset: this.offsets.stderr, namespace });
        for await (const ev of events) {
          brokenSince = null;
          if (ev.type === "stdout" || ev.type === "stderr") {
            this.offsets[ev.type] = ev.end;
            yield { stream: ev.type, data: ev.data };
          } else if (ev.type === "exit") {
            this.exitCode = typeof ev.exitCode === "number" ? ev.exitCode : null;
            this.exited = true;
          }
        }
        return;
      } catch (e) {
        if (e instanceof ApiError) throw e;
        const now = Date.now();
        brokenSince ??= now;
        if (now - brokenSince > reconnectFor * 1000) {
          throw new KaironConnectionError(`process ${this.pid}: the stream broke and did not come back: ${String(e)}`);
        }
        await sleep(500);
      }
    }
  }

  /** Waits for the process to exit; its exit code (null when a signal ended it). */
  async wait(timeout = 600): Promise<number | null> {
    const deadline = Date.now() + timeout * 1000;
    for (;;) {
      const left = Math.max(1, Math.min(300, Math.floor((deadline - Date.now()) / 1000)));
      const p = await this.sandbox.ui.waitProcess(this.sandbox.name, this.pid, left, this.sandbox.namespace);
      if (p.state === "exited") {
        this.exitCode = typeof p.exitCode === "number" ? p.exitCode : null;
        return this.exitCode;
      }
      if (Date.now() >= deadline) throw new KaironTimeoutError(`process ${this.pid} still running after ${timeout} s`);
    }
  }

  /** Whether the process is still running. */
  async running(): Promise<boolean> {
    return (await this.sandbox.ui.getProcess(this.sandbox.name, this.pid, this.sandbox.namespace)).state === "running";
  }

  /** The output so far: `stdout` (default), `stderr`, or `both`. */
  async logs(stream: "stdout" | "stderr" | "both" = "stdout"): Promise<string> {
    const l = await this.sandbox.ui.processLogs(this.sandbox.name, this.pid, this.sandbox.namespace);
    return stream === "stderr" ? l.stderr : stream === "both" ? l.stdout + l.stderr : l.stdout;
  }

  /** Writes to the process's stdin (one started with `stdin: true`, or with text for it); a `ConflictError`
   * with reason `StdinClosed` once it is closed or the process is gone. */
  async write(data: string | Uint8Array): Promise<void> {
    await this.sandbox.ui.writeStdin(this.sandbox.name, this.pid, data, { namespace: this.sandbox.namespace });
  }

  /** Closes the process's stdin: it reads end of file. */
  async closeStdin(): Promise<void> {
    await this.sandbox.ui.writeStdin(this.sandbox.name, this.pid, "", { close: true, namespace: this.sandbox.namespace });
  }

  /** Sends `signal` (default KILL). */
  async kill(signal?: Signal): Promise<void> {
    await this.sandbox.ui.killProcess(this.sandbox.name, this.pid, signal, this.sandbox.namespace);
  }
}

/** A Machine to work in: `Sandbox.create`, `Sandbox.claimFrom`, or `Sandbox.connect` to an existing
 * one; `close()` (or leaving an `await using` scope) deletes it or releases its claim. */
export class Sandbox {
  /** Whether `close()` was called. */
  closed = false;
  /** Wraps the Machine `name` as is (no request); prefer `create`, `claimFrom` or `connect`. */
  constructor(
    /** The Kubernetes-compatible API client it was made with. */
    readonly kube: Client,
    /** The REST API client it was made with. */
    readonly ui: UIClient,
    /** The Machine's name. */
    readonly name: string,
    /** The Machine's namespace. */
    readonly namespace: string = kube.namespace,
    /** The claim it came from (`claimFrom`): `close()` releases it instead of deleting the Machine. */
    readonly claim?: string,
  ) {}

  /** Creates a Machine (labelled `kairon.zyvor.dev/sandbox=true`, guest agent on) from a sandbox
   * `template` or a VM `image` (see `machineSource`) and waits until commands run in it.
   * `idleTimeout` and `maxLifetime` are seconds. */
  static async create(kube: Client, ui: UIClient, opts: CreateOptions): Promise<Sandbox> {
    const source = machineSource(opts);
    const network = networkSpec(opts.network);
    const secrets = secretEnv(opts.secrets);
    const name = opts.name ?? `sb-${hex(10)}`;
    const spec: Record<string, unknown> = { guestAgent: { enabled: true, console: true }, ...source };
    if ("image" in source) {
      spec.resources = { cpu: opts.cpu ?? "1", memory: opts.memory ?? "512Mi" };
    } else if (opts.cpu || opts.memory) {
      spec.resources = { cpu: opts.cpu, memory: opts.memory };
    }
    const lifecycle: Record<string, unknown> = { wakeOnConnect: opts.wakeOnConnect ?? true };
    if (opts.idleTimeout !== undefined) lifecycle.idleTimeoutSeconds = Math.round(opts.idleTimeout);
    if (opts.maxLifetime !== undefined) lifecycle.maxLifetimeSeconds = Math.round(opts.maxLifetime);
    if (opts.idleAction !== undefined) lifecycle.idleAction = opts.idleAction;
    spec.lifecycle = lifecycle;
    const ttl = ttlSeconds(opts.timeout, opts.maxLifetime !== undefined);
    if (ttl !== undefined) spec.ttlSeconds = ttl;
    if (opts.env && Object.keys(opts.env).length > 0) spec.env = opts.env;
    if (network) spec.network = network;
    if (Object.keys(secrets).length > 0) spec.secretEnv = secrets;
    await kube.createMachine({ metadata: { name, labels: { [SANDBOX_LABEL]: "true", ...opts.labels } }, spec });
    const sb = new Sandbox(kube, ui, name);
    try {
      await sb.waitReady(opts.readyTimeout ?? 300);
    } catch (e) {
      await sb.close().catch(() => undefined);
      throw e;
    }
    return sb;
  }

  /** Claims a warm member of the MachinePool `pool`; `close()` releases the claim, which ends `timeout`
   * seconds after it binds (300 when not given, `null` for none; `ttl` is the older name of the same).
   * `env` is set for every command and process of this claimant (over the pool template's), without a
   * cold start. */
  static async claimFrom(
    kube: Client,
    ui: UIClient,
    pool: string,
    opts: {
      timeout?: number | null;
      ttl?: number;
      env?: Record<string, string>;
      secrets?: Record<string, string>;
      readyTimeout?: number;
    } = {},
  ): Promise<Sandbox> {
    const secrets = secretEnv(opts.secrets);
    const claim = `${pool}-${hex(8)}`;
    const spec: Record<string, unknown> = { poolName: pool };
    const ttl = opts.ttl !== undefined ? Math.round(opts.ttl) : ttlSeconds(opts.timeout, false);
    if (ttl !== undefined) spec.ttlSeconds = ttl;
    if (opts.env && Object.keys(opts.env).length > 0) spec.env = opts.env;
    if (Object.keys(secrets).length > 0) spec.secretEnv = secrets;
    const created = await kube.createClaim({ metadata: { name: claim }, spec });
    try {
      // A claim binds in its create request when a member is warm; else wait for it.
      const status = (created.status ?? {}) as { phase?: string; machineName?: string };
      let machine = status.phase === "Bound" ? status.machineName : undefined;
      if (!machine) {
        const bound = await ui.waitClaim(claim, { phase: "Bound", timeout: opts.readyTimeout ?? 300 });
        machine = bound.status?.machineName ?? undefined;
      }
      if (!machine) throw new KaironError(`claim ${claim} is Bound but names no Machine`);
      const sb = new Sandbox(kube, ui, machine, kube.namespace, claim);
      // A warm member needs no waiting for Running: its first exec resumes it.
      await sb.waitReady(opts.readyTimeout ?? 300, { warm: true });
      return sb;
    } catch (e) {
      await kube.deleteClaim(claim).catch(() => undefined);
      throw e;
    }
  }

  /** Attaches to the existing Machine `name` (NotFoundError if there is none). A pool member bound
   * by a claim is attached with its claim, so `close()` releases the claim; else `close()` deletes
   * the Machine, as for any Sandbox (just don't close it to leave it be). With `readyTimeout`
   * (seconds), also waits until commands run in it. */
  static async connect(kube: Client, ui: UIClient, name: string, opts: { namespace?: string; readyTimeout?: number } = {}): Promise<Sandbox> {
    const ns = opts.namespace ?? kube.namespace;
    const m = (await kube.getMachine(name, ns)) as { metadata?: { labels?: Record<string, string> } };
    const sb = new Sandbox(kube, ui, name, ns, m.metadata?.labels?.[CLAIM_LABEL] || undefined);
    if (opts.readyTimeout !== undefined) await sb.waitReady(opts.readyTimeout);
    return sb;
  }

  /** The sandboxes (Machines labelled `kairon.zyvor.dev/sandbox=true`) of the namespace that also
   * carry every one of `labels`, as `connect` would attach to them. */
  static async list(kube: Client, ui: UIClient, opts: { labels?: Record<string, string>; namespace?: string } = {}): Promise<Sandbox[]> {
    const ns = opts.namespace ?? kube.namespace;
    const items = await kube.listMachines({ namespace: ns, labels: { [SANDBOX_LABEL]: "true", ...opts.labels } });
    return items.map((m) => {
      const meta = (m.metadata ?? {}) as { name?: string; labels?: Record<string, string> };
      return new Sandbox(kube, ui, String(meta.name), ns, meta.labels?.[CLAIM_LABEL] || undefined);
    });
  }

  /** Running (unless `warm`: a claimed member's first exec resumes it), then the guest agent
   * answers (a VM's boots a moment after its VMM runs). Only what may pass is retried
   * (`ApiError.transient`): GuestAgentDisabled, MachineSuspended, NotFound and every other
   * refusal are thrown at once; running out of time throws KaironTimeoutError. */
  async waitReady(timeout = 300, opts: { warm?: boolean } = {}): Promise<void> {
    const deadline = Date.now() + timeout * 1000;
    if (!opts.warm) await this.ui.waitMachine(this.name, { phase: "Running", timeout, namespace: this.namespace });
    let last: ApiError | undefined;
    for (;;) {
      try {
        const r = await this.ui.exec(this.name, ["true"], { timeout: 10, namespace: this.namespace });
        if (r.exitCode === 0) return;
      } catch (e) {
        if (!(e instanceof ApiError) || !e.transient) throw e;
        last = e;
      }
      if (Date.now() >= deadline) {
        const why = last ? ` (last: ${last.message})` : "";
        throw new KaironTimeoutError(`sandbox ${this.name}: the guest agent did not answer within ${timeout} s${why}`, { cause: last });
      }
      await sleep(500);
    }
  }

  /** Runs `cmd` to completion; with `check`, a non-zero exit throws CommandError. */
  async run(cmd: string | string[], opts: RunOptions = {}): Promise<RunResult> {
    const command = argv(cmd);
    let result: RunResult;
    if (opts.onStdout || opts.onStderr) {
      if (opts.stdin !== undefined) {
        throw new TypeError("a streamed run takes no stdin: write it to a file and redirect, or run without onStdout/onStderr");
      }
      result = await this.#runStreamed(command, opts);
    } else {
      const { stdin, cwd, env, user, timeout } = opts;
      const r = await this.ui.exec(this.name, command, { stdin, cwd, env, user, timeout, namespace: this.namespace });
      result = { stdout: r.stdout, stderr: r.stderr, exitCode: r.exitCode, timedOut: r.timedOut ?? false };
    }
    if (opts.check && (result.exitCode !== 0 || result.timedOut)) {
      throw new CommandError(command, result.exitCode, result.stdout, result.stderr);
    }
    return result;
  }

  async #runStreamed(command: string[], opts: RunOptions): Promise<RunResult> {
    const p = await this.start(command, { cwd: opts.cwd, env: opts.env, user: opts.user });
    const got = { stdout: "", stderr: "" };
    const hands = { stdout: opts.onStdout, stderr: opts.onStderr };
    // One stream carries both outputs and the exit (the server keeps them).
    const follow = (async () => {
      for await (const out of p) {
        got[out.stream] += out.data;
        hands[out.stream]?.(out.data);
      }
    })();
    // Awaited below; a failure meanwhile is not an unhandled rejection.
    follow.catch(() => undefined);
    let timedOut = false;
    let code: number | null;
    try {
      code = await p.wait(opts.timeout ?? EXEC_DEFAULT_TIMEOUT);
    } catch (e) {
      if (!(e instanceof KaironTimeoutError)) throw e;
      timedOut = true;
      await p.kill();
      code = await p.wait(60);
    }
    await follow;
    return { stdout: got.stdout, stderr: got.stderr, exitCode: code ?? -1, timedOut };
  }

  /** Starts `cmd` in the background; iterate the handle (`for await`) for its output as it comes. With
   * `stdin: true` (or text to write first) its stdin stays open: `p.write(...)`, then `p.closeStdin()`. */
  async start(
    cmd: string | string[],
    opts: { cwd?: string; env?: Record<string, string>; user?: string; stdin?: boolean | string } = {},
  ): Promise<SandboxProcess> {
    const command = argv(cmd);
    const { stdin, ...rest } = opts;
    const p = await this.ui.startProcess(this.name, command, {
      ...rest,
      stdin: typeof stdin === "string" ? stdin : undefined,
      keepStdinOpen: stdin !== undefined && stdin !== false,
      namespace: this.namespace,
    });
    return new SandboxProcess(this, p.id, command);
  }

  /** A code context: an interpreter (`python`, or `javascript` where the template has Node) whose variables
   * outlive each `ctx.run(code)`; with `opts.id`, the running one of that id (from this or another client). A
   * `KaironError` says so when the guest has no such interpreter. `close()` it (or `await using`). */
  async codeContext(
    language = "python",
    opts: { id?: string; cwd?: string; env?: Record<string, string>; user?: string } = {},
  ): Promise<CodeContext> {
    const { id, ...run } = opts;
    if (id !== undefined) {
      const p = await this.process(id);
      return new CodeContext(p, p.command.at(-1) ?? language);
    }
    const p = await this.start(["/bin/sh", "-c", CONTEXT_SCRIPT, "context", language], { ...run, stdin: true });
    const ctx = new CodeContext(p, language);
    await ctx.waitReady();
    return ctx;
  }

  /** Re-attaches to the background process `pid` (one this or another client started; the server keeps its
   * output): `NotFoundError` if there is none. */
  async process(pid: string): Promise<SandboxProcess> {
    const p = await this.ui.getProcess(this.name, pid, this.namespace);
    const handle = new SandboxProcess(this, p.id, [...p.command]);
    if (p.state === "exited") handle.exitCode = typeof p.exitCode === "number" ? p.exitCode : null;
    return handle;
  }

  /** Every background process of the sandbox, running or exited, oldest first. */
  async processes(): Promise<SandboxProcess[]> {
    const all = await this.ui.listProcesses(this.name, this.namespace);
    return all.map((p) => new SandboxProcess(this, p.id, [...p.command]));
  }

  /** Writes `data` to the absolute `path` in the sandbox (`mode` is octal, e.g. `755`). */
  async writeFile(path: string, data: Uint8Array | string, opts: { mode?: string } = {}): Promise<void> {
    await this.ui.writeFile(this.name, path, data, { ...opts, namespace: this.namespace });
  }

  /** The sandbox's files: read, write, writeMany, list, exists, remove, makeDir. */
  get files(): Files {
    return new Files(this);
  }

  /** The bytes of the sandbox's file at the absolute `path`. */
  async readFile(path: string): Promise<Uint8Array> {
    return this.ui.readFile(this.name, path, this.namespace);
  }

  /** Pauses (memory kept, no CPU) and waits until Paused. */
  async pause(timeout = 300): Promise<void> {
    await this.ui.pause(this.name, this.namespace);
    await this.ui.waitMachine(this.name, { phase: "Paused", timeout, namespace: this.namespace });
  }

  /** Resumes and waits until commands run again. */
  async resume(timeout = 300): Promise<void> {
    await this.ui.resume(this.name, this.namespace);
    await this.waitReady(timeout);
  }

  /** Hibernates a VM (memory to disk, nothing runs) and waits until Hibernated; `resume()` brings it
   * back as it was. A sandbox cannot: `PowerStateUnsupportedError` (a `ConflictError`), at once. */
  async hibernate(timeout = 300): Promise<void> {
    await this.ui.hibernate(this.name, this.namespace);
    await this.ui.waitMachine(this.name, { phase: "Hibernated", timeout, namespace: this.namespace });
  }

  /** Powers a VM's guest off (its disk kept) and waits until Halted; `resume()` boots it again. A
   * sandbox cannot: a `ConflictError` with reason `PowerStateUnsupported`, at once. */
  async halt(timeout = 300): Promise<void> {
    await this.ui.halt(this.name, this.namespace);
    await this.ui.waitMachine(this.name, { phase: "Halted", timeout, namespace: this.namespace });
  }

  /** Restarts the guest (processes end, the disk stays) and waits until commands run. */
  async restart(timeout = 300): Promise<void> {
    await this.ui.restart(this.name, this.namespace);
    await this.waitReady(timeout);
  }

  /** The Machine's labels now. */
  async labels(): Promise<Record<string, string>> {
    const m = await this.kube.getMachine(this.name, this.namespace);
    return { ...((m.metadata as { labels?: Record<string, string> } | undefined)?.labels ?? {}) };
  }

  /** Sets (or, with null, removes) labels on the Machine; its labels afterwards. */
  async setLabels(labels: Record<string, string | null>): Promise<Record<string, string>> {
    const m = await this.kube.patchMachine(this.name, { metadata: { labels } }, this.namespace);
    return { ...((m.metadata as { labels?: Record<string, string> } | undefined)?.labels ?? {}) };
  }

  /** The HTTPS URL of a server listening on `port` in the sandbox, through Kairon's authenticated
   * proxy (send the same bearer token; a paused sandbox with wake-on-connect wakes). */
  url(port: number, path = "/"): string {
    if (!Number.isInteger(port) || port < 1 || port > 65535) throw new RangeError(`port ${port} is not from 1 to 65535`);
    const [ns, name] = [encodeURIComponent(this.namespace), encodeURIComponent(this.name)];
    return `${this.ui.url}/api/v1/machines/${ns}/${name}/sandbox-http/${port}/${path.replace(/^\/+/, "")}`;
  }

  /** A preview link to the server listening on `port` in the sandbox: `.url` opens in any browser with no header
   * (send it to a person), on a host of its own, for `ttl` seconds (an hour when unset, at most 7 days); revoke it
   * with `revokePreview`. It dies with the sandbox; a paused sandbox with wake-on-connect wakes when it is opened. */
  async preview(port: number, opts: { ttl?: number } = {}): Promise<Preview> {
    if (!Number.isInteger(port) || port < 1 || port > 65535) throw new RangeError(`port ${port} is not from 1 to 65535`);
    return this.ui.createPreview(this.name, port, { ttl: opts.ttl, namespace: this.namespace });
  }

  /** The URL of a new preview link to `port` (see `preview`). */
  async previewUrl(port: number, opts: { ttl?: number } = {}): Promise<string> {
    const made = await this.preview(port, opts);
    if (!made.url) throw new Error("the server made a preview link without its URL");
    return made.url;
  }

  /** The sandbox's live preview links, newest first (their URLs are given only when made). */
  previews(): Promise<Preview[]> {
    return this.ui.previews(this.name, this.namespace);
  }

  /** Revokes a preview link (a `Preview` or its `id`): it answers 404 from now on. */
  revokePreview(preview: Preview | string): Promise<void> {
    return this.ui.revokePreview(this.name, typeof preview === "string" ? preview : preview.id, this.namespace);
  }

  /** Moves the sandbox's end `seconds` later and returns the new end: each deadline that would end it
   * sooner (its max lifetime, ttlSeconds, its claim's ttl) is lengthened. A sandbox with no deadline
   * is refused with a `ConflictError` (reason `NoDeadline`). */
  async extend(seconds: number): Promise<Date> {
    const r = await this.ui.extend(this.name, seconds, this.namespace);
    return new Date(r.expiresAt);
  }

  /** Ends the sandbox `seconds` from now, whether it had a deadline or not, sooner or later than
   * before (its `spec.ttlSeconds`); its max lifetime and claim TTL stay, and the earliest deadline
   * wins. Returns when it now ends. */
  async setTimeout(seconds: number): Promise<Date> {
    const r = await this.ui.setTimeout(this.name, seconds, this.namespace);
    return new Date(r.expiresAt);
  }

  /** When the sandbox will be deleted (the earliest of its max lifetime, ttlSeconds and its claim's
   * ttl), as the server last recorded it (`status.lifecycle.expiresAt`); null when it has no deadline. */
  async expiresAt(): Promise<Date | null> {
    const at = (await this.info()).status?.lifecycle?.expiresAt;
    return at ? new Date(at) : null;
  }

  /** What the sandbox uses now, sampled on its node: `cpuPercent` (of one core, over `window` seconds),
   * `memoryUsedBytes` of `memoryLimitBytes`, `diskUsedBytes`, `networkRxBytes`/`networkTxBytes`, `processCount`.
   * Reading them does not wake it or keep it awake. */
  metrics(window = 0.5): Promise<MachineMetrics> {
    return this.ui.metrics(this.name, { window, namespace: this.namespace });
  }

  /** `metrics()` one after another, each measured over the `interval` seconds before it, for as long as it is
   * iterated. */
  async *metricsStream(interval = 1): AsyncGenerator<MachineMetrics> {
    for (;;) yield await this.metrics(interval);
  }

  /**
   * A terminal running `opts.command` (default a login shell) of `cols` x `rows` (default 80 x 24), with
   * `TERM=xterm-256color` unless `opts.env` names another: `write` types into it, `resize`, `readUntil`, `wait`
   * and `kill` as their names say; `onData` gets what it shows. Sandboxes, and VMs whose image runs kairon-agent.
   *
   *     await using term = await sb.pty({ onData: (d) => process.stdout.write(d) });
   *     term.write("tput cols\n");
   *     term.resize(120, 40);
   *     term.write("exit 3\n");
   *     await term.wait(); // 3
   */
  pty(opts: PtyOptions = {}): Promise<Pty> {
    return Pty.open((query) => this.ui.relay(this.name, `exec/stream?${query}`, this.namespace), opts);
  }

  /** Carries 127.0.0.1:`localPort` (0: any free port; see `.localPort` and `.url`) to `port` in the sandbox, each
   * connection through its own authenticated relay; `close()` it (or `await using`). The sandbox must exist. */
  async portForward(port: number, localPort = 0): Promise<LocalForward> {
    const forward = nodeOnly(platform().forward, "portForward", "reach the port at sb.url(port) instead");
    await this.info();
    return forward(() => this.ui.relay(this.name, `portforward/${port}`, this.namespace), port, localPort);
  }

  /** A copy of this sandbox (live on a VM; the filesystem of a runc sandbox); its close() deletes it. */
  async fork(name?: string, readyTimeout = 300): Promise<Sandbox> {
    const child = name ?? `${this.name}-f${hex(6)}`;
    await this.ui.fork(this.name, child, this.namespace);
    const sb = new Sandbox(this.kube, this.ui, child, this.namespace);
    try {
      await sb.waitReady(readyTimeout);
    } catch (e) {
      await sb.close().catch(() => undefined);
      throw e;
    }
    return sb;
  }

  /** The Machine as the server has it now: `spec`, `status` (phase, node, conditions, lifecycle) and `metadata`. */
  info(): Promise<Machine> {
    return this.ui.getMachine(this.name, this.namespace);
  }

  /** The Machine's Events, oldest first (each with `reason`, `message`, `type`, `count`):
   * `events("EgressDenied")` says which host the guest could not reach, and why. */
  events(reason?: string): Promise<Json[]> {
    return this.kube.listEvents(this.name, { namespace: this.namespace, reason });
  }

  /** The same as `info()` (its earlier name). */
  machine(): Promise<Machine> {
    return this.info();
  }

  /** Deletes the Machine (or releases the claim) and waits until it is gone. */
  async close(timeout = 300): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    try {
      if (this.claim) await this.kube.deleteClaim(this.claim, this.namespace);
      else await this.kube.deleteMachine(this.name, this.namespace);
    } catch (e) {
      if (e instanceof NotFoundError) return;
      throw e;
    }
    if (!this.claim) await this.ui.waitMachine(this.name, { deleted: true, timeout, namespace: this.namespace });
  }

  /** `close()`, for `await using`. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}
