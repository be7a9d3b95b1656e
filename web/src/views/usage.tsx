import { useEffect, useRef, useState } from "preact/hooks";
import { api, type UsageRow } from "../api";
import { perNamespacePerDay, refusal, toCsv, topClaims } from "../logic";
import type { Live } from "../store";
import { download, Msg } from "./common";

/**
 * Usage for billing (`/api/v1/usage`): per namespace per day and the top claims, as bar charts,
 * exportable as CSV. Fetched again when the claims watch reports a change (at most every 10 s),
 * never on a timer.
 */
export function Usage({ live }: { live: Live }) {
  const [days, setDays] = useState<UsageRow[]>([]);
  const [claims, setClaims] = useState<UsageRow[]>([]);
  const [err, setErr] = useState<string>();
  const last = useRef(0);
  const pending = useRef<ReturnType<typeof setTimeout>>();

  const load = async () => {
    last.current = Date.now();
    const [d, c] = await Promise.all([
      api.GET("/api/v1/usage", { params: { query: { groupBy: "day" } } }),
      api.GET("/api/v1/usage", { params: { query: { groupBy: "claim" } } }),
    ]);
    if (d.data) setDays(d.data.rows);
    else setErr(refusal(d.response.status, d.error));
    if (c.data) setClaims(c.data.rows);
  };
  useEffect(() => {
    if (!live.claims) return;
    const wait = Math.max(0, last.current + 10_000 - Date.now());
    clearTimeout(pending.current);
    pending.current = setTimeout(() => void load(), wait);
    return () => clearTimeout(pending.current);
  }, [live.claims]);

  const perDay = perNamespacePerDay(days);
  const top = topClaims(claims, 10);
  const maxDay = Math.max(1, ...perDay.map((r) => r.vcpuSeconds));
  const maxTop = Math.max(1, ...top.map((r) => r.vcpuSeconds));
  const csv = () =>
    download(
      "kairon-usage.csv",
      new Blob(
        [
          toCsv(
            ["day", "namespace", "activeSeconds", "suspendedSeconds", "vcpuSeconds", "memoryGiBSeconds"],
            perDay.map((r) => [r.day, r.namespace, r.activeSeconds, r.suspendedSeconds, r.vcpuSeconds, r.memoryGiBSeconds]),
          ),
        ],
        { type: "text/csv" },
      ),
    );
  return (
    <section aria-labelledby="usage-h">
      <h2 id="usage-h">Usage</h2>
      <Msg kind="error" text={err} />
      <button type="button" onClick={csv}>
        Export CSV
      </button>
      <h3>vCPU-seconds per namespace per day</h3>
      <ul class="bars" aria-label="Usage per namespace per day">
        {perDay.map((r) => (
          <li>
            <span class="label">
              {r.day} {r.namespace}
            </span>
            <span class="bar" style={{ width: `${(60 * r.vcpuSeconds) / maxDay}%` }} />
            <span>{r.vcpuSeconds.toFixed(1)}</span>
          </li>
        ))}
      </ul>
      <h3>Top claims</h3>
      <ul class="bars" aria-label="Top claims">
        {top.map((r) => (
          <li>
            <span class="label">
              {r.namespace}/{r.claim}
            </span>
            <span class="bar" style={{ width: `${(60 * r.vcpuSeconds) / maxTop}%` }} />
            <span>{r.vcpuSeconds.toFixed(1)}</span>
          </li>
        ))}
      </ul>
    </section>
  );
}
