/** The browser's parts (see `platform.ts`): fetch and WebSocket, and settings from the options alone. */

import { ConfigError, type Config, type ConfigOptions, type Platform } from "./platform.js";
import { FetchTransport } from "./transport-fetch.js";

/** A browser has no environment or kubeconfig: `url` (default the page's origin) and `token` are given. */
function config(opts: ConfigOptions): Config {
  const url = opts.url ?? (typeof location === "undefined" ? undefined : location.origin);
  if (!url || !opts.token) {
    const missing = [!url && "url", !opts.token && "token"].filter(Boolean).join(" and ");
    throw new ConfigError(`new Kairon() in a browser takes its settings as options: pass ${missing} (there is no environment or kubeconfig to read)`);
  }
  return { url: url.replace(/\/+$/, ""), token: opts.token, namespace: opts.namespace ?? "default", source: "options" };
}

export const browserPlatform: Platform = {
  name: "browser",
  wire: (opts) => new FetchTransport(opts),
  config,
};
