// The dashboard's view logic, pure functions of the objects and the clock (unit-tested in
// test/logic.test.ts). Nothing here touches the DOM or the network.

import type { Machine, UsageRow, Whoami } from "./api";

/** A duration as kaironctl prints it: `45s`, `3m12s`, `23h50m`, `3d4h` (days from two on). */
export function human(secs: number): string {
  const neg = secs < 0;
  const s = Math.floor(Math.abs(secs));
  let out: string;
  if (s >= 2 * 86400) out = `${Math.floor(s / 86400)}d${Math.floor((s % 86400) / 3600)}h`;
  else if (s >= 3600) out = `${Math.floor(s / 3600)}h${Math.floor((s % 3600) / 60)}m`;
  else if (s >= 60) out = `${Math.floor(s / 60)}m${s % 60}s`;
  else out = `${s}s`;
  return neg ? `-${out}` : out;
}

const ts = (v: unknown): number | undefined => {
  if (typeof v !== "string") return undefined;
  const t = Date.parse(v);
  return Number.isNaN(t) ? undefined : t;
};

export const ANN_LAST_ACTIVITY = "kairon.zyvor.dev/last-activity";
export const ANN_IDLE_SUSPENDED = "kairon.zyvor.dev/idle-suspended";
export const ANN_LIFECYCLE_START = "kairon.zyvor.dev/lifecycle-start";
export const ANN_FROZEN_UNTIL = "kairon.zyvor.dev/fs-frozen-until";
export const LABEL_POOL = "kairon.zyvor.dev/pool";
export const LABEL_CLAIM = "kairon.zyvor.dev/claim";
export const LABEL_SANDBOX = "kairon.zyvor.dev/sandbox";

/** Seconds from an RFC 3339 time to `now` (milliseconds since the epoch). */
export function ageSeconds(time: string | null | undefined, now: number): number | undefined {
  const t = ts(time);
  return t === undefined ? undefined : Math.max(0, Math.floor((now - t) / 1000));
}

/**
 * The lifecycle line as `kaironctl describe` prints it:
 * `idle 3m12s of 10m0s, expires in 23h50m (idle action Pause, wake on connect)`.
 */
export function lifecycleLine(m: Machine, now: number): string | undefined {
  const lc = m.spec.lifecycle;
  if (!lc) return undefined;
  const ann = m.metadata.annotations ?? {};
  const parts: string[] = [];
  if (lc.idleTimeoutSeconds != null) {
    const candidates = [ts(m.status?.lifecycle?.lastActivityTime), ts(ann[ANN_LAST_ACTIVITY])].filter(
      (t): t is number => t !== undefined,
    );
    const last = candidates.length ? Math.max(...candidates) : ts(m.metadata.creationTimestamp);
    const idle = last === undefined ? 0 : Math.max(0, Math.floor((now - last) / 1000));
    parts.push(`idle ${human(idle)} of ${human(lc.idleTimeoutSeconds)}`);
  }
  if (lc.maxLifetimeSeconds != null) {
    const start = ts(ann[ANN_LIFECYCLE_START]) ?? ts(m.metadata.creationTimestamp);
    if (start !== undefined) {
      const left = lc.maxLifetimeSeconds - Math.floor((now - start) / 1000);
      parts.push(left >= 0 ? `expires in ${human(left)}` : "expired");
    }
  }
  if (typeof ann[ANN_IDLE_SUSPENDED] === "string") parts.push("idle-suspended");
  const action = lc.idleAction ?? "Pause";
  const wake = lc.wakeOnConnect ? ", wake on connect" : "";
  return `${parts.join(", ")} (idle action ${action}${wake})`;
}

/** The badges of a Machine: idle-suspended, warm (a pool member not claimed), claimed, frozen. */
export function badges(m: Machine): string[] {
  const labels = m.metadata.labels ?? {};
  const ann = m.metadata.annotations ?? {};
  const out: string[] = [];
  if (typeof ann[ANN_IDLE_SUSPENDED] === "string") out.push("idle-suspended");
  if (labels[LABEL_POOL] && !labels[LABEL_CLAIM]) out.push("warm");
  if (labels[LABEL_CLAIM]) out.push("claimed");
  if (typeof ann[ANN_FROZEN_UNTIL] === "string") out.push("frozen");
  return out;
}

/** `sandbox` or `vm`: what runs a Machine. */
export function backendOf(m: Machine): string {
  return m.spec.sandbox && !m.spec.image ? "sandbox" : "vm";
}

