import { useEffect, useState } from "preact/hooks";
import { api, clearToken, getToken, setToken, type Whoami } from "./api";
import { refusal } from "./logic";
import { useLive } from "./store";
import { Machines } from "./views/machines";
import { Pools } from "./views/pools";
import { Claims } from "./views/claims";
import { Usage } from "./views/usage";
import { Nodes } from "./views/nodes";

const VIEWS = ["machines", "pools", "claims", "usage", "nodes"] as const;
type View = (typeof VIEWS)[number];

const viewFromPath = (): View => {
  const v = location.pathname.replace(/^\/ui\/?/, "").split("/")[0];
  return (VIEWS as readonly string[]).includes(v) ? (v as View) : "machines";
};

function SignIn({ onSignedIn, message }: { onSignedIn: (w: Whoami) => void; message?: string }) {
  const [token, setT] = useState("");
  const [error, setError] = useState(message ?? "");
  const submit = async (e: Event) => {
    e.preventDefault();
    setToken(token.trim());
    const { data, error: err, response } = await api.GET("/api/v1/whoami");
    if (data) {
      onSignedIn(data);
    } else {
      clearToken();
      setError(
        response.status === 401
          ? `This token was refused (${refusal(response.status, err)}). Check that it is whole and not expired; \`kairon token\` mints one.`
          : refusal(response.status, err),
      );
    }
  };
  return (
    <main class="signin">
      <h1>Kairon</h1>
      <form onSubmit={submit}>
        <label for="token">Bearer token</label>
        <textarea id="token" name="token" rows={4} value={token} onInput={(e) => setT(e.currentTarget.value)} required />
        <button type="submit">Sign in</button>
        {error && (
          <p role="alert" class="error" id="signin-error">
            {error}
          </p>
        )}
        <p class="hint">The token stays in this tab's session storage and is sent only as a bearer header.</p>
      </form>
    </main>
  );
}

export function App() {
  const [who, setWho] = useState<Whoami | undefined>();
  const [checked, setChecked] = useState(!getToken());
  const [view, setView] = useState<View>(viewFromPath());
  const live = useLive(who);

  useEffect(() => {
    if (!getToken()) return;
    void api.GET("/api/v1/whoami").then(({ data }) => {
      if (data) setWho(data);
      else clearToken();
      setChecked(true);
    });
  }, []);
  useEffect(() => {
    const onPop = () => setView(viewFromPath());
    addEventListener("popstate", onPop);
    return () => removeEventListener("popstate", onPop);
  }, []);

  if (!checked) return <p>Loading…</p>;
  if (!who) return <SignIn onSignedIn={setWho} />;

  const go = (v: View) => {
    history.pushState(null, "", `/ui/${v}`);
    setView(v);
  };
  return (
    <div class="app">
      <header>
        <strong>Kairon</strong>
        <nav aria-label="Views">
          {VIEWS.map((v) => (
            <button type="button" class={v === view ? "active" : ""} aria-current={v === view ? "page" : undefined} onClick={() => go(v)}>
              {v[0].toUpperCase() + v.slice(1)}
            </button>
          ))}
          <a href="/docs/" target="_blank" rel="noopener noreferrer">
            API docs
          </a>
        </nav>
        <span class="who" data-testid="whoami">
          {who.subject} · {who.role} · {who.namespaces.join(", ")}
        </span>
        <button
          type="button"
          onClick={() => {
            clearToken();
            setWho(undefined);
          }}
        >
          Sign out
        </button>
      </header>
      {live.error && (
        <p class="error" role="status">
          {live.error}
        </p>
      )}
      <main>
        {view === "machines" && <Machines who={who} live={live} />}
        {view === "pools" && <Pools who={who} live={live} />}
        {view === "claims" && <Claims who={who} live={live} />}
        {view === "usage" && <Usage live={live} />}
        {view === "nodes" && <Nodes who={who} live={live} />}
      </main>
    </div>
  );
}
