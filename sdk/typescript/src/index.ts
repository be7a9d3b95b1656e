/**
 * Kairon TypeScript SDK for Node: `Kairon` (the entry point), `Client` (Kubernetes-compatible API),
 * `UIClient` (REST API), `Sandbox`, and typed errors (every one a `KaironError`). Browsers get
 * `browser.ts` (the package's `browser` export): the same classes without what needs the local
 * machine.
 */
import { setPlatform } from "./platform.js";
import { nodePlatform } from "./platform-node.js";

setPlatform(nodePlatform);

export * from "./client.js";
export * from "./code.js";
export * from "./config.js";
export * from "./errors.js";
export * from "./files.js";
export * from "./forward.js";
export * from "./kairon.js";
export * from "./pty.js";
export * from "./sandbox.js";
export * from "./templates.js";
export type { Answer, LocalForward, Relay, Streamed, Wire } from "./platform.js";
export { DEFAULT_RETRIES, Transport, USER_AGENT, type TransportOptions } from "./transport.js";
export { FetchTransport } from "./transport-fetch.js";
export { VERSION } from "./version.js";
export type { components, operations, paths } from "./generated/schema.js";
