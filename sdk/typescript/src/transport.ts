/**
 * How both clients send in Node: node:http(s) with the CA to trust, a User-Agent
 * (`kairon-sdk-typescript/<version>`), a 660 s read timeout (`KAIRON_READ_TIMEOUT` seconds; long
 * polls answer within their own, and a command's run waits as long as the command may)
 * and the retries of `retry.ts`. Failing to reach the server throws `KaironConnectionError`, no
 * answer within the timeout `KaironTimeoutError`. `NODE_DEBUG=kairon` logs requests and retries.
 */

import { readFileSync } from "node:fs";
import * as http from "node:http";
import * as https from "node:https";
import { rootCertificates } from "node:tls";
import { debuglog } from "node:util";
import WebSocket from "ws";
import { KaironConnectionError, KaironTimeoutError, errorFrom } from "./errors.js";
import type { Answer, Relay, Streamed, TransportOptions, Wire } from "./platform.js";
import { DEFAULT_RETRIES, IDEMPOTENT, READ_TIMEOUT_HEADER, RETRY_STATUSES, USER_AGENT, backoff, retryDelay, sleep } from "./retry.js";

export { DEFAULT_RETRIES, USER_AGENT, backoff } from "./retry.js";
export type { TransportOptions } from "./platform.js";

/** How long a request may wait for its answer, in ms (`KAIRON_READ_TIMEOUT` seconds, 660 by default). */
function readTimeoutMs(): number {
  const seconds = Number(process.env.KAIRON_READ_TIMEOUT);
  return (Number.isFinite(seconds) && seconds > 0 ? seconds : 660) * 1000;
}
// Bodies larger than this are sent after the server's 100 Continue (or a second without it).
const EXPECT_CONTINUE_BYTES = 1 << 20;
const EXPECT_CONTINUE_WAIT_MS = 1_000;
// Errors of a connection that was never made: the request did not reach the server.
const NOT_SENT = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH", "EADDRNOTAVAIL", "ECONNABORTED"]);

const log = debuglog("kairon");

const tlsRefused = (code: string) =>
  code.startsWith("ERR_TLS") || code.startsWith("CERT_") || code.startsWith("UNABLE_TO_") ||
  code === "DEPTH_ZERO_SELF_SIGNED_CERT" || code === "SELF_SIGNED_CERT_IN_CHAIN" || code === "ERR_SSL_WRONG_VERSION_NUMBER";

class ReadTimeout extends Error {}

interface NodeAnswer extends Answer {
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

/** Node's `Wire`: a `fetch` for one server (what `UIClient` hands openapi-fetch and `Client` sends with), streamed reads and uploads, and relays. */
export class Transport implements Wire {
  /** Retries after the first attempt of what may be retried. */
  readonly retries: number;
  readonly #ca: string[] | undefined;
  readonly #agents = new Map<string, http.Agent>();

  constructor(opts: TransportOptions = {}) {
    this.retries = Math.max(0, opts.retries ?? DEFAULT_RETRIES);
    const caFile = opts.caFile ?? (process.env.KAIRON_CA_FILE || undefined);
    const pem = opts.caData ?? (caFile ? readFileSync(caFile, "utf8") : undefined);
    this.#ca = pem ? [...rootCertificates, pem] : undefined;
  }

  /** The CAs this transport trusts (the system's plus the configured one), or undefined for the
   * system's alone: for connections made elsewhere (the WebSocket relays). */
  get ca(): string[] | undefined {
    return this.#ca;
  }

