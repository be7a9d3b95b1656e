import { describe, expect, it } from "vitest";
import {
  badges,
  bytes,
  sparklinePoints,
  human,
  lifecycleLine,
  matchesLabels,
  mayUseGuest,
  claimTtl,
  networkLine,
  networkSpec,
  secretEnvSpec,
  nodePoolCounts,
  perNamespacePerDay,
  toCsv,
  topClaims,
  visibleRange,
} from "../src/logic";
import type { Machine, UsageRow, Whoami } from "../src/api";

const machine = (over: Partial<Machine> & { ann?: Record<string, string>; labels?: Record<string, string> }): Machine =>
  ({
    metadata: {
      name: "m",
      namespace: "a",
      creationTimestamp: "2026-01-01T00:00:00Z",
      annotations: over.ann ?? {},
      labels: over.labels ?? {},
    },
    spec: over.spec ?? {},
    status: over.status,
  }) as Machine;

describe("countdown formatting", () => {
  it("formats durations as kaironctl does", () => {
    expect(human(0)).toBe("0s");
    expect(human(59)).toBe("59s");
    expect(human(192)).toBe("3m12s");
    expect(human(600)).toBe("10m0s");
    expect(human(86400)).toBe("24h0m");
    expect(human(23 * 3600 + 50 * 60 + 59)).toBe("23h50m");
    expect(human(2 * 86400 + 3600 * 4)).toBe("2d4h");
    expect(human(-5)).toBe("-5s");
  });

  it("reads the lifecycle line like kaironctl describe", () => {
    const now = Date.parse("2026-01-01T00:10:00Z");
    const m = machine({
      spec: { lifecycle: { idleTimeoutSeconds: 600, maxLifetimeSeconds: 86400, wakeOnConnect: true } },
      status: { lifecycle: { lastActivityTime: "2026-01-01T00:06:48Z" } },
    } as never);
    expect(lifecycleLine(m, now)).toBe("idle 3m12s of 10m0s, expires in 23h50m (idle action Pause, wake on connect)");
  });

  it("counts down live: one second later the line has moved", () => {
    const m = machine({ spec: { lifecycle: { idleTimeoutSeconds: 60 } } } as never);
    const t0 = Date.parse("2026-01-01T00:00:10Z");
    expect(lifecycleLine(m, t0)).toBe("idle 10s of 1m0s (idle action Pause)");
    expect(lifecycleLine(m, t0 + 1000)).toBe("idle 11s of 1m0s (idle action Pause)");
  });

  it("counts a claimed member's lifetime from lifecycle-start, and says expired", () => {
    const m = machine({
      spec: { lifecycle: { maxLifetimeSeconds: 3600, idleAction: "Stop" } },
      ann: { "kairon.zyvor.dev/lifecycle-start": "2026-01-01T01:00:00Z", "kairon.zyvor.dev/idle-suspended": "t" },
    } as never);
    expect(lifecycleLine(m, Date.parse("2026-01-01T01:30:00Z"))).toBe(
      "expires in 30m0s, idle-suspended (idle action Stop)",
    );
    expect(lifecycleLine(m, Date.parse("2026-01-01T03:00:00Z"))).toBe("expired, idle-suspended (idle action Stop)");
  });

  it("has no line without a lifecycle", () => {
    expect(lifecycleLine(machine({}), 0)).toBeUndefined();
  });
});

describe("badges, labels and the guest rule", () => {
  it("tells warm from claimed members", () => {
    expect(badges(machine({ labels: { "kairon.zyvor.dev/pool": "p" } }))).toEqual(["warm"]);
    expect(badges(machine({ labels: { "kairon.zyvor.dev/pool": "p", "kairon.zyvor.dev/claim": "c" } }))).toEqual([
      "claimed",
    ]);
  });

  it("matches label selectors", () => {
    expect(matchesLabels("", {})).toBe(true);
    expect(matchesLabels("a=b", { a: "b" })).toBe(true);
    expect(matchesLabels("a=b,c", { a: "b" })).toBe(false);
    expect(matchesLabels("a!=b", { a: "c" })).toBe(true);
  });

  it("follows the server's guest rule, not the role alone", () => {
    const op = (operatorExec: boolean): Whoami => ({
      subject: "o",
      role: "operator",
      namespaces: ["a"],
      legacy: false,
      operatorExec,
    });
    const sandbox = machine({ labels: { "kairon.zyvor.dev/sandbox": "true" } });
    expect(mayUseGuest(op(false), sandbox)).toBe(false);
    expect(mayUseGuest(op(true), sandbox)).toBe(true);
    expect(mayUseGuest(op(true), machine({}))).toBe(false);
    expect(mayUseGuest({ subject: "v", role: "viewer", namespaces: ["*"], legacy: false, operatorExec: true }, sandbox)).toBe(false);
    expect(mayUseGuest({ subject: "a", role: "admin", namespaces: ["*"], legacy: false, operatorExec: false }, machine({}))).toBe(true);
  });
});

