import { useEffect, useState } from "preact/hooks";
import { api, type Whoami } from "../api";
import { refusal } from "../logic";
import { Msg } from "./common";
import type { components } from "../../../sdk/typescript/src/generated/schema";

type Template = components["schemas"]["Template"];

/**
 * A node's templates, read when the panel opens; admins build one from an image reference. A
 * template has no watch, and its build answers at once (202) with neither a progress stream nor a
 * wait route: while a build runs, its progress is read once a second, and only then.
 */
export function Templates({ who, node }: { who: Whoami; node: string }) {
  const [items, setItems] = useState<Template[]>([]);
  const [err, setErr] = useState<string>();
  const [name, setName] = useState("");
  const [image, setImage] = useState("");
  const [building, setBuilding] = useState<string>();
  const [progress, setProgress] = useState<Template>();
  const path = { node };

  const load = async () => {
    const { data, error, response } = await api.GET("/api/v1/nodes/{node}/templates", { params: { path } });
    if (data) setItems(data);
    else setErr(refusal(response.status, error));
  };
  useEffect(() => void load(), [node]);
  useEffect(() => {
    if (!building) return;
    const t = setInterval(async () => {
      const { data } = await api.GET("/api/v1/nodes/{node}/templates/{item}", { params: { path: { node, item: building } } });
      if (!data) return;
      setProgress(data);
      if (data.state === "Ready" || data.state === "Failed") {
        setBuilding(undefined);
        void load();
      }
    }, 1000);
    return () => clearInterval(t);
  }, [building]);

  const build = async (e: Event) => {
    e.preventDefault();
    const { error, response } = await api.POST("/api/v1/nodes/{node}/templates", {
      params: { path },
      body: { name, imageRef: image },
    });
    if (error) setErr(`build: ${refusal(response.status, error)}`);
    else {
      setErr(undefined);
      setBuilding(name);
    }
  };
  const pct = (t?: Template) => (t?.bytesTotal ? ` ${Math.round((100 * t.bytesDone) / t.bytesTotal)}%` : "");
  return (
    <section class="templates" aria-label={`Templates of ${node}`}>
      <h3>Templates</h3>
      <Msg kind="error" text={err} />
      <ul>
        {items.map((t) => (
          <li>
            <strong>{t.name}</strong> {t.imageRef} — {t.state}
            {t.message ? `: ${t.message}` : ""}
          </li>
        ))}
      </ul>
      {who.role === "admin" && (
        <form class="inline" onSubmit={build} aria-label={`Build a template on ${node}`}>
          <label>
            Template name <input value={name} onInput={(e) => setName(e.currentTarget.value)} required />
          </label>
          <label>
            Image reference <input value={image} onInput={(e) => setImage(e.currentTarget.value)} required />
          </label>
          <button type="submit">Build</button>
        </form>
      )}
      {building && (
        <p role="status">
          Building {building}: {progress?.state ?? "Pending"}
          {pct(progress)}
          {progress?.bytesTotal ? <progress max={progress.bytesTotal} value={progress.bytesDone} aria-label="Build progress" /> : null}
        </p>
      )}
    </section>
  );
}
