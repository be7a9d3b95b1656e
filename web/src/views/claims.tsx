import { useMemo, useState } from "preact/hooks";
import { api, type Whoami } from "../api";
import { human, mayWrite, refusal } from "../logic";
import type { Live } from "../store";
import { Msg } from "./common";

/** Live claims: phase, machine, usage growing as accrual runs (from the claims watch). */
export function Claims({ who, live }: { who: Whoami; live: Live }) {
  const [err, setErr] = useState<string>();
  const claims = useMemo(() => [...(live.claims?.values() ?? [])], [live.claims]);
  const release = async (ns: string, name: string) => {
    const { error, response } = await api.DELETE("/api/v1/machineclaims/{namespace}/{name}", {
      params: { path: { namespace: ns, name } },
    });
    setErr(error ? `release: ${refusal(response.status, error)}` : undefined);
  };
  return (
    <section aria-labelledby="claims-h">
      <h2 id="claims-h">Claims</h2>
      <Msg kind="error" text={err} />
      <table>
        <thead>
          <tr>
            {["Claim", "Namespace", "Pool", "Phase", "Machine", "Active", "Suspended", "vCPU-s", "GiB-s", ""].map((h) => (
              <th scope="col">{h}</th>
            ))}
          </tr>
        </thead>
        <tbody>
          {claims.length === 0 && (
            <tr>
              <td colSpan={10}>{live.claims ? "no claims" : "loading…"}</td>
            </tr>
          )}
          {claims.map((c) => {
            const u = c.status?.usage;
            const ns = c.metadata.namespace ?? "";
            return (
              <tr data-claim={`${ns}/${c.metadata.name}`}>
                <td>{c.metadata.name}</td>
                <td>{ns}</td>
                <td>{c.spec.poolName}</td>
                <td data-testid="claim-phase">{c.status?.phase ?? "—"}</td>
                <td>{c.status?.machineName ?? "—"}</td>
                <td data-testid="active">{human(u?.activeSeconds ?? 0)}</td>
                <td>{human(u?.suspendedSeconds ?? 0)}</td>
                <td data-testid="vcpu">{(u?.vcpuSeconds ?? 0).toFixed(1)}</td>
                <td>{(u?.memoryGiBSeconds ?? 0).toFixed(1)}</td>
                <td>
                  {mayWrite(who, ns) && (
                    <button type="button" onClick={() => release(ns, c.metadata.name)}>
                      Release
                    </button>
                  )}
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </section>
  );
}
