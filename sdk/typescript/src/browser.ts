/**
 * Kairon TypeScript SDK for browsers (the package's `browser` export): `Kairon`, `Client`,
 * `UIClient`, `Sandbox` and the typed errors, sent with `fetch` and native WebSockets (opened with
 * a single-use ticket, as the dashboard opens them). No `node:` module is imported. What needs
 * the local machine is Node's alone: `portForward` and `files.download`/`files.upload` of local
 * paths throw saying what to use instead (`sb.url(port)`, `files.readStream`, `files.write`).
 * `new Kairon({ token })` talks to the page's origin unless given `url` (another origin must allow
 * it by CORS).
 */
import { setPlatform } from "./platform.js";
import { browserPlatform } from "./platform-browser.js";

setPlatform(browserPlatform);

export * from "./client.js";
export * from "./code.js";
export * from "./errors.js";
export * from "./files.js";
export * from "./kairon.js";
export * from "./pty.js";
export * from "./sandbox.js";
export * from "./templates.js";
export {
  ConfigError,
  type Answer,
  type Config,
  type ConfigOptions,
  type LocalForward,
  type Relay,
  type Streamed,
  type TransportOptions,
  type Wire,
} from "./platform.js";
export { DEFAULT_RETRIES, USER_AGENT } from "./retry.js";
export { FetchTransport } from "./transport-fetch.js";
export { VERSION } from "./version.js";
export type { components, operations, paths } from "./generated/schema.js";
