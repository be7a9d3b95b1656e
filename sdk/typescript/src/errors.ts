/** Typed errors: a failed API call throws an ApiError subclass with the server's reason and message. */

import type { components } from "./generated/schema.js";

/** The REST API's reasons (an enum in its OpenAPI document); a Kubernetes `Status` may carry others. */
export type Reason = components["schemas"]["Reason"];

export class KaironError extends Error {
  override name = "KaironError";
}

/** The server refused a request: `status`, machine-readable `reason`, and `message` (what to do). */
export class ApiError extends KaironError {
  override name = "ApiError";
  constructor(
    readonly status: number,
    readonly reason: Reason | (string & {}),
    readonly serverMessage: string,
    readonly body?: unknown,
  ) {
    super(`${reason} (${status}): ${serverMessage}`);
  }
}

export class BadRequestError extends ApiError { override name = "BadRequestError"; }
export class UnauthorizedError extends ApiError { override name = "UnauthorizedError"; }
export class ForbiddenError extends ApiError { override name = "ForbiddenError"; }
export class NotFoundError extends ApiError { override name = "NotFoundError"; }
export class ConflictError extends ApiError { override name = "ConflictError"; }
export class TimeoutError extends ApiError { override name = "TimeoutError"; }
export class ServerError extends ApiError { override name = "ServerError"; }
/** 409 `MachineSuspended`: the Machine is suspended and is not woken on connect. */
export class MachineSuspendedError extends ConflictError { override name = "MachineSuspendedError"; }
/** 409 `GuestAgentDisabled`: the Machine has no guest agent to run commands or move files. */
export class GuestAgentDisabledError extends ConflictError { override name = "GuestAgentDisabledError"; }
/** 504 `WakeTimeout`: a wake-on-connect did not finish within `wakeTimeoutSeconds`. */
export class WakeTimeoutError extends TimeoutError { override name = "WakeTimeoutError"; }

/** `run(cmd, { check: true })` of a command that exited non-zero. */
export class CommandError extends KaironError {
  override name = "CommandError";
  constructor(
    readonly command: string[],
    readonly exitCode: number,
    readonly stdout: string,
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
    : status === 400 || status === 422 ? BadRequestError
    : status === 401 ? UnauthorizedError
    : status === 403 ? ForbiddenError
    : status === 404 ? NotFoundError
    : status === 409 ? ConflictError
    : status === 504 ? TimeoutError
    : status >= 500 ? ServerError
    : ApiError;
  return new cls(status, reason, message, body);
}
