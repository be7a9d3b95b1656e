import { useEffect, useState } from "preact/hooks";
import { api, type Machine } from "../api";
import { bytes, refusal, sparklinePoints } from "../logic";

type Metrics = NonNullable<Awaited<ReturnType<typeof fetchMetrics>>["data"]>;

/** How many CPU samples the sparkline shows (one a second: the last minute). */
const SAMPLES = 60;
const WIDTH = 180;
const HEIGHT = 28;

function fetchMetrics(namespace: string, name: string) {
  return api.GET("/api/v1/machines/{namespace}/{name}/metrics", {
    params: { path: { namespace, name }, query: { windowMillis: 1000 } },
  });
}

/** What the Machine uses now, sampled on its node each second while it is shown: a CPU sparkline
 * of the last minute, memory against its limit, disk and network. Reading never wakes it. */
export function MachineMetrics({ m }: { m: Machine }) {
  const ns = m.metadata.namespace ?? "";
  const name = m.metadata.name;
  const onNode = Boolean(m.status?.runtimeID);
  const [cpu, setCpu] = useState<number[]>([]);
  const [last, setLast] = useState<Metrics>();
  const [err, setErr] = useState<string>();
  useEffect(() => {
    if (!onNode) return;
    let stop = false;
    // Each answer takes its window (1 s): asking again at once gives one sample a second.
    void (async () => {
      while (!stop) {
        const { data, error, response } = await fetchMetrics(ns, name);
        if (stop) return;
        if (data) {
          setLast(data);
          setErr(undefined);
          setCpu((c) => [...c, data.cpuPercent].slice(-SAMPLES));
        } else {
          setErr(refusal(response.status, error));
          await new Promise((r) => setTimeout(r, 2000));
        }
      }
    })();
    return () => {
      stop = true;
    };
  }, [ns, name, onNode]);

  if (!onNode) return <p data-testid="metrics">metrics: not on a node yet</p>;
  return (
    <div class="metrics" data-testid="metrics">
      <svg width={WIDTH} height={HEIGHT} role="img" aria-label="CPU over the last minute" data-testid="cpu-sparkline">
        <rect width={WIDTH} height={HEIGHT} class="spark-bg" />
        <polyline points={sparklinePoints(cpu, SAMPLES, WIDTH, HEIGHT)} class="spark" fill="none" />
      </svg>
      {last ? (
        <span data-testid="metrics-line">
          CPU {last.cpuPercent.toFixed(1)}% of {last.cpuLimitCores} · memory {bytes(last.memoryUsedBytes)} of{" "}
          {bytes(last.memoryLimitBytes)}
          {last.diskUsedBytes != null && ` · disk ${bytes(last.diskUsedBytes)}`}
          {last.networkRxBytes != null && ` · network ↓${bytes(last.networkRxBytes)} ↑${bytes(last.networkTxBytes ?? 0)}`} ·{" "}
          {last.processCount} processes
        </span>
      ) : (
        <span>measuring…</span>
      )}
      {err && <span class="warn"> {err}</span>}
    </div>
  );
}
