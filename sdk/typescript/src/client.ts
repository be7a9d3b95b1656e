/**
 * The two clients a Sandbox drives. `Client` speaks the Kubernetes-compatible API
 * (`/apis/kairon.zyvor.dev/v1/...`), where Machines and claims are created; `UIClient` speaks the
 * REST API (`/api/v1/...`) through openapi-fetch typed by `src/generated/schema.ts`, which
 * sdk-gen generates from `openapi/openapi.json`.
 *
 * TLS: the CA given as `caFile` / `caData`, else `KAIRON_CA_FILE`, else Node's CAs plus
 * `NODE_EXTRA_CA_CERTS` (point one at the CA `kairon up` keeps in `<data dir>/tls/ca.crt`).
 * Both send through `Transport` (retries, User-Agent); `new Kairon()` makes both for you.
 */

import createClient from "openapi-fetch";
import type { components, operations, paths } from "./generated/schema.js";
import { ApiError, TimeoutError, errorFrom } from "./errors.js";
import { EXEC_DEFAULT_TIMEOUT, EXEC_READ_MARGIN, READ_TIMEOUT_HEADER } from "./retry.js";
import { platform, type Relay, type Streamed, type TransportOptions, type Wire } from "./platform.js";

/** The REST API's schemas (`components["schemas"]` of openapi/openapi.json). */
export type Schemas = components["schemas"];
/** A Machine as the REST API answers it: `metadata`, `spec`, `status`. */
export type Machine = Schemas["Machine"];
/** A claim on a pool's warm member. */
export type MachineClaim = Schemas["MachineClaim"];
/** What a one-shot exec answers: exit code, stdout, stderr, whether it timed out. */
export type ExecResult = Schemas["ExecResult"];
/** A background process's state: pid, command, running or its exit code. */
export type Process = Schemas["Process"];
/** A background process's output so far. */
export type ProcessLogs = Schemas["ProcessLogs"];
/** What a fork or clone answers: the new Machine, and whether memory was copied too. */
export type CopyResult = Schemas["CopyResult"];
/** What `extend` answers: the new deadline. */
export type Extended = Schemas["Extended"];
/** One event of a process stream: output (`stdout`/`stderr` with its resume offset), or its exit. */
export type ProcessEvent = Schemas["ProcessEvent"];
/** The signals a process can be sent (`TERM` when none is given). */
export type Signal = NonNullable<NonNullable<operations["process_kill"]["parameters"]["query"]>["signal"]>;
/** A claim's final usage, kept after the claim is gone (for billing). */
export type ClaimUsageHistory = Schemas["ClaimUsageHistory"];
/** What a Machine uses now (`UIClient.metrics`, `Sandbox.metrics`). */
export type MachineMetrics = Schemas["MachineMetrics"];
/** A preview link of a Machine: `url` (given only when it is made) opens in a browser with no header. */
export type Preview = Schemas["Preview"];
/** One entry of a guest directory: name, type, size, mode. */
export type FileEntry = Schemas["FileEntry"];
/** A namespace's own sandbox template (`spec.image`, `spec.steps`) with its builds (`status`). */
export type KaironTemplate = Schemas["KaironTemplate"];

const GROUP = "kairon.zyvor.dev/v1";
/** A JSON object as the API sends it. */
export type Json = Record<string, unknown>;

/** Options of `Client` and `UIClient`: the namespace calls use unless given another, and how to send. */
export interface ClientOptions extends TransportOptions {
  /** The namespace calls use unless given another (default `default`). */
  namespace?: string;
  /** What to send with (default: the platform's, `Transport` in Node, `FetchTransport` in a browser). */
  wire?: Wire;
}

const decode = (b: Uint8Array) => new TextDecoder().decode(b);

/** The whole of a streamed body. */
async function drain(body: AsyncIterable<Uint8Array>): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  let n = 0;
  for await (const p of body) {
    parts.push(p);
    n += p.byteLength;
  }
  const out = new Uint8Array(n);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.byteLength;
  }
  return out;
}

