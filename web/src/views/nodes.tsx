import { useMemo, useState } from "preact/hooks";
import type { Whoami } from "../api";
import { NodePools } from "./nodepools";
import { Templates } from "./templates";
import { ageSeconds, human } from "../logic";
import { type Live, useNow } from "../store";

export function Nodes({ who, live }: { who: Whoami; live: Live }) {
  const now = useNow();
  const [open, setOpen] = useState<string>();
  const nodes = useMemo(() => [...(live.nodes?.values() ?? [])], [live.nodes]);
  const allocated = (node: string) =>
    [...(live.machines?.values() ?? [])].filter((m) => (m.status?.nodeName ?? m.spec.nodeName) === node).length;
  return (
    <section aria-labelledby="nodes-h">
      <h2 id="nodes-h">Nodes</h2>
      <table>
        <thead>
          <tr>
            {["Node", "CPU", "Memory", "Machines (allocated / capacity)", "Backends", "Acceleration", "Heartbeat", ""].map((h) => (
              <th scope="col">{h}</th>
            ))}
          </tr>
        </thead>
        <tbody>
          {nodes.length === 0 && (
            <tr>
              <td colSpan={8}>{live.nodes ? "no nodes" : "loading…"}</td>
            </tr>
          )}
          {nodes.map((n) => {
            const hb = ageSeconds(n.status?.heartbeatTime, now);
            return (
              <tr data-node={n.metadata.name}>
                <td>{n.metadata.name}</td>
                <td>{offered(n.status?.capacity?.cpu, n.spec.capacity?.cpu)}</td>
                <td>{offered(n.status?.capacity?.memory, n.spec.capacity?.memory)}</td>
                <td>
                  {allocated(n.metadata.name ?? "")} / {offered(n.status?.capacity?.machines, n.spec.capacity?.machines)}
                </td>
                <td>{(n.spec.backends ?? []).join(", ")}</td>
                <td>{n.spec.acceleration ? JSON.stringify(n.spec.acceleration) : "—"}</td>
                <td>{hb === undefined ? "never" : `${human(hb)} ago`}</td>
                <td>
                  <button type="button" aria-expanded={open === n.metadata.name} onClick={() => setOpen(open === n.metadata.name ? undefined : (n.metadata.name ?? undefined))}>
                    Templates and pools
                  </button>
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
      {open && (
        <div class="node-details">
          <Templates key={`t-${open}`} who={who} node={open} />
          <NodePools key={`p-${open}`} node={open} version={live.nodes?.get(`/${open}`)?.metadata.resourceVersion} />
        </div>
      )}
    </section>
  );
}

/** What a node reported it offers, and the admin's cap on it when one is set. */
function offered(reported: string | number | null | undefined, cap: string | number | null | undefined): string {
  const shown = reported === undefined || reported === null ? "—" : String(reported);
  return cap === undefined || cap === null ? shown : `${shown} (admin cap ${cap})`;
}
