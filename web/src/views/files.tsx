import { useEffect, useState } from "preact/hooks";
import { api, authHeaders, type FileEntry, type Machine, seg } from "../api";
import { refusal } from "../logic";
import { download, Msg } from "./common";

/** The guest's files: list a directory, download, upload (with progress), delete. */
export function Files({ m }: { m: Machine }) {
  const path = { namespace: m.metadata.namespace ?? "", name: m.metadata.name };
  const [dir, setDir] = useState("/tmp");
  const [entries, setEntries] = useState<FileEntry[]>([]);
  const [err, setErr] = useState<string>();
  const [ok, setOk] = useState<string>();
  const [progress, setProgress] = useState<number | undefined>();
  const [gen, setGen] = useState(0);
  const join = (name: string) => `${dir.replace(/\/$/, "")}/${name}`;

  useEffect(() => {
    void api.GET("/api/v1/machines/{namespace}/{name}/files/list", { params: { path, query: { path: dir } } }).then(
      ({ data, error, response }) => {
        if (data) {
          setEntries(data);
          setErr(undefined);
        } else setErr(refusal(response.status, error));
      },
    );
  }, [dir, gen]);

  const get = async (name: string) => {
    const url = `/api/v1/machines/${seg(path.namespace)}/${seg(path.name)}/files?path=${seg(join(name))}`;
    const resp = await fetch(url, { headers: authHeaders() });
    if (!resp.ok) return setErr(refusal(resp.status, await resp.json().catch(() => ({}))));
    download(name, await resp.blob());
    setOk(`downloaded ${name}`);
  };
  const del = async (name: string) => {
    const { error, response } = await api.DELETE("/api/v1/machines/{namespace}/{name}/files", {
      params: { path, query: { path: join(name) } },
    });
    if (error) setErr(refusal(response.status, error));
    else setOk(`deleted ${name}`);
    setGen((g) => g + 1);
  };
  const upload = (file: File) => {
    const xhr = new XMLHttpRequest();
    xhr.open("PUT", `/api/v1/machines/${seg(path.namespace)}/${seg(path.name)}/files?path=${seg(join(file.name))}`);
    for (const [k, v] of Object.entries(authHeaders())) xhr.setRequestHeader(k, v);
    xhr.setRequestHeader("Content-Type", "application/octet-stream");
    xhr.upload.onprogress = (e) => e.lengthComputable && setProgress(Math.round((100 * e.loaded) / e.total));
    xhr.onload = () => {
      setProgress(undefined);
      if (xhr.status >= 300) {
        let body: unknown = {};
        try {
          body = JSON.parse(xhr.responseText);
        } catch {
          /* not JSON */
        }
        setErr(refusal(xhr.status, body));
      } else setOk(`uploaded ${file.name}`);
      setGen((g) => g + 1);
    };
    xhr.send(file);
  };

  return (
    <div class="files">
      <label>
        Directory <input value={dir} onChange={(e) => setDir(e.currentTarget.value)} data-testid="files-dir" />
      </label>
      <label>
        Upload{" "}
        <input type="file" data-testid="files-upload" onChange={(e) => e.currentTarget.files?.[0] && upload(e.currentTarget.files[0])} />
      </label>
      {progress !== undefined && <progress max={100} value={progress} aria-label="Upload progress" />}
      <Msg kind="ok" text={ok} />
      <Msg kind="error" text={err} />
      <table>
        <caption>{dir}</caption>
        <thead>
          <tr>
            <th scope="col">Name</th>
            <th scope="col">Size</th>
            <th scope="col">Actions</th>
          </tr>
        </thead>
        <tbody>
          {entries.map((f) => (
            <tr data-file={f.name}>
              <td>
                {f.isDir ? (
                  <button type="button" class="link" onClick={() => setDir(join(f.name))}>
                    {f.name}/
                  </button>
                ) : (
                  f.name
                )}
              </td>
              <td>{f.size}</td>
              <td>
                {!f.isDir && (
                  <button type="button" onClick={() => get(f.name)}>
                    download
                  </button>
                )}
                <button type="button" onClick={() => del(f.name)}>
                  delete
                </button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
