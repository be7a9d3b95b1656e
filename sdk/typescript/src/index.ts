/**
 * Kairon TypeScript SDK: `Kairon` (the entry point), `Client` (Kubernetes-compatible API),
 * `UIClient` (REST API), `Sandbox`, and typed errors (every one a `KaironError`).
 */
export * from "./client.js";
export * from "./config.js";
export * from "./errors.js";
export * from "./files.js";
export * from "./forward.js";
export * from "./kairon.js";
export * from "./sandbox.js";
export { DEFAULT_RETRIES, Transport, USER_AGENT, type TransportOptions } from "./transport.js";
export { VERSION } from "./version.js";
export type { components, operations, paths } from "./generated/schema.js";