/** The Kubernetes-compatible API: `new Client(url, token, { namespace: "agents" })`. */
export class Client {
  /** The server's URL, without a trailing slash. */
  readonly url: string;
  /** The namespace calls use unless given another. */
  readonly namespace: string;
  readonly #token: string;
  readonly #transport: Wire;

  constructor(url: string, token: string, opts: ClientOptions = {}) {
    this.url = url.replace(/\/+$/, "");
    this.#token = token;
    this.namespace = opts.namespace ?? "default";
    this.#transport = opts.wire ?? platform().wire(opts);
  }

  #path(plural: string, namespace?: string, name?: string): string {
    const p = `/apis/${GROUP}/namespaces/${encodeURIComponent(namespace ?? this.namespace)}/${plural}`;
    return name ? `${p}/${encodeURIComponent(name)}` : p;
  }

  async #send(method: string, path: string, body?: unknown, contentType = "application/json"): Promise<Json> {
    const r = await this.#transport.fetch(new Request(this.url + path, {
      method,
      headers: {
        Authorization: `Bearer ${this.#token}`,
        Accept: "application/json",
        ...(body === undefined ? {} : { "Content-Type": contentType }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    }));
    const text = await r.text();
    if (!r.ok) throw errorFrom(r.status, text);
    return JSON.parse(text) as Json;
  }

  /** Creates a Machine from its manifest (apiVersion and kind are filled in). */
  createMachine(manifest: Json, namespace?: string): Promise<Json> {
    return this.#send("POST", this.#path("machines", namespace), { apiVersion: GROUP, kind: "Machine", ...manifest });
  }
  /** The Machine `name` as the Kubernetes API stores it. */
  getMachine(name: string, namespace?: string): Promise<Json> {
    return this.#send("GET", this.#path("machines", namespace, name));
  }
  /** Applies a JSON merge patch (RFC 7386) to the Machine; the Machine afterwards. */
  patchMachine(name: string, patch: Json, namespace?: string): Promise<Json> {
    return this.#send("PATCH", this.#path("machines", namespace, name), patch, "application/merge-patch+json");
  }
  /** The Machines of the namespace that carry every one of `labels`. */
  async listMachines(opts: { labels?: Record<string, string>; namespace?: string } = {}): Promise<Json[]> {
    let path = this.#path("machines", opts.namespace);
    const selector = Object.entries(opts.labels ?? {}).map(([k, v]) => `${k}=${v}`).join(",");
    if (selector) path += `?${new URLSearchParams({ labelSelector: selector })}`;
    const list = await this.#send("GET", path);
    return (list.items ?? []) as Json[];
  }
  /** The Events about the Machine `name` (core/v1), oldest first; only `reason`'s if given. */
  async listEvents(name: string, opts: { namespace?: string; reason?: string } = {}): Promise<Json[]> {
    let selector = `involvedObject.kind=Machine,involvedObject.name=${name}`;
    if (opts.reason) selector += `,reason=${opts.reason}`;
    const ns = encodeURIComponent(opts.namespace ?? this.namespace);
    const list = await this.#send("GET", `/api/v1/namespaces/${ns}/events?${new URLSearchParams({ fieldSelector: selector })}`);
    const at = (e: Json) => String(e.lastTimestamp ?? e.eventTime ?? "");
    return ((list.items ?? []) as Json[]).sort((a, b) => at(a).localeCompare(at(b)));
  }
  /** Deletes the Machine (its node agent removes the runtime instance first). */
  deleteMachine(name: string, namespace?: string): Promise<Json> {
    return this.#send("DELETE", this.#path("machines", namespace, name));
  }
  /** Creates a MachineClaim (`spec.poolName`, optional `spec.ttlSeconds`). */
  createClaim(manifest: Json, namespace?: string): Promise<Json> {
    return this.#send("POST", this.#path("machineclaims", namespace), { apiVersion: GROUP, kind: "MachineClaim", ...manifest });
  }
  /** The MachineClaim `name`. */
  getClaim(name: string, namespace?: string): Promise<Json> {
    return this.#send("GET", this.#path("machineclaims", namespace, name));
  }
  /** Deletes the MachineClaim, which releases (deletes) the Machine it bound. */
  deleteClaim(name: string, namespace?: string): Promise<Json> {
    return this.#send("DELETE", this.#path("machineclaims", namespace, name));
  }
  /** Creates a MachinePool from its manifest (apiVersion and kind are filled in). */
  createPool(manifest: Json, namespace?: string): Promise<Json> {
    return this.#send("POST", this.#path("machinepools", namespace), { apiVersion: GROUP, kind: "MachinePool", ...manifest });
  }
  /** The MachinePool `name`. */
  getPool(name: string, namespace?: string): Promise<Json> {
    return this.#send("GET", this.#path("machinepools", namespace, name));
  }
  /** Deletes the MachinePool and, through it, its members. */
  deletePool(name: string, namespace?: string): Promise<Json> {
    return this.#send("DELETE", this.#path("machinepools", namespace, name));
  }
  /** Closes idle connections. */
  close(): void {
    this.#transport.close();
  }
}