  #agent(protocol: string): http.Agent {
    let a = this.#agents.get(protocol);
    if (!a) {
      a = protocol === "https:" ? new https.Agent({ keepAlive: true, ca: this.#ca }) : new http.Agent({ keepAlive: true });
      this.#agents.set(protocol, a);
    }
    return a;
  }

  #once(method: string, url: URL, headers: Record<string, string>, body: Uint8Array | undefined, readMs: number): Promise<NodeAnswer> {
    return new Promise<NodeAnswer>((resolve, reject) => {
      const mod = url.protocol === "https:" ? https : http;
      // A large body waits for the server's 100 Continue: a refusal (413 over the upload limit,
      // 401, 403) then arrives before any of it is sent, instead of as a broken pipe mid-upload.
      const expect = body !== undefined && body.byteLength > EXPECT_CONTINUE_BYTES;
      let answered = false;
      let bodySent = !expect;
      const req = mod.request(
        url,
        { method, headers: expect ? { ...headers, expect: "100-continue" } : headers, agent: this.#agent(url.protocol) },
        (res) => {
          answered = true;
          clearTimeout(waiting);
          // Answered before the body went: this connection cannot carry another request.
          const abandon = !bodySent;
          bodySent = true;
          const chunks: Buffer[] = [];
          res.on("data", (c: Buffer) => chunks.push(c));
          res.on("end", () => {
            resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) });
            if (abandon) req.destroy();
          });
          res.on("error", reject);
        },
      );
      const send = () => {
        if (bodySent) return;
        bodySent = true;
        req.end(body);
      };
      // A server (or proxy) that ignores Expect gets the body after a second, as curl does.
      const waiting = expect ? setTimeout(send, EXPECT_CONTINUE_WAIT_MS) : undefined;
      req.on("continue", () => {
        clearTimeout(waiting);
        send();
      });
      req.setTimeout(readMs, () => req.destroy(new ReadTimeout(`no answer within ${readMs / 1000} s`)));
      req.on("error", (e) => {
        if (!answered) reject(e);
      });
      if (expect) req.flushHeaders();
      else req.end(body && body.byteLength ? body : undefined);
    });
  }

  /** Sends `request` (retrying what may be retried) and answers as `fetch` would. */
  fetch = async (request: Request): Promise<Response> => {
    const url = new URL(request.url);
    const method = request.method.toUpperCase();
    const headers: Record<string, string> = { "user-agent": USER_AGENT };
    request.headers.forEach((v, k) => {
      headers[k] = v;
    });
    const asked = Number(headers[READ_TIMEOUT_HEADER]);
    delete headers[READ_TIMEOUT_HEADER];
    const readMs = Math.max(readTimeoutMs(), Number.isFinite(asked) ? asked : 0);
    const body = method === "GET" || method === "HEAD" ? undefined : new Uint8Array(await request.arrayBuffer());
    if (body) headers["content-length"] = String(body.byteLength);
    const idempotent = IDEMPOTENT.has(method);
    for (let attempt = 0; ; attempt++) {
      const started = Date.now();
      let failure: Error;
      let sent: boolean;
      try {
        const a = await this.#once(method, url, headers, body, readMs);
        log("%s %s -> %d (%d ms)", method, url.href, a.status, Date.now() - started);
        if (idempotent && RETRY_STATUSES.has(a.status) && attempt < this.retries) {
          const delay = retryDelay(attempt, a.headers["retry-after"]);
          log("%s %s answered %d; retrying in %d ms (%d of %d)", method, url.href, a.status, delay, attempt + 1, this.retries);
          await sleep(delay);
          continue;
        }
        const h = new Headers();
        for (const [k, v] of Object.entries(a.headers)) {
          if (Array.isArray(v)) for (const x of v) h.append(k, x);
          else if (v !== undefined) h.set(k, v);
        }
        const empty = [101, 204, 205, 304].includes(a.status);
        return new Response(empty ? null : new Uint8Array(a.body), { status: a.status, headers: h });
      } catch (e) {
        if (e instanceof ReadTimeout) throw new KaironTimeoutError(`${method} ${url.href}: ${e.message}`, { cause: e });
        const err = e instanceof Error ? e : new Error(String(e));
        const code = String((err as { code?: unknown }).code ?? "");
        if (tlsRefused(code)) {
          throw new KaironConnectionError(
            `${method} ${url.href}: the server's certificate is not trusted (${code}: ${err.message}); pass caFile or set KAIRON_CA_FILE (or NODE_EXTRA_CA_CERTS) to the CA \`kairon up\` printed`,
            { cause: err },
          );
        }
        failure = err;
        sent = !NOT_SENT.has(code);
      }
      if ((sent && !idempotent) || attempt >= this.retries) {
        const tries = attempt ? ` after ${attempt + 1} attempts` : "";
        throw new KaironConnectionError(`${method} ${url.href}: the server is unreachable${tries}: ${failure.message}`, { cause: failure });
      }
      const delay = backoff(attempt);
      log("%s %s failed (%s); retrying in %d ms (%d of %d)", method, url.href, failure.message, delay, attempt + 1, this.retries);
      await sleep(delay);
    }
  };

  /** A GET read as it arrives (a followed log): the answer once its status and headers are in;
   * its body is then read without a timeout (such a stream may stay quiet for long). A connection
   * that could not be made is retried, as `fetch` retries it. */
  async stream(url: string, headers: Record<string, string>): Promise<Streamed> {
    const res = await this.#get(url, headers);
    return { status: res.statusCode ?? 0, body: res, cancel: () => res.destroy() };
  }

  async #get(url: string, headers: Record<string, string>): Promise<http.IncomingMessage> {
    const u = new URL(url);
    const all = { "user-agent": USER_AGENT, ...headers };
    for (let attempt = 0; ; attempt++) {
      try {
        return await new Promise<http.IncomingMessage>((resolve, reject) => {
          const mod = u.protocol === "https:" ? https : http;
          const req = mod.request(u, { method: "GET", headers: all, agent: this.#agent(u.protocol) }, (res) => {
            req.setTimeout(0);
            resolve(res);
          });
          req.setTimeout(readTimeoutMs(), () => req.destroy(new ReadTimeout(`no answer within ${readTimeoutMs() / 1000} s`)));
          req.on("error", reject);
          req.end();
        });
      } catch (e) {
        if (e instanceof ReadTimeout) throw new KaironTimeoutError(`GET ${u.href}: ${e.message}`, { cause: e });
        const err = e instanceof Error ? e : new Error(String(e));
        const code = String((err as { code?: unknown }).code ?? "");
        if (!NOT_SENT.has(code) || attempt >= this.retries) {
          throw new KaironConnectionError(`GET ${u.href}: the server is unreachable: ${err.message}`, { cause: err });
        }
        await sleep(backoff(attempt));
      }
    }
  }

  /** Sends `chunks` as a request body as they are produced (an upload from a file), never
   * holding them all: each chunk waits for the connection to drain. The server's 100 Continue
   * comes first, so a refusal of the request itself arrives before any of it is sent; an answer
   * that arrives mid-body (413 at the upload limit) stops the sending. Never retried once sent:
   * the chunks cannot be produced twice. */
  async upload(method: string, url: string, headers: Record<string, string>, chunks: AsyncIterable<Uint8Array> | Iterable<Uint8Array>): Promise<NodeAnswer> {
    const u = new URL(url);
    const all = { "user-agent": USER_AGENT, ...headers, expect: "100-continue" };
    const mod = u.protocol === "https:" ? https : http;
    let answered = false;
    const req = mod.request(u, { method, headers: all, agent: this.#agent(u.protocol) });
    const answer = new Promise<NodeAnswer>((resolve, reject) => {
      req.on("response", (res) => {
        answered = true;
        const got: Buffer[] = [];
        res.on("data", (c: Buffer) => got.push(c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(got) }));
        res.on("error", reject);
      });
      req.on("error", (e) => {
        if (!answered) reject(e);
      });
    });
    answer.catch(() => {});
    req.setTimeout(readTimeoutMs(), () => req.destroy(new ReadTimeout(`no answer within ${readTimeoutMs() / 1000} s`)));
    const proceed = await Promise.race([
      new Promise<boolean>((r) => req.once("continue", () => r(true))),
      answer.then(() => false, () => false),
      sleep(EXPECT_CONTINUE_WAIT_MS).then(() => true),
    ]);
    try {
      if (proceed) {
        for await (const chunk of chunks) {
          if (answered || req.destroyed) break;
          if (!req.write(chunk)) await new Promise<void>((r) => req.once("drain", () => r()).once("close", () => r()));
        }
      }
      if (!answered && !req.destroyed) req.end();
      const a = await answer;
      if (!req.writableEnded) req.destroy();
      return a;
    } catch (e) {
      req.destroy();
      if (e instanceof ReadTimeout) throw new KaironTimeoutError(`${method} ${u.href}: ${e.message}`, { cause: e });
      const err = e instanceof Error ? e : new Error(String(e));
      throw new KaironConnectionError(`${method} ${u.href}: the upload failed: ${err.message}`, { cause: err });
    }
  }

  /** A WebSocket to `path` with the token in its Authorization header and this transport's CA. */
  socket(base: string, path: string, token: string): Promise<Relay> {
    const url = `${base.replace(/^http/, "ws")}${path}`;
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url, {
        headers: { Authorization: `Bearer ${token}`, "User-Agent": USER_AGENT },
        ca: this.#ca,
        maxPayload: 0,
      });
      ws.binaryType = "nodebuffer";
      ws.once("open", () =>
        resolve({
          send: (d) => ws.send(d),
          sendText: (t) => ws.send(t),
          close: () => ws.close(),
          // A Buffer is a Uint8Array: handed on as is.
          onMessage: (f) => ws.on("message", (d: Buffer) => f(d)),
          onClose: (f) => {
            let done = false;
            const once = (reason: string) => {
              if (done) return;
              done = true;
              f(reason);
            };
            ws.on("close", (_code: number, reason: Buffer) => once(reason.toString("utf8")));
            ws.on("error", () => once(""));
          },
        }),
      );
      // A refusal instead of the upgrade: with this listener, ws leaves the request to us, and a request left
      // open keeps its socket (and so the process) alive.
      ws.once("unexpected-response", (req, res) => {
        const chunks: Buffer[] = [];
        const conn = res.socket;
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          conn.destroy();
          req.destroy();
          reject(errorFrom(res.statusCode ?? 0, Buffer.concat(chunks).toString("utf8")));
        });
      });
      ws.once("error", (e) => reject(new KaironConnectionError(`${url}: the server is unreachable: ${e.message}`)));
    });
  }

  /** Closes idle connections. */
  close(): void {
    for (const a of this.#agents.values()) a.destroy();
    this.#agents.clear();
  }
}
