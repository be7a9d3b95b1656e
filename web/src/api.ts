// The REST client: openapi-fetch on the types generated from openapi/openapi.json (in
// sdk/typescript), so the dashboard stops compiling when the API changes. The token lives in
// session storage and goes only in the Authorization header, never in a URL.

import createClient from "openapi-fetch";
import type { components, paths } from "../../sdk/typescript/src/generated/schema";

type S = components["schemas"];
export type Machine = S["Machine"];
export type MachinePool = S["MachinePool"];
export type MachineClaim = S["MachineClaim"];
export type KaironNode = S["KaironNode"];
export type Whoami = S["Whoami"];
export type UsageRow = S["UsageRow"];
export type UsageReport = S["UsageReport"];
export type FileEntry = S["FileEntry"];
export type Event = S["Event"];
export type MachineWatchEvent = S["MachineWatchEvent"];
export type MachinePoolWatchEvent = S["MachinePoolWatchEvent"];
export type MachineClaimWatchEvent = S["MachineClaimWatchEvent"];
export type KaironNodeWatchEvent = S["KaironNodeWatchEvent"];
export type Paths = paths;

const KEY = "kairon.token";

export const getToken = (): string | null => sessionStorage.getItem(KEY);
export const setToken = (t: string) => sessionStorage.setItem(KEY, t);
export const clearToken = () => sessionStorage.removeItem(KEY);

export const authHeaders = (): Record<string, string> => {
  const t = getToken();
  return t ? { Authorization: `Bearer ${t}` } : {};
};

export const api = createClient<paths>({ baseUrl: location.origin });
api.use({
  onRequest({ request }) {
    const t = getToken();
    if (t) request.headers.set("Authorization", `Bearer ${t}`);
    return request;
  },
});

/** A single-use ticket for the WebSocket at `path` (the token itself never goes in a URL). */
export async function wsUrl(path: string, query: Record<string, string>): Promise<string> {
  const { data, error } = await api.POST("/api/v1/tickets", { body: { path } });
  if (!data) throw new Error(error ? `${error.reason}: ${error.message}` : "no ticket");
  const q = new URLSearchParams({ ...query, ticket: data.ticket });
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  return `${scheme}//${location.host}${path}?${q.toString()}`;
}

export const seg = encodeURIComponent;
