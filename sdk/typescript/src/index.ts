/** Kairon TypeScript SDK: `Client` (Kubernetes-compatible API), `UIClient` (REST API), `Sandbox`. */
export * from "./client.js";
export * from "./errors.js";
export * from "./sandbox.js";
export type { components, operations, paths } from "./generated/schema.js";
