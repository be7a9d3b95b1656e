import { useEffect, useState } from "preact/hooks";
import { api } from "../api";
import { nodePoolCounts, refusal } from "../logic";
import { Msg } from "./common";
import type { components } from "../../../sdk/typescript/src/generated/schema";

type Pool = components["schemas"]["Pool"];

/**
 * A node's runtime pools (Paused members), beside its templates. Pools have no watch of their
 * own: they are read again when the watched node object changes (`version`, its resourceVersion,
 * moves on every heartbeat), never on a timer.
 */
export function NodePools({ node, version }: { node: string; version?: string | null }) {
  const [pools, setPools] = useState<Pool[]>();
  const [err, setErr] = useState<string>();
  useEffect(() => {
    let gone = false;
    void (async () => {
      const { data, error, response } = await api.GET("/api/v1/nodes/{node}/pools", { params: { path: { node } } });
      if (gone) return;
      if (data) {
        setPools(data);
        setErr(undefined);
      } else setErr(refusal(response.status, error));
    })();
    return () => {
      gone = true;
    };
  }, [node, version]);

  return (
    <section class="node-pools" aria-label={`Pools of ${node}`}>
      <h3>Pools</h3>
      <Msg kind="error" text={err} />
      <table>
        <thead>
          <tr>
            {["Pool", "Template", "Size", "Ready", "Booting", "Claimed", "Members", "Message"].map((h) => (
              <th scope="col">{h}</th>
            ))}
          </tr>
        </thead>
        <tbody>
          {(pools?.length ?? 0) === 0 && (
            <tr>
              <td colSpan={8}>{pools ? "no pools on this node" : "loading…"}</td>
            </tr>
          )}
          {(pools ?? []).map((p) => {
            const c = nodePoolCounts(p);
            return (
              <tr data-node-pool={p.name}>
                <td>{p.name}</td>
                <td>{p.template.sandbox?.templateName ?? (p.template.image ? "image" : "—")}</td>
                <td data-testid="size">{p.size}</td>
                <td data-testid="ready">{c.ready}</td>
                <td data-testid="booting">{c.booting}</td>
                <td data-testid="claimed">{c.claimed}</td>
                <td>{p.members.map((m) => `${m.name} (${m.state})`).join(", ") || "—"}</td>
                <td>{p.message ?? ""}</td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </section>
  );
}
