// Live lists: the REST watches (`GET /api/v1/<kind>?watch=true`, NDJSON). The first stream
// sends every object as ADDED; when a stream ends the watch resumes from the last version it
// saw; an ERROR with code 410 (too old) starts again from nothing. No polling anywhere.

import { authHeaders } from "./api";
import type {
  KaironNodeWatchEvent,
  MachineClaimWatchEvent,
  MachinePoolWatchEvent,
  MachineWatchEvent,
  Paths,
} from "./api";

type WatchEvent = MachineWatchEvent | MachinePoolWatchEvent | MachineClaimWatchEvent | KaironNodeWatchEvent;
type Watched = "/api/v1/machines" | "/api/v1/machinepools" | "/api/v1/machineclaims" | "/api/v1/nodes";
// A compile-time check that these are the API's paths.
const _paths: Watched extends keyof Paths ? true : never = true;
void _paths;

export type ObjectOf<E> = E extends { object: infer O } ? O : never;
export const keyOf = (o: { metadata: { name?: string | null; namespace?: string | null } }) =>
  `${o.metadata.namespace ?? ""}/${o.metadata.name ?? ""}`;

export interface WatchHandle {
  stop(): void;
}

export function watch<E extends WatchEvent>(
  path: Watched,
  onChange: (items: Map<string, ObjectOf<E>>) => void,
  onError: (message: string) => void,
): WatchHandle {
  const items = new Map<string, ObjectOf<E>>();
  let rv = "";
  let stopped = false;
  let controller: AbortController | undefined;

  const run = async () => {
    while (!stopped) {
      controller = new AbortController();
      const started = Date.now();
      try {
        const q = new URLSearchParams({ watch: "true" });
        if (rv) q.set("resourceVersion", rv);
        const resp = await fetch(`${path}?${q.toString()}`, { headers: authHeaders(), signal: controller.signal });
        if (!resp.ok || !resp.body) {
          const body = await resp.json().catch(() => ({}));
          onError(`${body.reason ?? resp.status}: ${body.message ?? "the watch was refused"}`);
          if (resp.status === 401 || resp.status === 403) return;
        } else {
          if (rv === "") onChange(new Map(items));
          const reader = resp.body.getReader();
          const decoder = new TextDecoder();
          let buf = "";
          for (;;) {
            const { value, done } = await reader.read();
            if (done) break;
            buf += decoder.decode(value, { stream: true });
            const lines = buf.split("\n");
            buf = lines.pop() ?? "";
            let changed = false;
            for (const line of lines) {
              if (!line.trim()) continue;
              const ev = JSON.parse(line) as E;
              const obj = ev.object as ObjectOf<E> & { metadata: { resourceVersion?: string | null } };
              if (ev.type === "ERROR") {
                const status = ev.object as unknown as { code?: number; message?: string };
                if (status.code === 410) {
                  rv = "";
                  items.clear();
                  changed = true;
                } else {
                  onError(status.message ?? "the watch failed");
                }
                continue;
              }
              if (obj?.metadata?.resourceVersion) rv = obj.metadata.resourceVersion;
              if (ev.type === "BOOKMARK") continue;
              if (ev.type === "DELETED") items.delete(keyOf(obj));
              else items.set(keyOf(obj), obj);
              changed = true;
            }
            if (changed) onChange(new Map(items));
          }
        }
      } catch (e) {
        if (stopped) return;
        onError(`the watch broke: ${String(e)}; reconnecting`);
      }
      // A stream that ended at once (an error) waits a little before the next one.
      if (Date.now() - started < 2000) await new Promise((r) => setTimeout(r, 2000));
    }
  };
  void run();
  return {
    stop() {
      stopped = true;
      controller?.abort();
    },
  };
}
