/**
 * The retry policy both transports share. A connection that could not be made (nothing was sent)
 * is retried for every method; a GET also when the connection broke mid-way or the server answered
 * 429, 502 or 503. Anything else, a create above all, is sent once. Retries back off exponentially
 * with jitter.
 */

import { VERSION } from "./version.js";

/** The User-Agent requests carry (where the platform lets it be set). */
export const USER_AGENT = `kairon-sdk-typescript/${VERSION}`;
/** Retries after the first attempt of what may be retried, unless `retries` says otherwise. */
export const DEFAULT_RETRIES = 4;
/** A command's timeout when its run gives none, buffered or streamed, in seconds: the server's
 * `--exec-default-timeout` default. */
export const EXEC_DEFAULT_TIMEOUT = 300;
/** How much longer than its command a run waits for the answer, in seconds. */
export const EXEC_READ_MARGIN = 30;
/** A request header the clients set for their transport, never sent: how long this request may
 * wait for its answer, in ms, when longer than the transport's own read timeout (a run waits as
 * long as its command may). */
export const READ_TIMEOUT_HEADER = "x-kairon-read-timeout-ms";
export const BACKOFF_CAP_MS = 8_000;
const BACKOFF_BASE_MS = 250;
export const IDEMPOTENT = new Set(["GET", "HEAD", "OPTIONS"]);
export const RETRY_STATUSES = new Set([429, 502, 503]);

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Milliseconds before retry `attempt` (0-based): exponential, capped, with jitter. */
export function backoff(attempt: number): number {
  const ceiling = Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * 2 ** attempt);
  return ceiling / 2 + Math.random() * (ceiling / 2);
}

/** The wait before retrying an answer with `status` (a `Retry-After` in seconds counts, up to the cap). */
export function retryDelay(attempt: number, retryAfter: string | null | undefined): number {
  const after = Number(retryAfter);
  return Math.max(backoff(attempt), Number.isFinite(after) && retryAfter ? Math.min(after * 1000, BACKOFF_CAP_MS) : 0);
}
