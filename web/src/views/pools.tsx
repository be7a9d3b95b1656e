import { useMemo, useState } from "preact/hooks";
import { api, type Whoami } from "../api";
import {
  LABEL_CLAIM,
  LABEL_POOL,
  claimTtl,
  mayWrite,
  networkLine,
  networkSpec,
  refusal,
  secretEnvSpec,
  type NetworkChoice,
} from "../logic";
import type { Live } from "../store";
import { Msg } from "./common";

export function Pools({ who, live }: { who: Whoami; live: Live }) {
  const [ok, setOk] = useState<string>();
  const [err, setErr] = useState<string>();
  const [ttl, setTtl] = useState("3600");
  const pools = useMemo(() => [...(live.pools?.values() ?? [])], [live.pools]);
  const members = (ns: string, pool: string) =>
    [...(live.machines?.values() ?? [])].filter(
      (m) => m.metadata.namespace === ns && (m.metadata.labels ?? {})[LABEL_POOL] === pool,
    );

  const claim = async (ns: string, pool: string) => {
    const name = `${pool}-${Date.now().toString(36)}`;
    let ttlSeconds;
    try {
      ttlSeconds = claimTtl(ttl);
    } catch (x) {
      setOk(undefined);
      setErr(`claim: ${(x as Error).message}`);
      return;
    }
    const { error, response } = await api.POST("/api/v1/machineclaims/{namespace}", {
      params: { path: { namespace: ns } },
      body: { metadata: { name }, spec: { poolName: pool, ...(ttlSeconds ? { ttlSeconds } : {}) } },
    });
    if (error) {
      setOk(undefined);
      setErr(`claim: ${refusal(response.status, error)}`);
    } else {
      setErr(undefined);
      setOk(`claim ${ns}/${name} created`);
    }
  };

  return (
    <section aria-labelledby="pools-h">
      <h2 id="pools-h">Pools</h2>
      <Msg kind="ok" text={ok} />
      <Msg kind="error" text={err} />
      {mayWrite(who, who.namespaces.includes("*") ? "default" : who.namespaces[0]) && (
        <>
          <NewPool who={who} onDone={(t, e) => (e ? setErr(e) : setOk(t))} />
          <label>
            Claim TTL (seconds; empty: none){" "}
            <input value={ttl} inputMode="numeric" onInput={(e) => setTtl(e.currentTarget.value)} />
          </label>
        </>
      )}
      <table>
        <thead>
          <tr>
            {["Pool", "Namespace", "Replicas", "Ready", "Warm", "Claimed", "Warm power", "Network", "Members", ""].map((h) => (
              <th scope="col">{h}</th>
            ))}
          </tr>
        </thead>
        <tbody>
          {pools.length === 0 && (
            <tr>
              <td colSpan={10}>{live.pools ? "no pools" : "loading…"}</td>
            </tr>
          )}
          {pools.map((p) => {
            const ns = p.metadata.namespace ?? "";
            const ms = members(ns, p.metadata.name);
            return (
              <tr data-pool={`${ns}/${p.metadata.name}`}>
                <td>{p.metadata.name}</td>
                <td>{ns}</td>
                <td>{p.spec.replicas}</td>
                <td data-testid="ready">{p.status?.ready ?? 0}</td>
                <td data-testid="warm">{p.status?.warm ?? 0}</td>
                <td data-testid="claimed">{p.status?.claimed ?? 0}</td>
                <td>{p.spec.warmPowerState ?? "Paused"}</td>
                <td data-testid="network">{networkLine(p.spec.template?.spec?.network)}</td>
                <td>
                  {ms
                    .map((m) => `${m.metadata.name} (${m.status?.phase ?? "—"}${(m.metadata.labels ?? {})[LABEL_CLAIM] ? ", claimed" : ""})`)
                    .join(", ")}
                </td>
                <td>
                  {mayWrite(who, ns) && (
                    <button type="button" onClick={() => claim(ns, p.metadata.name)}>
                      Claim
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

function NewPool({ who, onDone }: { who: Whoami; onDone: (ok?: string, err?: string) => void }) {
  const [name, setName] = useState("agents");
  const [ns, setNs] = useState(who.namespaces.includes("*") ? "default" : who.namespaces[0]);
  const [template, setTemplate] = useState("busybox");
  const [replicas, setReplicas] = useState(1);
  const [network, setNetwork] = useState<NetworkChoice>("internet");
  const [allow, setAllow] = useState("");
  const [secrets, setSecrets] = useState("");
  const submit = async (e: Event) => {
    e.preventDefault();
    let net, secretEnv;
    try {
      net = networkSpec(network, allow);
      secretEnv = secretEnvSpec(secrets);
    } catch (x) {
      onDone(undefined, `create pool: ${(x as Error).message}`);
      return;
    }
    const { error, response } = await api.POST("/api/v1/machinepools/{namespace}", {
      params: { path: { namespace: ns } },
      body: {
        metadata: { name },
        spec: {
          replicas,
          warmPowerState: "Paused",
          template: {
            spec: {
              sandbox: { templateName: template },
              ...(net ? { network: net } : {}),
              ...(Object.keys(secretEnv).length > 0 ? { secretEnv } : {}),
            },
          },
        },
      } as never,
    });
    if (error) onDone(undefined, `create pool: ${refusal(response.status, error)}`);
    else onDone(`pool ${ns}/${name} created`);
  };
  return (
    <form class="inline" onSubmit={submit} aria-label="New pool">
      <label>
        Name <input value={name} onInput={(e) => setName(e.currentTarget.value)} required />
      </label>
      <label>
        Namespace <input value={ns} onInput={(e) => setNs(e.currentTarget.value)} required />
      </label>
      <label>
        Template <input value={template} onInput={(e) => setTemplate(e.currentTarget.value)} required />
      </label>
      <label>
        Replicas{" "}
        <input type="number" min={0} value={replicas} onInput={(e) => setReplicas(Number(e.currentTarget.value))} />
      </label>
      <label for="new-pool-network">Network</label>
      <select id="new-pool-network" value={network} onChange={(e) => setNetwork(e.currentTarget.value as NetworkChoice)}>
        <option value="internet">Internet</option>
        <option value="none">None</option>
        <option value="allowlist">Allowlist</option>
      </select>
      {network === "allowlist" && (
        <label>
          Allow{" "}
          <input value={allow} placeholder="pypi.org, .pythonhosted.org" onInput={(e) => setAllow(e.currentTarget.value)} />
        </label>
      )}
      <label>
        Secrets{" "}
        <input value={secrets} placeholder="OPENAI_API_KEY=openai/api-key" onInput={(e) => setSecrets(e.currentTarget.value)} />
      </label>
      <button type="submit">Create pool</button>
    </form>
  );
}