interface Answer<T> {
  data?: T;
  error?: unknown;
  response: Response;
}

function ok<T>(a: Answer<T>): T {
  if (!a.response.ok) throw errorFrom(a.response.status, a.error);
  if (a.data === undefined) throw new ApiError(a.response.status, "UnexpectedResponse", "the response has no body");
  return a.data;
}

function done(a: Answer<unknown>): void {
  if (!a.response.ok) throw errorFrom(a.response.status, a.error);
}

/** What `waitMachine` waits for (exactly one of `phase`, `condition`, `deleted`) and how long. */
export interface WaitOptions {
  /** Wait for this `status.phase` (`Running`, `Paused`, ...). */
  phase?: string;
  /** Wait for this condition to be `True` (`Ready`). */
  condition?: string;
  /** Wait for the Machine to be gone. */
  deleted?: boolean;
  /** Seconds (default 300). */
  timeout?: number;
  /** The Machine's namespace (default the client's). */
  namespace?: string;
}

/** Options of `exec` and `startProcess`. */
export interface ExecOptions {
  /** Text sent to the command's stdin. */
  stdin?: string;
  /** Background processes only: keep stdin open (after `stdin`) for `writeStdin`. */
  keepStdinOpen?: boolean;
  /** The working directory (absolute). */
  cwd?: string;
  /** Environment variables added for this command. */
  env?: Record<string, string>;
  /** Run it as this user: `uid[:gid]`, or a name the guest knows (default root). */
  user?: string;
  /** Seconds. */
  timeout?: number;
  /** The Machine's namespace (default the client's). */
  namespace?: string;
}

/** The REST API: `new UIClient(url, token, { namespace: "agents" })`. `api` is the typed openapi-fetch
 * client, sending through the same `Transport`. Every call throws an `ApiError` subclass on failure. */
export class UIClient {
  /** The server's URL, without a trailing slash. */
  readonly url: string;
  /** The namespace calls use unless given another. */
  readonly namespace: string;
  /** The typed openapi-fetch client of the REST API, for what the methods do not cover. */
  readonly api: ReturnType<typeof createClient<paths>>;
  readonly #transport: Wire;
  readonly #token: string;

  constructor(url: string, token: string, opts: ClientOptions = {}) {
    this.url = url.replace(/\/+$/, "");
    this.namespace = opts.namespace ?? "default";
    this.#token = token;
    this.#transport = opts.wire ?? platform().wire(opts);
    this.api = createClient<paths>({
      baseUrl: this.url,
      headers: { Authorization: `Bearer ${token}` },
      fetch: this.#transport.fetch,
    });
  }

  /** Closes idle connections. */
  close(): void {
    this.#transport.close();
  }

