/**
 * What differs between Node and browsers, behind one seam: how requests are sent (`Wire`), where
 * `new Kairon()` finds its settings, and what needs the local machine (files on disk, a local TCP
 * port). The package's entry points install theirs: `index.ts` Node's (node:http with a CA, the
 * environment and kubeconfig, node:fs, node:net), `browser.ts` the browser's (fetch, native
 * WebSockets opened with a ticket, options only). Nothing else imports a `node:` module, so a
 * browser build holds none.
 */

import { KaironError } from "./errors.js";

/** How `Client` and `UIClient` send. */
export interface TransportOptions {
  /** The CA to trust, a PEM file (default: `KAIRON_CA_FILE`, then Node's CAs and `NODE_EXTRA_CA_CERTS`). Node only: a browser trusts its own store. */
  caFile?: string;
  /** The CA to trust as PEM text (a kubeconfig's `certificate-authority-data`, decoded). Node only. */
  caData?: string;
  /** Retries after the first attempt of what may be retried (default 4). */
  retries?: number;
}

/** A whole answer. */
export interface Answer {
  /** The HTTP status. */
  status: number;
  /** The whole body. */
  body: Uint8Array;
}

/** An answer whose body is read as it arrives. */
export interface Streamed {
  /** The HTTP status. */
  status: number;
  /** The body in chunks as they arrive. */
  body: AsyncIterable<Uint8Array>;
  /** Stops reading and drops the connection (a reader waiting on `body` sees its end). */
  cancel(): void;
}

/** A WebSocket to one of a Machine's relays: binary frames both ways. */
export interface Relay {
  /** Sends one binary frame. */
  send(data: Uint8Array): void;
  /** Sends one text frame: a relay's control message (a terminal's `{"resize":…}`). */
  sendText(text: string): void;
  /** Closes the socket. */
  close(): void;
  /** Each binary frame as it arrives. */
  onMessage(f: (data: Uint8Array) => void): void;
  /** Once, when the socket closes or fails, with the server's close reason (`exit 0` after a
   * command; "" when none came). */
  onClose(f: (reason: string) => void): void;
}

/** What the clients send with: retries of what is safe to retry, a User-Agent where the platform lets one be set. */
export interface Wire {
  /** Sends `request` (retrying what may be retried) and answers as `fetch` would. */
  fetch(request: Request): Promise<Response>;
  /** A GET whose body is read as it arrives (followed logs, process streams, downloads), without a read timeout. */
  stream(url: string, headers: Record<string, string>): Promise<Streamed>;
  /** Sends `chunks` as the request body, never sent twice. */
  upload(
    method: string,
    url: string,
    headers: Record<string, string>,
    chunks: AsyncIterable<Uint8Array> | Iterable<Uint8Array>,
  ): Promise<Answer>;
  /** Opens the WebSocket at `path` of the server `base` as the holder of `token`; a refusal rejects with its typed error. */
  socket(base: string, path: string, token: string): Promise<Relay>;
  /** Closes idle connections. */
  close(): void;
}

/** No server or token could be found, or the kubeconfig could not be read. */
export class ConfigError extends KaironError { override name = "ConfigError"; }

/** What a `Kairon` connects with. */
export interface Config {
  /** The server's URL, without a trailing slash. */
  url: string;
  /** The bearer token. */
  token: string;
  /** The namespace calls use unless given another. */
  namespace: string;
  /** The CA file to trust (Node). */
  caFile?: string;
  /** The CA as PEM text (a kubeconfig's `certificate-authority-data`). */
  caData?: string;
  /** "options", "environment" or the kubeconfig's path, for the URL. */
  source: string;
}

/** The options `new Kairon()` takes for its configuration. */
export interface ConfigOptions {
  /** The server's URL (`https://127.0.0.1:8443`); in a browser, default the page's origin. */
  url?: string;
  /** The bearer token. */
  token?: string;
  /** The namespace calls use unless given another (default `default`). */
  namespace?: string;
  /** The CA file to trust (Node): what `kairon up` printed. */
  caFile?: string;
  /** The kubeconfig to read (default `$KUBECONFIG`, then `kairon up`'s). Node only. */
  kubeconfig?: string;
  /** The kubeconfig context (default its current context). Node only. */
  context?: string;
}

/** Local files, for `sb.files.download` and `sb.files.upload` (Node). */
export interface LocalFiles {
  /** Writes `chunks` to the local file `dest`, whole or not at all; the bytes written. */
  save(chunks: AsyncIterable<Uint8Array>, dest: string): Promise<number>;
  /** The local file `src` in chunks, never held whole. */
  open(src: string): AsyncIterable<Uint8Array>;
  /** The local directory `src` as a tar archive, in chunks as the system's `tar` writes them. */
  pack(src: string): AsyncIterable<Uint8Array>;
  /** Unpacks the tar archive `chunks` into the local directory `dest` (made if missing) with the system's `tar`,
   * which refuses entries that would land outside it (absolute names, `..`, writes through links). */
  unpack(chunks: AsyncIterable<Uint8Array>, dest: string): Promise<void>;
}

/** A listening local port carried to a port in the guest (Node's `PortForward`). */
export interface LocalForward {
  /** The local port listened on. */
  readonly localPort: number;
  /** The guest's port. */
  readonly remotePort: number;
  /** `http://127.0.0.1:<localPort>`. */
  readonly url: string;
  /** Stops listening and ends every carried connection. */
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

/** One platform's parts. */
export interface Platform {
  /** "node" or "browser", for messages. */
  name: string;
  wire(opts: TransportOptions): Wire;
  config(opts: ConfigOptions): Config;
  files?: LocalFiles;
  forward?: (
    connect: () => Promise<Relay>,
    remotePort: number,
    localPort: number,
  ) => Promise<LocalForward>;
}

let installed: Platform | undefined;

/** Installs the platform (done by the package's entry point). */
export function setPlatform(p: Platform): void {
  installed = p;
}

/** The installed platform. */
export function platform(): Platform {
  if (!installed) throw new KaironError("no platform installed: import the SDK from its package entry point (\"kairon\")");
  return installed;
}

/** The part `what` needs that only Node has; throws saying what to use instead. */
export function nodeOnly<T>(part: T | undefined, what: string, instead: string): T {
  if (part === undefined) throw new KaironError(`${what} needs Node (it uses the local machine); in a ${platform().name}, ${instead}`);
  return part;
}
