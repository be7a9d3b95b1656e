/** Typed errors: a failed API call throws an ApiError subclass with the server's reason and message. */

import type { components } from "./generated/schema.js";

/** The REST API's reasons (an enum in its OpenAPI document); a Kubernetes `Status` may carry others. */
export type Reason = components["schemas"]["Reason"];

/** Base of every error the SDK throws. */
export class KaironError extends Error {
  override name = "KaironError";
}

/** The server could not be reached (refused, reset, unresolvable, TLS failure), after the retries a
 * request may have: connections that could not be made are retried for every call, others only
 * for idempotent ones (GET). `cause` is the underlying error. */
export class KaironConnectionError extends KaironError { override name = "KaironConnectionError"; }

/** A wait of the SDK ran out (Sandbox readiness, a process wait), or the server did not answer
 * within the read timeout. (The server's own 504 is `TimeoutError`, alias `GatewayTimeoutError`.) */
export class KaironTimeoutError extends KaironError { override name = "KaironTimeoutError"; }

const TRANSIENT_CONFLICTS = new Set(["Conflict", "NotScheduled", "NotProvisioned"]);

/** The server refused a request: `status`, machine-readable `reason`, and `message` (what to do). */
export class ApiError extends KaironError {
  override name = "ApiError";
  constructor(
    /** The HTTP status. */
    readonly status: number,
    /** The server's reason (`NotFound`, `GuestAgentDisabled`, ...), to switch on. */
    readonly reason: Reason | (string & {}),
    /** The server's message: what went wrong and what to do. */
    readonly serverMessage: string,
    /** The error body as the server sent it. */
    readonly body?: unknown,
  ) {
    super(`${reason} (${status}): ${serverMessage}`);
  }

  /** Whether this refusal may go away by itself, so a wait may try again: a 409 for an object still
   * on its way (`Conflict`, `NotScheduled`, `NotProvisioned`), 429, and the server's or the node's
   * failures (500, 502, 503, 504) other than `NotSupported`. Every other 4xx (`GuestAgentDisabled`,
   * `MachineSuspended`, `NotFound`, ...) is the server's answer and the SDK throws it at once. */
  get transient(): boolean {
    if (this.status === 409) return TRANSIENT_CONFLICTS.has(this.reason);
    if (this.status === 429) return true;
    return [500, 502, 503, 504].includes(this.status) && this.reason !== "NotSupported";
  }
}

/** 400 or 422: the request itself is wrong; the message says what to fix. */
export class BadRequestError extends ApiError { override name = "BadRequestError"; }
/** 401: no token, or one the server does not accept. */
export class UnauthorizedError extends ApiError { override name = "UnauthorizedError"; }
/** 403: the token's role or namespaces do not allow this. */
export class ForbiddenError extends ApiError { override name = "ForbiddenError"; }
/** 404: no such object (or file, or process). */
export class NotFoundError extends ApiError { override name = "NotFoundError"; }
/** 409: the object exists already, or is in a state that does not allow this. */
export class ConflictError extends ApiError { override name = "ConflictError"; }
/** 413: a file or body larger than the server takes; the message says the limit. */
export class PayloadTooLargeError extends ApiError { override name = "PayloadTooLargeError"; }
/** 504: the server waited for something that did not happen in time. */
export class TimeoutError extends ApiError { override name = "TimeoutError"; }
/** The same class as `TimeoutError`, under the name the Python SDK uses. */
export const GatewayTimeoutError = TimeoutError;
/** The same class as `TimeoutError`, under the name the Python SDK uses. */
export type GatewayTimeoutError = TimeoutError;
/** 5xx other than 504. */
export class ServerError extends ApiError { override name = "ServerError"; }
/** 409 `MachineSuspended`: the Machine is suspended and is not woken on connect. */
export class MachineSuspendedError extends ConflictError { override name = "MachineSuspendedError"; }
/** 403 `QuotaExceeded`: the namespace's KaironQuota does not allow this much (the message names
 * the limit and the use); free something there, or ask an admin to raise it. */
export class QuotaExceededError extends ForbiddenError { override name = "QuotaExceededError"; }
/** 409 `GuestAgentDisabled`: the Machine has no guest agent to run commands or move files. */
export class GuestAgentDisabledError extends ConflictError { override name = "GuestAgentDisabledError"; }
/** 409 `PowerStateUnsupported`: the Machine cannot take that power state (a sandbox cannot hibernate or
 * halt; pause or stop it instead). */
export class PowerStateUnsupportedError extends ConflictError { override name = "PowerStateUnsupportedError"; }
/** 504 `WakeTimeout`: a wake-on-connect did not finish within `wakeTimeoutSeconds`. */
export class WakeTimeoutError extends TimeoutError { override name = "WakeTimeoutError"; }

/** `run(cmd, { check: true })` of a command that exited non-zero. */
export class CommandError extends KaironError {
  override name = "CommandError";
  constructor(
    /** The command as run (argv). */
    readonly command: string[],
    /** Its exit code (non-zero). */
    readonly exitCode: number,
    /** Its stdout. */
    readonly stdout: string,
    /** Its stderr. */
    readonly stderr: string,
  ) {
    const tail = (stderr.trim() || stdout.trim()).slice(-500);
    super(`command ${JSON.stringify(command)} exited with ${exitCode}${tail ? `: ${tail}` : ""}`);
  }
}

const DEFAULT_REASON: Record<number, string> = {
  400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 409: "Conflict",
  413: "RequestEntityTooLarge", 422: "Invalid", 504: "Timeout",
};

/** The typed error for a failed response's status and body (REST `{reason, message}` or a Kubernetes Status). */
export function errorFrom(status: number, body: unknown): ApiError {
  let reason = "";
  let message = "";
  if (typeof body === "string") {
    const text: string = body;
    try {
      body = JSON.parse(text);
    } catch {
      message = text.trim();
    }
  }
  if (body && typeof body === "object") {
    const b = body as { reason?: unknown; message?: unknown };
    if (typeof b.reason === "string") reason = b.reason;
    if (typeof b.message === "string") message = b.message;
  }
  reason ||= DEFAULT_REASON[status] ?? `HTTP${status}`;
  message ||= `HTTP ${status}`;
  const cls =
    reason === "MachineSuspended" ? MachineSuspendedError
    : reason === "GuestAgentDisabled" ? GuestAgentDisabledError
    : reason === "WakeTimeout" ? WakeTimeoutError
    : reason === "QuotaExceeded" ? QuotaExceededError
    : reason === "PowerStateUnsupported" ? PowerStateUnsupportedError
    : status === 400 || status === 422 ? BadRequestError
    : status === 401 ? UnauthorizedError
    : status === 403 ? ForbiddenError
    : status === 404 ? NotFoundError
    : status === 409 ? ConflictError
    : status === 413 ? PayloadTooLargeError
    : status === 504 ? TimeoutError
    : status >= 500 ? ServerError
    : ApiError;
  return new cls(status, reason, message, body);
}

/** A template's build failed: `message` says which step (with its output) or why the pull was
 * refused; fix the image or steps, delete the template and build it again. */
export class TemplateBuildError extends KaironError {
  override name = "TemplateBuildError";
  constructor(
    /** The template. */
    readonly template: string,
    /** What the node said. */
    readonly reason: string,
  ) {
    super(`template ${JSON.stringify(template)} failed to build: ${reason}`);
  }
}
