import { useEffect, useMemo, useState } from "preact/hooks";
import { api, type Event, type Machine, type Whoami } from "../api";
import { ageSeconds, backendOf, badges, human, lifecycleLine, matchesLabels, mayUseGuest, mayWrite, refusal, visibleRange } from "../logic";
import { type Live, useNow } from "../store";
import { keyOf } from "../watch";
import { Badge, Msg } from "./common";
import { Terminal } from "./terminal";
import { Files } from "./files";
import { MachineMetrics } from "./metrics";
import { Preview } from "./preview";

const ROW = 34;
const HEIGHT = 420;

type Power = "start" | "stop" | "pause" | "resume" | "hibernate" | "halt" | "restart";
const POWER: Power[] = ["start", "stop", "pause", "resume", "hibernate", "halt", "restart"];

export function Machines({ who, live }: { who: Whoami; live: Live }) {
  const now = useNow();
  const [ns, setNs] = useState("");
  const [labels, setLabels] = useState("");
  const [selected, setSelected] = useState<string | undefined>();
  const [scroll, setScroll] = useState(0);
  const all = useMemo(() => [...(live.machines?.values() ?? [])], [live.machines]);
  const namespaces = useMemo(() => [...new Set(all.map((m) => m.metadata.namespace ?? ""))].sort(), [all]);
  const rows = useMemo(
    () =>
      all
        .filter((m) => (!ns || m.metadata.namespace === ns) && matchesLabels(labels, m.metadata.labels))
        .sort((a, b) => keyOf(a).localeCompare(keyOf(b))),
    [all, ns, labels],
  );
  const { start, end } = visibleRange(rows.length, ROW, scroll, HEIGHT);
  const sel = selected ? live.machines?.get(selected) : undefined;

  return (
    <section aria-labelledby="machines-h">
      <h2 id="machines-h">Machines</h2>
      <div class="filters">
        <label>
          Namespace{" "}
          <select value={ns} onChange={(e) => setNs(e.currentTarget.value)}>
            <option value="">all</option>
            {namespaces.map((n) => (
              <option value={n}>{n}</option>
            ))}
          </select>
        </label>
        <label>
          Labels{" "}
          <input value={labels} placeholder="k=v,k2=v2" onInput={(e) => setLabels(e.currentTarget.value)} />
        </label>
        <span data-testid="machine-count">{live.machines ? `${rows.length} of ${all.length}` : "loading…"}</span>
      </div>
      <div class="table" role="table" aria-label="Machines" aria-rowcount={rows.length + 1}>
        <div class="row head" role="row">
          {["Name", "Namespace", "Phase", "Power", "Node", "Backend", "IP", "Age", "Lifecycle"].map((h) => (
            <span role="columnheader">{h}</span>
          ))}
        </div>
        <div class="scroll" style={{ height: `${HEIGHT}px` }} onScroll={(e) => setScroll(e.currentTarget.scrollTop)} data-testid="machine-scroll">
          <div style={{ height: `${rows.length * ROW}px`, position: "relative" }}>
            {rows.slice(start, end).map((m, i) => {
              const k = keyOf(m);
              const age = ageSeconds(m.metadata.creationTimestamp, now);
              return (
                <div
                  role="row"
                  tabIndex={0}
                  class={`row ${k === selected ? "selected" : ""}`}
                  style={{ top: `${(start + i) * ROW}px` }}
                  data-machine={k}
                  aria-selected={k === selected}
                  onClick={() => setSelected(k)}
                  onKeyDown={(e) => e.key === "Enter" && setSelected(k)}
                >
                  <span role="cell">{m.metadata.name}</span>
                  <span role="cell">{m.metadata.namespace}</span>
                  <span role="cell" data-testid="phase">{m.status?.phase ?? "—"}</span>
                  <span role="cell">{m.spec.powerState ?? "Running"}</span>
                  <span role="cell">{m.status?.nodeName ?? m.spec.nodeName ?? "—"}</span>
                  <span role="cell">{backendOf(m)}</span>
                  <span role="cell">{m.status?.guestIP ?? "—"}</span>
                  <span role="cell">{age === undefined ? "—" : human(age)}</span>
                  <span role="cell">
                    {badges(m).map((b) => (
                      <Badge>{b}</Badge>
                    ))}{" "}
                    {lifecycleLine(m, now) ?? ""}
                  </span>
                </div>
              );
            })}
          </div>
        </div>
      </div>
      {sel && <Detail key={selected} who={who} m={sel} now={now} />}
    </section>
  );
}