describe("usage aggregation", () => {
  const row = (namespace: string, day: string, claimName: string, vcpu: number): UsageRow => ({
    namespace,
    day,
    claimName,
    activeSeconds: vcpu,
    suspendedSeconds: 1,
    vcpuSeconds: vcpu,
    memoryGiBSeconds: vcpu / 2,
  });

  it("sums per namespace per day", () => {
    const out = perNamespacePerDay([
      row("b", "2026-01-02", "x", 1),
      row("a", "2026-01-02", "y", 2),
      row("a", "2026-01-02", "z", 3),
      row("a", "2026-01-01", "y", 4),
    ]);
    expect(out.map((r) => [r.day, r.namespace, r.vcpuSeconds, r.suspendedSeconds])).toEqual([
      ["2026-01-01", "a", 4, 1],
      ["2026-01-02", "a", 5, 2],
      ["2026-01-02", "b", 1, 1],
    ]);
  });

  it("ranks the top claims", () => {
    const out = topClaims([row("a", "d", "x", 1), row("a", "d", "y", 5), row("a", "e", "x", 6), row("b", "d", "x", 2)], 2);
    expect(out.map((c) => `${c.namespace}/${c.claim}=${c.vcpuSeconds}`)).toEqual(["a/x=7", "a/y=5"]);
  });

  it("exports CSV with quoting", () => {
    expect(toCsv(["a", "b"], [["x,y", 1], ['q"', 2]])).toBe('a,b\r\n"x,y",1\r\n"q""",2\r\n');
  });

  it("keeps few rows in the DOM for a long list", () => {
    const r = visibleRange(1000, 34, 34 * 500, 600);
    expect(r.end - r.start).toBeLessThan(200);
    expect(r.start).toBe(492);
  });
});

describe("nodePoolCounts", () => {
  it("counts a node pool's members by state", () => {
    const members = (["Ready", "Booting", "Claimed", "Ready"] as const).map((state, i) => ({ id: `${i}`, name: `m${i}`, state }));
    expect(nodePoolCounts({ members })).toEqual({ ready: 2, booting: 1, claimed: 1 });
    expect(nodePoolCounts({ members: [] })).toEqual({ ready: 0, booting: 0, claimed: 0 });
  });
});

describe("network", () => {
  it("is the node's policy, none, or an allowlist, as the SDKs send it", () => {
    expect(networkSpec("internet", "ignored")).toBeUndefined();
    expect(networkSpec("none", "")).toEqual({ egress: { mode: "None" } });
    expect(networkSpec("allowlist", "pypi.org, .pythonhosted.org")).toEqual({
      egress: { mode: "Allowlist", allow: ["pypi.org", ".pythonhosted.org"] },
    });
    expect(() => networkSpec("allowlist", " , ")).toThrow(/name the hosts/);
    expect(networkLine(undefined)).toBe("internet");
    expect(networkLine({ egress: { mode: "None" } })).toBe("none");
    expect(networkLine({ egress: { mode: "Allowlist", allow: ["a.test", "b.test"] } })).toBe("allow: a.test, b.test");
  });
});

describe("secrets and claim TTLs", () => {
  it("read NAME=SECRET/KEY and whole seconds, saying what to fix", () => {
    expect(secretEnvSpec("OPENAI_API_KEY=openai/api-key, B=b.c/k")).toEqual({
      OPENAI_API_KEY: { name: "openai", key: "api-key" },
      B: { name: "b.c", key: "k" },
    });
    expect(secretEnvSpec("  ")).toEqual({});
    expect(() => secretEnvSpec("K=other/ns/key")).toThrow(/NAME=SECRET\/KEY/);
    expect(() => secretEnvSpec("K=openai")).toThrow(/NAME=SECRET\/KEY/);
    expect(claimTtl("")).toBeUndefined();
    expect(claimTtl(" 300 ")).toBe(300);
    expect(() => claimTtl("5m")).toThrow(/whole seconds/);
  });
});

describe("metrics", () => {
  it("draw the newest sample at the right edge, scaled to 100 % or the largest value", () => {
    expect(sparklinePoints([0, 50, 100], 3, 100, 20)).toBe("0.0,20.0 50.0,10.0 100.0,0.0");
    // Fewer samples than room: they start where the newest ends at the right.
    expect(sparklinePoints([100], 3, 100, 20)).toBe("100.0,0.0");
    // Two busy cores (200 %) still fit.
    expect(sparklinePoints([200, 100], 2, 10, 10)).toBe("0.0,0.0 10.0,5.0");
    expect(bytes(512)).toBe("512 B");
    expect(bytes(3 * 1024 * 1024 + 200 * 1024)).toBe("3.2 MiB");
  });
});