  #p(name: string, namespace?: string) {
    return { namespace: namespace ?? this.namespace, name };
  }

  /** The Machine `name` (its spec and status). */
  async getMachine(name: string, namespace?: string): Promise<Machine> {
    return ok(await this.api.GET("/api/v1/machines/{namespace}/{name}", { params: { path: this.#p(name, namespace) } }));
  }

  /** Long-polls until the Machine reaches `phase`/`condition` or is gone; TimeoutError after `timeout` s,
   * any other refusal at once. */
  async waitMachine(name: string, opts: WaitOptions): Promise<Machine | null> {
    const deadline = Date.now() + (opts.timeout ?? 300) * 1000;
    for (;;) {
      const left = Math.max(1, Math.min(120, Math.floor((deadline - Date.now()) / 1000)));
      const a = await this.api.GET("/api/v1/machines/{namespace}/{name}/wait", {
        params: {
          path: this.#p(name, opts.namespace),
          query: {
            phase: opts.phase,
            condition: opts.condition,
            deleted: opts.deleted ? true : undefined,
            timeoutSeconds: left,
          },
        },
      });
      if (opts.deleted && a.response.status === 404) return null;
      try {
        const m = ok(a);
        return opts.deleted ? null : m;
      } catch (e) {
        // The server's wait ran out ("not yet"): ask again until ours does.
        if (!(e instanceof TimeoutError) || Date.now() >= deadline) throw e;
      }
    }
  }

  /** Deletes the Machine. */
  async deleteMachine(name: string, namespace?: string): Promise<void> {
    done(await this.api.DELETE("/api/v1/machines/{namespace}/{name}", { params: { path: this.#p(name, namespace) } }));
  }
  /** Asks for the Machine to be Paused (memory kept, no CPU); returns at once. */
  async pause(name: string, namespace?: string): Promise<Machine> {
    return ok(await this.api.POST("/api/v1/machines/{namespace}/{name}/pause", { params: { path: this.#p(name, namespace) } }));
  }
  /** Asks for the Machine to run again; returns at once. */
  async resume(name: string, namespace?: string): Promise<Machine> {
    return ok(await this.api.POST("/api/v1/machines/{namespace}/{name}/resume", { params: { path: this.#p(name, namespace) } }));
  }
  /** Forks the Machine into `newName` (live on a VM, the filesystem of a runc sandbox). */
  /** Asks for a VM to be Hibernated (memory to disk, the VMM exits); returns at once. A sandbox is
   * refused (reason `PowerStateUnsupported`): pause or stop it instead. */
  async hibernate(name: string, namespace?: string): Promise<Machine> {
    return ok(await this.api.POST("/api/v1/machines/{namespace}/{name}/hibernate", { params: { path: this.#p(name, namespace) } }));
  }
  /** Asks for a VM's guest to power off (resume boots it again); returns at once. */
  async halt(name: string, namespace?: string): Promise<Machine> {
    return ok(await this.api.POST("/api/v1/machines/{namespace}/{name}/halt", { params: { path: this.#p(name, namespace) } }));
  }
  /** Restarts a Running Machine's guest on its node; returns once the runtime has. */
  async restart(name: string, namespace?: string): Promise<Machine> {
    return ok(await this.api.POST("/api/v1/machines/{namespace}/{name}/restart", { params: { path: this.#p(name, namespace) } }));
  }
  /** Moves the Machine's end (`status.lifecycle.expiresAt`) `seconds` later: each of its deadlines
   * that would end it sooner (max lifetime, ttlSeconds, its claim's ttlSeconds) is lengthened. A
   * Machine with no deadline is refused (reason `NoDeadline`). */
  async extend(name: string, seconds: number, namespace?: string): Promise<Extended> {
    return ok(
      await this.api.POST("/api/v1/machines/{namespace}/{name}/extend", {
        params: { path: this.#p(name, namespace) },
        body: { seconds },
      }),
    );
  }

  /** Ends the Machine `seconds` from now (its `spec.ttlSeconds`), with or without a deadline before;
   * its other deadlines stay and the earliest wins (the answer's `expiresAt`). */
  async setTimeout(name: string, seconds: number, namespace?: string): Promise<Extended> {
    return ok(
      await this.api.POST("/api/v1/machines/{namespace}/{name}/timeout", {
        params: { path: this.#p(name, namespace) },
        body: { seconds },
      }),
    );
  }

  /** Forks the Machine `name` into a new Machine `newName` (memory and disk on a VM; the filesystem of a sandbox). */
  async fork(name: string, newName: string, namespace?: string): Promise<CopyResult> {
    return ok(
      await this.api.POST("/api/v1/machines/{namespace}/{name}/fork", {
        params: { path: this.#p(name, namespace) },
        body: { name: newName },
      }),
    );
  }

  /** The MachineClaim `name`. */
  async getClaim(name: string, namespace?: string): Promise<MachineClaim> {
    return ok(await this.api.GET("/api/v1/machineclaims/{namespace}/{name}", { params: { path: this.#p(name, namespace) } }));
  }
  /** Long-polls until the claim reaches `phase`; TimeoutError after `timeout` s. */
  async waitClaim(name: string, opts: { phase: string; timeout?: number; namespace?: string }): Promise<MachineClaim> {
    const deadline = Date.now() + (opts.timeout ?? 300) * 1000;
    for (;;) {
      const left = Math.max(1, Math.min(120, Math.floor((deadline - Date.now()) / 1000)));
      const a = await this.api.GET("/api/v1/machineclaims/{namespace}/{name}/wait", {
        params: { path: this.#p(name, opts.namespace), query: { phase: opts.phase, timeoutSeconds: left } },
      });
      try {
        return ok(a);
      } catch (e) {
        if (!(e instanceof TimeoutError) || Date.now() >= deadline) throw e;
      }
    }
  }
  /** What the claim with this uid used, with its history. */
  async claimUsage(uid: string): Promise<ClaimUsageHistory> {
    return ok(await this.api.GET("/api/v1/usage/claims/{uid}", { params: { path: { uid } } }));
  }

  /** What the Machine uses now: CPU over `window` seconds (0.1 to 10; the server's 0.5 when unset), memory, disk,
   * network, processes. Neither wakes it nor counts as activity. */
  async metrics(name: string, opts: { window?: number; namespace?: string } = {}): Promise<MachineMetrics> {
    const windowMillis = opts.window === undefined ? undefined : Math.round(opts.window * 1000);
    return ok(
      await this.api.GET("/api/v1/machines/{namespace}/{name}/metrics", {
        params: { path: this.#p(name, opts.namespace), query: { windowMillis } },
      }),
    );
  }

  /** A preview link to the guest's `port`: its `url` opens in a browser with no header, on a host of its own,
   * for `ttl` seconds (the server's hour when unset). */
  async createPreview(name: string, port: number, opts: { ttl?: number; namespace?: string } = {}): Promise<Preview> {
    const ttlSeconds = opts.ttl === undefined ? undefined : Math.round(opts.ttl);
    return ok(
      await this.api.POST("/api/v1/machines/{namespace}/{name}/previews", {
        params: { path: this.#p(name, opts.namespace) },
        body: { port, ttlSeconds },
      }),
    );
  }
  /** The Machine's live preview links, newest first (without their URLs). */
  async previews(name: string, namespace?: string): Promise<Preview[]> {
    return ok(await this.api.GET("/api/v1/machines/{namespace}/{name}/previews", { params: { path: this.#p(name, namespace) } }));
  }
  /** Revokes a preview link: it answers 404 from now on. */
  async revokePreview(name: string, id: string, namespace?: string): Promise<void> {
    done(
      await this.api.DELETE("/api/v1/machines/{namespace}/{name}/previews/{id}", {
        params: { path: { ...this.#p(name, namespace), id } },
      }),
    );
  }

  /** Declares the namespace's own template `name`: `image` plus build steps (shell commands run as root over it). */
  async createTemplate(name: string, image: string, steps: string[] = [], namespace?: string): Promise<KaironTemplate> {
    return ok(
      await this.api.POST("/api/v1/templates/{namespace}", {
        params: { path: { namespace: namespace ?? this.namespace } },
        body: { metadata: { name }, spec: { image, steps } },
      }),
    );
  }
  /** The template `name`, with its builds (`status.nodes`). */
  async getTemplate(name: string, namespace?: string): Promise<KaironTemplate> {
    return ok(await this.api.GET("/api/v1/templates/{namespace}/{name}", { params: { path: this.#p(name, namespace) } }));
  }
  /** The namespace's templates. */
  async templates(namespace?: string): Promise<KaironTemplate[]> {
    const path = { namespace: namespace ?? this.namespace };
    return ok(await this.api.GET("/api/v1/templates/{namespace}", { params: { path } })).items;
  }
  /** Deletes the template `name` (sandboxes running from it keep running). */
  async deleteTemplate(name: string, namespace?: string): Promise<void> {
    done(await this.api.DELETE("/api/v1/templates/{namespace}/{name}", { params: { path: this.#p(name, namespace) } }));
  }

  /** Runs `command` (argv) in the guest to completion; `timeout` in seconds (the server's
   * default, 300, when unset). The request waits as long as the command may run. */
  async exec(name: string, command: string[], opts: ExecOptions = {}): Promise<ExecResult> {
    const waitMs = ((opts.timeout ?? EXEC_DEFAULT_TIMEOUT) + EXEC_READ_MARGIN) * 1000;
    return ok(
      await this.api.POST("/api/v1/machines/{namespace}/{name}/exec", {
        params: { path: this.#p(name, opts.namespace) },
        body: { command, stdin: opts.stdin, cwd: opts.cwd, env: opts.env, user: opts.user, timeoutSeconds: opts.timeout },
        headers: { [READ_TIMEOUT_HEADER]: String(waitMs) },
      }),
    );
  }
  /** Starts `command` (argv) in the background in the guest. */
  async startProcess(name: string, command: string[], opts: ExecOptions = {}): Promise<Process> {
    return ok(
      await this.api.POST("/api/v1/machines/{namespace}/{name}/processes", {
        params: { path: this.#p(name, opts.namespace) },
        body: { command, cwd: opts.cwd, env: opts.env, user: opts.user, stdin: opts.stdin, keepStdinOpen: opts.keepStdinOpen },
      }),
    );
  }
  /** Writes `data` to a background process's kept-open stdin (in order with earlier writes; at most 1 MiB a
   * call); `close` closes it afterwards (the process reads end of file). */
  async writeStdin(name: string, pid: string, data: Uint8Array | string, opts: { close?: boolean; namespace?: string } = {}): Promise<void> {
    const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
    done(
      await this.api.POST("/api/v1/machines/{namespace}/{name}/processes/{pid}/stdin", {
        params: { path: { ...this.#p(name, opts.namespace), pid }, query: { close: opts.close ?? false } },
        body: bytes as unknown as string,
        bodySerializer: (b: unknown) => b as BodyInit,
        headers: { "Content-Type": "application/octet-stream" },
      }),
    );
  }
  /** Every background process of the Machine, oldest first. */
  async listProcesses(name: string, namespace?: string): Promise<Process[]> {
    return ok(
      await this.api.GET("/api/v1/machines/{namespace}/{name}/processes", { params: { path: this.#p(name, namespace) } }),
    );
  }
  /** A background process's stdout, stderr and exit as one stream of events, as they come:
   * `{ type: "stdout" | "stderr", data, end }` (`end`: the byte offset to resume that stream from) and
   * last `{ type: "exit", exitCode }`. Starts at the offsets given (0: from the beginning); sandboxes and VMs. */
  async *processEvents(
    name: string,
    pid: string,
    opts: { stdoutOffset?: number; stderrOffset?: number; namespace?: string } = {},
  ): AsyncGenerator<ProcessEvent> {
    const seg = encodeURIComponent;
    const path = `/api/v1/machines/${seg(opts.namespace ?? this.namespace)}/${seg(name)}/processes/${seg(pid)}/stream`;
    const query = `stdoutOffset=${opts.stdoutOffset ?? 0}&stderrOffset=${opts.stderrOffset ?? 0}`;
    // Read as it arrives: openapi-fetch's answers are whole.
    const res = await this.#transport.stream(`${this.url}${path}?${query}`, { authorization: `Bearer ${this.#token}` });
    if (res.status >= 400) throw errorFrom(res.status, decode(await drain(res.body)));
    let buf = "";
    const decoder = new TextDecoder();
    for await (const chunk of res.body) {
      buf += decoder.decode(chunk, { stream: true });
      let nl: number;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (!line) continue;
        const event = JSON.parse(line) as ProcessEvent;
        // The stream broke off on the server's side (its runtime failed).
        if (event.type === "error") throw errorFrom(502, line);
        yield event;
      }
    }
  }
  /** The open answer of `GET …/files/watch` (its first line, `ready`, already sent: every watch is in place); read
   * its body's lines, `cancel()` it to stop. A refusal (a missing directory: `NotFoundError`) rejects with the typed
   * error. */
  async watchFiles(name: string, path: string, opts: { recursive?: boolean; namespace?: string } = {}): Promise<Streamed> {
    const seg = encodeURIComponent;
    const route = `/api/v1/machines/${seg(opts.namespace ?? this.namespace)}/${seg(name)}/files/watch`;
    const query = `path=${seg(path)}&recursive=${opts.recursive ? "true" : "false"}`;
    const res = await this.#transport.stream(`${this.url}${route}?${query}`, { authorization: `Bearer ${this.#token}` });
    if (res.status >= 400) throw errorFrom(res.status, decode(await drain(res.body)));
    return res;
  }
  /** A WebSocket to one of the Machine's relays (`portforward/8080`, `console`): binary frames both ways. A
   * refusal (not found, suspended, a closed port) rejects with the typed error. */
  relay(name: string, route: string, namespace?: string): Promise<Relay> {
    const seg = encodeURIComponent;
    return this.#transport.socket(this.url, `/api/v1/machines/${seg(namespace ?? this.namespace)}/${seg(name)}/${route}`, this.#token);
  }
  /** A background process's state. */
  async getProcess(name: string, pid: string, namespace?: string): Promise<Process> {
    return ok(
      await this.api.GET("/api/v1/machines/{namespace}/{name}/processes/{pid}", {
        params: { path: { ...this.#p(name, namespace), pid } },
      }),
    );
  }
  /** Waits up to `timeout` s for the process to exit; its state either way. */
  async waitProcess(name: string, pid: string, timeout = 60, namespace?: string): Promise<Process> {
    return ok(
      await this.api.POST("/api/v1/machines/{namespace}/{name}/processes/{pid}/wait", {
        params: { path: { ...this.#p(name, namespace), pid }, query: { timeoutSeconds: timeout } },
      }),
    );
  }
  /** A background process's output so far. */
  async processLogs(name: string, pid: string, namespace?: string): Promise<ProcessLogs> {
    return ok(
      await this.api.GET("/api/v1/machines/{namespace}/{name}/processes/{pid}/logs", {
        params: { path: { ...this.#p(name, namespace), pid } },
      }),
    );
  }
  /** A background process's `stream` from its start, as it is produced, until the process exits. */
  async *followLogs(name: string, pid: string, stream: "stdout" | "stderr" = "stdout", namespace?: string): AsyncGenerator<Uint8Array> {
    const seg = encodeURIComponent;
    const path = `/api/v1/machines/${seg(namespace ?? this.namespace)}/${seg(name)}/processes/${seg(pid)}/logs`;
    yield* this.#streamed(`${this.url}${path}?follow=true&stream=${stream}`);
  }
  /** A GET's body as it arrives (openapi-fetch's answers are whole); a refusal throws its typed error. */
  async *#streamed(url: string): AsyncGenerator<Uint8Array> {
    const res = await this.#transport.stream(url, { authorization: `Bearer ${this.#token}` });
    if (res.status >= 400) throw errorFrom(res.status, decode(await drain(res.body)));
    yield* res.body;
  }
  /** Sends `signal` (default KILL) to a background process. */
  async killProcess(name: string, pid: string, signal?: Signal, namespace?: string): Promise<void> {
    done(
      await this.api.POST("/api/v1/machines/{namespace}/{name}/processes/{pid}/kill", {
        // KILL unless told: the server's own default is TERM, which a process may ignore.
        params: { path: { ...this.#p(name, namespace), pid }, query: { signal: signal ?? "KILL" } },
      }),
    );
  }
  /** The bytes of the guest's file at the absolute `path`. */
  async readFile(name: string, path: string, namespace?: string): Promise<Uint8Array> {
    const a = await this.api.GET("/api/v1/machines/{namespace}/{name}/files", {
      params: { path: this.#p(name, namespace), query: { path } },
      parseAs: "arrayBuffer",
    });
    if (!a.response.ok) throw errorFrom(a.response.status, a.error);
    return new Uint8Array(a.data as ArrayBuffer);
  }
  /** The guest's file at the absolute `path`, in chunks as they arrive: never held whole. */
  async *readFileStream(name: string, path: string, namespace?: string): AsyncGenerator<Uint8Array> {
    yield* this.#streamed(`${this.url}${this.#files(name, namespace)}?path=${encodeURIComponent(path)}`);
  }
  #files(name: string, namespace?: string): string {
    const seg = encodeURIComponent;
    return `/api/v1/machines/${seg(namespace ?? this.namespace)}/${seg(name)}/files`;
  }
  /** The entries of the guest's directory at the absolute `path`. */
  async listFiles(name: string, path: string, namespace?: string): Promise<FileEntry[]> {
    return ok(
      await this.api.GET("/api/v1/machines/{namespace}/{name}/files/list", {
        params: { path: this.#p(name, namespace), query: { path } },
      }),
    );
  }
  /** Deletes the guest's file (or empty directory) at the absolute `path`; with `recursive`, a directory and
   * everything in it. */
  async deleteFile(name: string, path: string, opts: { recursive?: boolean; namespace?: string } = {}): Promise<void> {
    done(
      await this.api.DELETE("/api/v1/machines/{namespace}/{name}/files", {
        params: { path: this.#p(name, opts.namespace), query: { path, recursive: opts.recursive ?? false } },
      }),
    );
  }
  /** What is at the guest's absolute `path` (a symlink itself): size, mode, kind, modified time. */
  async fileInfo(name: string, path: string, namespace?: string): Promise<FileEntry> {
    return ok(
      await this.api.GET("/api/v1/machines/{namespace}/{name}/files/info", {
        params: { path: this.#p(name, namespace), query: { path } },
      }),
    );
  }
  /** Moves the guest's `src` to `dst` (absolute paths; a file at `dst` is replaced). */
  async renameFile(name: string, src: string, dst: string, namespace?: string): Promise<void> {
    done(
      await this.api.POST("/api/v1/machines/{namespace}/{name}/files/rename", {
        params: { path: this.#p(name, namespace) },
        body: { from: src, to: dst },
      }),
    );
  }
  /** Writes `data` to the guest's absolute `path` (`mode` octal, e.g. `755`; without it an
   * existing file keeps its mode). An iterable of chunks (a file's read stream) is sent as it
   * is produced, never whole; the old file is replaced only once all of it arrived. */
  async writeFile(
    name: string,
    path: string,
    data: Uint8Array | string | AsyncIterable<Uint8Array> | Iterable<Uint8Array>,
    opts: { mode?: string; namespace?: string } = {},
  ): Promise<void> {
    if (typeof data !== "string" && !(data instanceof Uint8Array)) {
      const query = new URLSearchParams({ path, ...(opts.mode ? { mode: opts.mode } : {}) });
      const url = `${this.url}${this.#files(name, opts.namespace)}?${query}`;
      const headers = { authorization: `Bearer ${this.#token}`, "content-type": "application/octet-stream" };
      const a = await this.#transport.upload("PUT", url, headers, data);
      if (a.status >= 400) throw errorFrom(a.status, decode(a.body));
      return;
    }
    const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
    done(
      await this.api.PUT("/api/v1/machines/{namespace}/{name}/files", {
        params: { path: this.#p(name, opts.namespace), query: { path, mode: opts.mode } },
        body: bytes as unknown as string,
        bodySerializer: (b: unknown) => b as BodyInit,
        headers: { "Content-Type": "application/octet-stream" },
      }),
    );
  }
}