/** Parses `k=v,k2=v2` (or `k` for "has the label") and tells whether `labels` match it. */
export function matchesLabels(selector: string, labels: Record<string, string> | null | undefined): boolean {
  const l = labels ?? {};
  return selector
    .split(",")
    .map((p) => p.trim())
    .filter((p) => p.length > 0)
    .every((p) => {
      const neq = p.split("!=");
      if (neq.length === 2) return l[neq[0].trim()] !== neq[1].trim();
      const eq = p.split("=");
      if (eq.length === 2) return l[eq[0].trim()] === eq[1].trim();
      return p in l;
    });
}

/** Whether the caller may write in `ns` (create, power, delete): admins and operators there. */
export function mayWrite(who: Whoami | undefined, ns: string): boolean {
  if (!who) return false;
  if (who.role === "admin") return true;
  if (who.role !== "operator") return false;
  return who.namespaces.includes("*") || who.namespaces.includes(ns);
}

/**
 * The server's guest rule (`auth::may_use_guest`): admins always (not the legacy token);
 * operators only when the server's operator-exec flag is on and the Machine carries
 * `kairon.zyvor.dev/sandbox=true`; nobody else.
 */
export function mayUseGuest(who: Whoami | undefined, m: Machine): boolean {
  if (!who || who.legacy) return false;
  if (who.role === "admin") return true;
  if (who.role !== "operator" || !who.operatorExec) return false;
  return mayWrite(who, m.metadata.namespace ?? "") && (m.metadata.labels ?? {})[LABEL_SANDBOX] === "true";
}

export interface Totals {
  activeSeconds: number;
  suspendedSeconds: number;
  vcpuSeconds: number;
  memoryGiBSeconds: number;
}

const zero = (): Totals => ({ activeSeconds: 0, suspendedSeconds: 0, vcpuSeconds: 0, memoryGiBSeconds: 0 });

const add = (a: Totals, b: Totals): Totals => ({
  activeSeconds: a.activeSeconds + b.activeSeconds,
  suspendedSeconds: a.suspendedSeconds + b.suspendedSeconds,
  vcpuSeconds: a.vcpuSeconds + b.vcpuSeconds,
  memoryGiBSeconds: a.memoryGiBSeconds + b.memoryGiBSeconds,
});

export interface DayNamespace extends Totals {
  day: string;
  namespace: string;
}

/** Usage rows (`groupBy=day`) summed per day and namespace, days ascending then namespaces. */
export function perNamespacePerDay(rows: UsageRow[]): DayNamespace[] {
  const acc = new Map<string, DayNamespace>();
  for (const r of rows) {
    const day = r.day ?? "";
    const key = `${day}\u0000${r.namespace}`;
    const prev = acc.get(key) ?? { day, namespace: r.namespace, ...zero() };
    acc.set(key, { ...prev, ...add(prev, r) });
  }
  return [...acc.values()].sort((a, b) => a.day.localeCompare(b.day) || a.namespace.localeCompare(b.namespace));
}

export interface ClaimTotal extends Totals {
  namespace: string;
  claim: string;
}

/** The `n` claims with the most vCPU-seconds (ties: more GiB-seconds, then by name). */
export function topClaims(rows: UsageRow[], n: number): ClaimTotal[] {
  const acc = new Map<string, ClaimTotal>();
  for (const r of rows) {
    const claim = r.claimName ?? r.claimUid ?? "";
    const key = `${r.namespace}/${claim}`;
    const prev = acc.get(key) ?? { namespace: r.namespace, claim, ...zero() };
    acc.set(key, { ...prev, ...add(prev, r) });
  }
  return [...acc.values()]
    .sort(
      (a, b) =>
        b.vcpuSeconds - a.vcpuSeconds ||
        b.memoryGiBSeconds - a.memoryGiBSeconds ||
        `${a.namespace}/${a.claim}`.localeCompare(`${b.namespace}/${b.claim}`),
    )
    .slice(0, n);
}

/** RFC 4180 CSV: a header line and one line per row, fields quoted when they need it. */
export function toCsv(header: string[], rows: (string | number)[][]): string {
  const cell = (v: string | number) => {
    const s = String(v);
    return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
  };
  return [header, ...rows].map((r) => r.map(cell).join(",")).join("\r\n") + "\r\n";
}

