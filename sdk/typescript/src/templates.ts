/**
 * A namespace's own sandbox templates: `await k.templates.build("py312", { image, steps })`.
 *
 * A template is an OCI image plus build steps (shell commands run as root over it, whose changes
 * become its top layer). Kairon builds it at once on one node, and on any other node when a
 * sandbox of it lands there; in its namespace it shadows a shared template of the same name, and
 * no other namespace sees it. The image is pulled under the node's egress policy (never from a
 * private address), and each template counts against the namespace's quota (`templates`).
 */

import type { KaironTemplate, UIClient } from "./client.js";
import { KaironTimeoutError, TemplateBuildError } from "./errors.js";

/** How often a build's progress is read, in milliseconds. */
const POLL_MS = 500;

/** Options of `Templates.build`. */
export interface BuildOptions {
  /** The OCI image to start from, e.g. `docker.io/library/python:3.12-slim`. */
  image: string;
  /** Shell commands run in order as root over the image. */
  steps?: string[];
  /** Return once a node has built it (default true); false returns what was declared. */
  wait?: boolean;
  /** How long to wait, in seconds (default 1800). */
  timeout?: number;
  /** Called with each new progress line ("pulling ...: 3.1 of 40.2 MB", "running build step 1 of 2: ..."). */
  onProgress?: (line: string) => void;
  /** The namespace (the client's when unset). */
  namespace?: string;
}

/** `k.templates`: build, read, list and delete the namespace's own templates. */
export class Templates {
  /** Binds the REST client; `Kairon` makes this for you. */
  constructor(
    /** The REST API client. */
    readonly ui: UIClient,
  ) {}

  /** Declares template `name` and, unless `wait: false`, resolves once a node has built it. Rejects
   * with `TemplateBuildError` when the build fails, `KaironTimeoutError` after `timeout`, and
   * `QuotaExceededError` past the namespace's `templates`. */
  async build(name: string, opts: BuildOptions): Promise<KaironTemplate> {
    const made = await this.ui.createTemplate(name, opts.image, opts.steps ?? [], opts.namespace);
    if (opts.wait === false) return made;
    return this.wait(name, opts);
  }

  /** Resolves with template `name` once it is built on a node (see `build`). */
  async wait(
    name: string,
    opts: { timeout?: number; onProgress?: (line: string) => void; namespace?: string } = {},
  ): Promise<KaironTemplate> {
    const deadline = Date.now() + (opts.timeout ?? 1800) * 1000;
    let said: string | undefined;
    for (;;) {
      const t = await this.get(name, opts.namespace);
      const phase = t.status?.phase;
      const message = t.status?.message ?? undefined;
      if (phase === "Ready") return t;
      if (phase === "Failed") throw new TemplateBuildError(name, message ?? "no reason given");
      if (message && message !== said) {
        opts.onProgress?.(message);
        said = message;
      }
      if (Date.now() >= deadline) {
        throw new KaironTimeoutError(`template ${JSON.stringify(name)} is not built after ${opts.timeout ?? 1800} s: ${message ?? "Pending"}`);
      }
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    }
  }

  /** Template `name`, with its builds (`status.nodes`). */
  get(name: string, namespace?: string): Promise<KaironTemplate> {
    return this.ui.getTemplate(name, namespace);
  }

  /** The namespace's templates. */
  list(namespace?: string): Promise<KaironTemplate[]> {
    return this.ui.templates(namespace);
  }

  /** Deletes template `name` (its place in the quota is freed). */
  delete(name: string, namespace?: string): Promise<void> {
    return this.ui.deleteTemplate(name, namespace);
  }
}
