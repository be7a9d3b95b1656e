/**
 * How both clients send in a browser: the platform's `fetch` and `WebSocket`, with the retries of
 * `retry.ts`. A browser cannot tell a connection never made from one broken mid-way (both are a
 * `TypeError`), so only idempotent calls are retried on either; a create is sent once. TLS is the
 * browser's (its trust store; `caFile` does not apply) and so is the User-Agent. The server must be
 * the page's origin, or allow it by CORS.
 */

import { KaironConnectionError, errorFrom } from "./errors.js";
import type { Answer, Relay, Streamed, TransportOptions, Wire } from "./platform.js";
import { DEFAULT_RETRIES, IDEMPOTENT, READ_TIMEOUT_HEADER, RETRY_STATUSES, backoff, retryDelay, sleep } from "./retry.js";

/** The browser's `Wire`. Also runs in Node 20+, which has `fetch` (and, from Node 22, `WebSocket`). */
export class FetchTransport implements Wire {
  /** Retries after the first attempt of what may be retried. */
  readonly retries: number;

  constructor(opts: TransportOptions = {}) {
    this.retries = Math.max(0, opts.retries ?? DEFAULT_RETRIES);
  }

  fetch = async (request: Request): Promise<Response> => {
    const method = request.method.toUpperCase();
    const idempotent = IDEMPOTENT.has(method);
    // A body is read once up front so that a retry can send it again.
    const body = method === "GET" || method === "HEAD" ? undefined : await request.arrayBuffer();
    // The browser waits as long as the server takes: the clients' read-timeout hint is not sent.
    const headers = new Headers(request.headers);
    headers.delete(READ_TIMEOUT_HEADER);
    for (let attempt = 0; ; attempt++) {
      let failure: Error;
      try {
        const res = await fetch(request.url, { method, headers, body, redirect: "follow" });
        if (idempotent && RETRY_STATUSES.has(res.status) && attempt < this.retries) {
          await res.arrayBuffer().catch(() => undefined);
          await sleep(retryDelay(attempt, res.headers.get("retry-after")));
          continue;
        }
        return res;
      } catch (e) {
        failure = e instanceof Error ? e : new Error(String(e));
      }
      if (!idempotent || attempt >= this.retries) {
        const tries = attempt ? ` after ${attempt + 1} attempts` : "";
        throw new KaironConnectionError(`${method} ${request.url}: the server is unreachable${tries}: ${failure.message}`, { cause: failure });
      }
      await sleep(backoff(attempt));
    }
  };

  async stream(url: string, headers: Record<string, string>): Promise<Streamed> {
    const abort = new AbortController();
    const res = await this.fetch(new Request(url, { headers, signal: abort.signal }));
    return { status: res.status, body: chunks(res), cancel: () => abort.abort() };
  }

  /** The browser sends a request body it holds: the chunks go into a `Blob` (which the browser
   * may keep on disk), then out as one request. Never retried. */
  async upload(
    method: string,
    url: string,
    headers: Record<string, string>,
    parts: AsyncIterable<Uint8Array> | Iterable<Uint8Array>,
  ): Promise<Answer> {
    const held: BlobPart[] = [];
    for await (const part of parts) held.push(new Uint8Array(part));
    const res = await this.fetch(new Request(url, { method, headers, body: new Blob(held) }));
    return { status: res.status, body: new Uint8Array(await res.arrayBuffer()) };
  }

  /** A browser cannot put a header on a WebSocket: a single-use ticket (`POST /api/v1/tickets`),
   * minted for this route only, stands for the token in the URL. The browser does not say why an
   * upgrade was refused, so a refusal is a `KaironConnectionError` naming the route. */
  async socket(base: string, path: string, token: string): Promise<Relay> {
    const minted = await this.fetch(
      new Request(`${base}/api/v1/tickets`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: JSON.stringify({ path: path.split("?")[0] }),
      }),
    );
    const answer = await minted.text();
    if (!minted.ok) throw errorFrom(minted.status, answer);
    const { ticket } = JSON.parse(answer) as { ticket: string };
    const url = `${base.replace(/^http/, "ws")}${path}${path.includes("?") ? "&" : "?"}ticket=${encodeURIComponent(ticket)}`;
    const ws = new WebSocket(url);
    ws.binaryType = "arraybuffer";
    await new Promise<void>((resolve, reject) => {
      ws.addEventListener("open", () => resolve(), { once: true });
      ws.addEventListener(
        "close",
        (e) => reject(new KaironConnectionError(`${path}: the WebSocket was refused or closed before it opened (code ${e.code}); the server's log says why`)),
        { once: true },
      );
    });
    return {
      send: (d) => ws.send(d),
      sendText: (t) => ws.send(t),
      close: () => ws.close(),
      onMessage: (f) =>
        ws.addEventListener("message", (e) => {
          if (e.data instanceof ArrayBuffer) f(new Uint8Array(e.data));
          else f(new TextEncoder().encode(String(e.data)));
        }),
      onClose: (f) => ws.addEventListener("close", (e) => f(e.reason), { once: true }),
    };
  }

  close(): void {}
}

/** A response body as it arrives. */
async function* chunks(res: Response): AsyncGenerator<Uint8Array> {
  if (!res.body) return;
  const reader = res.body.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      yield value;
    }
  } finally {
    // Left early (the caller stopped reading): the rest is not wanted.
    await reader.cancel().catch(() => undefined);
  }
}