/** The rows of a list that a window of `height` pixels shows at `scrollTop`, with `overscan`. */
export function visibleRange(
  count: number,
  rowHeight: number,
  scrollTop: number,
  height: number,
  overscan = 8,
): { start: number; end: number } {
  const first = Math.floor(scrollTop / rowHeight);
  const shown = Math.ceil(height / rowHeight);
  const start = Math.max(0, first - overscan);
  const end = Math.min(count, first + shown + overscan);
  return { start, end };
}

/** An error the API answered, verbatim: `Reason: message`. */
export function refusal(status: number, body: unknown): string {
  if (body && typeof body === "object" && "message" in body) {
    const b = body as { reason?: string; message?: string };
    return `${b.reason ?? status}: ${b.message ?? ""}`;
  }
  return `HTTP ${status}`;
}

/** A node pool's members by state. */
export function nodePoolCounts(p: { members: { state: "Booting" | "Ready" | "Claimed" }[] }) {
  const c = { ready: 0, booting: 0, claimed: 0 };
  for (const m of p.members) {
    if (m.state === "Ready") c.ready++;
    else if (m.state === "Booting") c.booting++;
    else c.claimed++;
  }
  return c;
}

/** What a sandbox reaches, as the SDKs' `network=` says it: its node's policy, nothing, or a list of hosts. */
export type NetworkChoice = "internet" | "none" | "allowlist";

/** The `spec.network` of a choice (`allow`: hosts separated by commas or spaces); undefined for the
 * node's policy. Throws an Error saying what to fill in when an allowlist names no host. */
export function networkSpec(choice: NetworkChoice, allow: string): { egress: { mode: string; allow?: string[] } } | undefined {
  if (choice === "internet") return undefined;
  if (choice === "none") return { egress: { mode: "None" } };
  const hosts = allow.split(/[\s,]+/).filter((h) => h);
  if (hosts.length === 0) throw new Error("name the hosts to allow (pypi.org, .pythonhosted.org), or choose None");
  return { egress: { mode: "Allowlist", allow: hosts } };
}

/** A Machine spec's network in a few words: `internet`, `none` or `allow: a, b`. */
export function networkLine(network: { egress?: { mode?: string | null; allow?: string[] | null } | null } | null | undefined): string {
  const egress = network?.egress;
  if (!egress || (egress.mode ?? "Internet") === "Internet") return "internet";
  if (egress.mode === "None") return "none";
  return `allow: ${(egress.allow ?? []).join(", ")}`;
}

/** The `spec.secretEnv` of `NAME=SECRET/KEY` entries separated by commas or spaces, as the SDKs'
 * `secrets` make it. Throws an Error naming the entry that is not written so. */
export function secretEnvSpec(text: string): Record<string, { name: string; key: string }> {
  const out: Record<string, { name: string; key: string }> = {};
  for (const entry of text.split(/[\s,]+/).filter((e) => e)) {
    const m = /^([A-Za-z_][A-Za-z0-9_]*)=([a-z0-9]([-a-z0-9.]*[a-z0-9])?)\/([-._A-Za-z0-9]+)$/.exec(entry);
    if (!m) throw new Error(`${entry}: write secrets as NAME=SECRET/KEY (a labelled Secret of the namespace and its key)`);
    out[m[1]] = { name: m[2], key: m[4] };
  }
  return out;
}

/** A claim's TTL in seconds from the form's text: empty is none; else a whole number of seconds. */
export function claimTtl(text: string): number | undefined {
  const t = text.trim();
  if (!t) return undefined;
  const n = Number(t);
  if (!Number.isInteger(n) || n <= 0) throw new Error(`claim TTL ${JSON.stringify(t)}: give whole seconds above 0, or leave it empty for none`);
  return n;
}

/** An SVG polyline's `points` for `values` (oldest first) in a `width` x `height` box: the newest at
 * the right edge, one step per sample of `capacity`, scaled to `max` (at least the largest value). */
export function sparklinePoints(values: number[], capacity: number, width: number, height: number, max = 100): string {
  const top = Math.max(max, ...values);
  const step = capacity > 1 ? width / (capacity - 1) : 0;
  const first = capacity - values.length;
  return values
    .map((v, i) => `${((first + i) * step).toFixed(1)},${(height - (Math.max(v, 0) / top) * height).toFixed(1)}`)
    .join(" ");
}

/** Bytes as one short word: `512 B`, `3.2 MiB`. */
export function bytes(n: number): string {
  const units = ["KiB", "MiB", "GiB", "TiB"];
  if (n < 1024) return `${n} B`;
  let v = n / 1024;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return `${v.toFixed(1)} ${units[u]}`;
}
