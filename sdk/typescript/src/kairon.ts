/**
 * `Kairon`: the one entry point.
 *
 *     const k = new Kairon(); // options, else KAIRON_* variables, else the kubeconfig
 *     await using sb = await k.sandbox.create({ template: "busybox" });
 *     console.log((await sb.run("uname -a", { check: true })).stdout);
 *
 * `k.kube` and `k.ui` are the two clients (`Client`, `UIClient`) the spec's two-client form uses;
 * `k.sandbox` makes, claims, attaches to and lists sandboxes with them; `k.templates` builds the
 * namespace's own templates (`await k.templates.build("py312", { image, steps })`).
 */

import { Client, UIClient } from "./client.js";
import { platform, type Config, type ConfigOptions } from "./platform.js";
import { Sandbox, type CreateOptions } from "./sandbox.js";
import { Templates } from "./templates.js";

/** `Sandbox`'s constructors bound to a `Kairon`'s clients: `k.sandbox.create(opts)` is `Sandbox.create(k.kube, k.ui, opts)`, and so on. */
export class Sandboxes {
  /** Binds `kube` and `ui`; `Kairon` makes this for you. */
  constructor(
    /** The Kubernetes-compatible API client. */
    readonly kube: Client,
    /** The REST API client. */
    readonly ui: UIClient,
  ) {}

  /** `Sandbox.create(kube, ui, opts)`: a new Machine, ready for commands. */
  create(opts: CreateOptions): Promise<Sandbox> {
    return Sandbox.create(this.kube, this.ui, opts);
  }
  /** `Sandbox.claimFrom(kube, ui, pool, opts)`: a warm member of the pool. */
  claimFrom(pool: string, opts: Parameters<typeof Sandbox.claimFrom>[3] = {}): Promise<Sandbox> {
    return Sandbox.claimFrom(this.kube, this.ui, pool, opts);
  }
  /** `Sandbox.connect(kube, ui, name, opts)`: attaches to an existing Machine. */
  connect(name: string, opts: { namespace?: string; readyTimeout?: number } = {}): Promise<Sandbox> {
    return Sandbox.connect(this.kube, this.ui, name, opts);
  }
  /** `Sandbox.list(kube, ui, opts)`: the namespace's sandboxes. */
  list(opts: { labels?: Record<string, string>; namespace?: string } = {}): Promise<Sandbox[]> {
    return Sandbox.list(this.kube, this.ui, opts);
  }
}

/** Options of `new Kairon()`. */
export interface KaironOptions extends ConfigOptions {
  /** Retries of idempotent calls and of connections that could not be made (default 4). */
  retries?: number;
}

/**
 * A connection to one Kairon server: `new Kairon()`, or `new Kairon({ url, token, namespace })`.
 * Each setting comes from the option, else `KAIRON_URL`, `KAIRON_TOKEN`, `KAIRON_NAMESPACE`,
 * `KAIRON_CA_FILE`, else the kubeconfig `kairon up` writes (`kubeconfig`, else `$KUBECONFIG`, else
 * `~/.local/state/kairon/kubeconfig`; its current context, or `context`). Throws `ConfigError`
 * when no server URL or token is found. `config` says what was used.
 */
export class Kairon {
  /** What this connection uses: URL, token, namespace, CA, and where the URL came from. */
  readonly config: Config;
  /** The Kubernetes-compatible API. */
  readonly kube: Client;
  /** The REST API. */
  readonly ui: UIClient;
  /** Sandboxes on this connection. */
  readonly sandbox: Sandboxes;
  /** The namespace's own templates. */
  readonly templates: Templates;

  /** Resolves the configuration and makes the clients (no request is sent yet). */
  constructor(opts: KaironOptions = {}) {
    this.config = platform().config(opts);
    const c = this.config;
    const client = { namespace: c.namespace, caFile: c.caFile, caData: c.caData, retries: opts.retries };
    this.kube = new Client(c.url, c.token, client);
    this.ui = new UIClient(c.url, c.token, client);
    this.sandbox = new Sandboxes(this.kube, this.ui);
    this.templates = new Templates(this.ui);
  }

  /** The server's URL. */
  get url(): string {
    return this.config.url;
  }
  /** The namespace calls use unless given another. */
  get namespace(): string {
    return this.config.namespace;
  }
  /** Closes both clients' idle connections (sandboxes are left as they are). */
  close(): void {
    this.kube.close();
    this.ui.close();
  }
}