function Detail({ who, m, now }: { who: Whoami; m: Machine; now: number }) {
  const ns = m.metadata.namespace ?? "";
  const name = m.metadata.name;
  const path = { namespace: ns, name };
  const [events, setEvents] = useState<Event[]>([]);
  const [ok, setOk] = useState<string>();
  const [err, setErr] = useState<string>();
  const [dry, setDry] = useState(false);
  const [copyName, setCopyName] = useState(`${name}-copy`);
  const [tab, setTab] = useState<"events" | "terminal" | "console" | "files">("events");
  const [shellOpened, setShellOpened] = useState(false);
  const [consoleOpened, setConsoleOpened] = useState(false);
  useEffect(() => {
    if (tab === "terminal") setShellOpened(true);
    if (tab === "console") setConsoleOpened(true);
  }, [tab]);
  const writer = mayWrite(who, ns);
  const guest = mayUseGuest(who, m);
  const rv = m.metadata.resourceVersion;

  // Events follow the Machine: fetched again when the watch brings a new version of it.
  useEffect(() => {
    void api.GET("/api/v1/machines/{namespace}/{name}/events", { params: { path } }).then(({ data }) => {
      if (data) setEvents(data.items);
    });
  }, [ns, name, rv]);

  const done = (what: string, status: number, error: unknown, okText: string) => {
    if (error) {
      setOk(undefined);
      setErr(`${what}: ${refusal(status, error)}`);
    } else {
      setErr(undefined);
      setOk(okText);
    }
  };
  const power = async (op: Power, paused = false) => {
    const dryRun = dry ? "All" : undefined;
    const p = `/api/v1/machines/{namespace}/{name}/${op}` as const;
    const query = op === "start" ? { dryRun, paused: paused || undefined } : { dryRun };
    const { error, response } = await api.POST(p, { params: { path, query } } as never);
    done(op, response.status, error, `${op}${paused ? " (paused)" : ""}${dry ? " (dry run)" : ""}: accepted`);
  };
  const copy = async (op: "fork" | "clone") => {
    const { error, response } = await api.POST(`/api/v1/machines/{namespace}/{name}/${op}`, {
      params: { path },
      body: { name: copyName },
    });
    done(op, response.status, error, `${op}: ${copyName} created`);
  };
  const freeze = async (op: "freeze" | "unfreeze") => {
    const { error, response } = await api.POST(`/api/v1/machines/{namespace}/{name}/${op}`, { params: { path } });
    done(op, response.status, error, `${op}: accepted`);
  };
  const remove = async () => {
    const { error, response } = await api.DELETE("/api/v1/machines/{namespace}/{name}", {
      params: { path, query: { dryRun: dry ? "All" : undefined } },
    });
    done("delete", response.status, error, `delete${dry ? " (dry run)" : ""}: accepted`);
  };

  return (
    <section class="detail" aria-label={`Machine ${ns}/${name}`}>
      <h3>
        {ns}/{name} <span data-testid="detail-phase">{m.status?.phase ?? "—"}</span>
      </h3>
      <p data-testid="lifecycle">{lifecycleLine(m, now) ?? "no lifecycle"}</p>
      <MachineMetrics m={m} />
      {writer && (
        <div class="actions" data-testid="actions">
          {POWER.map((op) => (
            <button type="button" onClick={() => power(op)}>
              {op}
            </button>
          ))}
          <button type="button" onClick={() => power("start", true)}>
            start paused
          </button>
          <button type="button" onClick={() => freeze("freeze")}>
            freeze
          </button>
          <button type="button" onClick={() => freeze("unfreeze")}>
            unfreeze
          </button>
          <label>
            New name <input value={copyName} onInput={(e) => setCopyName(e.currentTarget.value)} />
          </label>
          <button type="button" onClick={() => copy("fork")}>
            fork
          </button>
          <button type="button" onClick={() => copy("clone")}>
            clone
          </button>
          <button type="button" class="danger" onClick={remove}>
            delete
          </button>
          <label>
            <input type="checkbox" checked={dry} onChange={(e) => setDry(e.currentTarget.checked)} /> dry run
          </label>
        </div>
      )}
      <Msg kind="ok" text={ok} />
      <Msg kind="error" text={err} />
      {guest && <Preview m={m} />}
      <div role="tablist" aria-label="Machine details">
        <button type="button" role="tab" aria-selected={tab === "events"} onClick={() => setTab("events")}>
          Events
        </button>
        {guest && (
          <button type="button" role="tab" aria-selected={tab === "terminal"} onClick={() => setTab("terminal")}>
            Terminal
          </button>
        )}
        {guest && (
          <button type="button" role="tab" aria-selected={tab === "console"} onClick={() => setTab("console")}>
            Console
          </button>
        )}
        {guest && (
          <button type="button" role="tab" aria-selected={tab === "files"} onClick={() => setTab("files")}>
            Files
          </button>
        )}
      </div>
      {tab === "events" && (
        <ul class="events" aria-label="Events">
          {events.length === 0 && <li>none</li>}
          {events.slice(-20).map((e) => (
            <li>
              <span class={e.type === "Warning" ? "warn" : ""}>{e.type}</span> <strong>{e.reason}</strong> {e.note}
            </li>
          ))}
        </ul>
      )}
      {/* The shell stays open while another tab is shown. */}
      {guest && shellOpened && (
        <div hidden={tab !== "terminal"}>
          <Terminal m={m} />
        </div>
      )}
      {guest && consoleOpened && (
        <div hidden={tab !== "console"}>
          <Terminal m={m} kind="console" />
        </div>
      )}
      {tab === "files" && guest && <Files m={m} />}
    </section>
  );
}
