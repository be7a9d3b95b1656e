import { useState } from "preact/hooks";
import { api, type Machine } from "../api";
import { refusal } from "../logic";
import { Msg } from "./common";

/** A preview link to a port of the Machine: a URL any browser opens with no header, on an origin
 * of its own (never this dashboard's), for an hour; revocable here. */
export function Preview({ m }: { m: Machine }) {
  const path = { namespace: m.metadata.namespace ?? "", name: m.metadata.name };
  const [port, setPort] = useState("8000");
  const [made, setMade] = useState<{ id: string; url: string; port: number }>();
  const [err, setErr] = useState<string>();
  const create = async () => {
    const { data, error, response } = await api.POST("/api/v1/machines/{namespace}/{name}/previews", {
      params: { path },
      body: { port: Number(port) },
    });
    if (data?.url) {
      setMade({ id: data.id, url: data.url, port: data.port });
      setErr(undefined);
    } else setErr(refusal(response.status, error));
  };
  const revoke = async () => {
    if (!made) return;
    const { error, response } = await api.DELETE("/api/v1/machines/{namespace}/{name}/previews/{id}", {
      params: { path: { ...path, id: made.id } },
    });
    if (response.ok) setMade(undefined);
    else setErr(refusal(response.status, error));
  };
  return (
    <div class="actions" data-testid="preview">
      <label>
        Port <input inputMode="numeric" size={6} value={port} onInput={(e) => setPort(e.currentTarget.value)} />
      </label>
      <button type="button" onClick={create}>
        preview link
      </button>
      {made && (
        <>
          <a href={made.url} target="_blank" rel="noopener noreferrer" data-testid="preview-link">
            {made.url}
          </a>
          <button type="button" onClick={revoke}>
            revoke
          </button>
        </>
      )}
      <Msg kind="error" text={err} />
    </div>
  );
}
