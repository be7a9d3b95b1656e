/**
 * Where `new Kairon()` finds its server, token, namespace and CA. Each setting comes from the
 * first of: the option, the environment (`KAIRON_URL`, `KAIRON_TOKEN`, `KAIRON_NAMESPACE`,
 * `KAIRON_CA_FILE`), the kubeconfig `kairon up` writes (`kubeconfig` option, else `$KUBECONFIG`,
 * else `~/.local/state/kairon/kubeconfig`: its current context's server, token, namespace and
 * CA). The kubeconfig's token and CA are taken only for its own server.
 */

import { existsSync, readFileSync, statSync } from "node:fs";
import { homedir } from "node:os";
import { delimiter, dirname, isAbsolute, join, resolve as resolvePath } from "node:path";
import { ConfigError, type Config, type ConfigOptions } from "./platform.js";

export { ConfigError, type Config, type ConfigOptions } from "./platform.js";

/** Where `kairon up` writes its kubeconfig by default. */
export const DEFAULT_KUBECONFIG = "~/.local/state/kairon/kubeconfig";

const expand = (p: string) => (p.startsWith("~/") ? join(process.env.HOME || homedir(), p.slice(2)) : p);
const isFile = (p: string) => existsSync(p) && statSync(p).isFile();

/** The kubeconfig to read: `explicit`, else the first existing file of `$KUBECONFIG`, else `kairon up`'s default if it exists. */
export function kubeconfigPath(explicit?: string): string | undefined {
  if (explicit) return expand(explicit);
  for (const p of (process.env.KUBECONFIG ?? "").split(delimiter)) if (p && isFile(expand(p))) return expand(p);
  const d = expand(DEFAULT_KUBECONFIG);
  return isFile(d) ? d : undefined;
}

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj => (v && typeof v === "object" && !Array.isArray(v) ? (v as Obj) : {});
const str = (v: unknown): string | undefined => (typeof v === "string" && v ? v : undefined);

/** The server, token, namespace and CA of a kubeconfig's context (`context`, else its current one). */
export function readKubeconfig(path: string, context?: string): { server?: string; token?: string; namespace?: string; caData?: string; caFile?: string } {
  let doc: Obj;
  try {
    doc = obj(parseYaml(readFileSync(path, "utf8")));
  } catch (e) {
    throw new ConfigError(`cannot read the kubeconfig ${path}: ${(e as Error).message}`, { cause: e });
  }
  const name = context ?? str(doc["current-context"]);
  const named = (section: string, key: string | undefined): Obj => {
    const entries = Array.isArray(doc[section]) ? (doc[section] as unknown[]) : [];
    const hit = entries.map(obj).find((e) => e.name === key);
    return obj(hit?.[section.slice(0, -1)]);
  };
  const ctx = named("contexts", name);
  if (!Object.keys(ctx).length && name) throw new ConfigError(`the kubeconfig ${path} has no context ${JSON.stringify(name)}`);
  const cluster = named("clusters", str(ctx.cluster));
  const user = named("users", str(ctx.user));
  const out: ReturnType<typeof readKubeconfig> = {};
  out.server = str(cluster.server);
  const caData = str(cluster["certificate-authority-data"]);
  const caFile = str(cluster["certificate-authority"]);
  if (caData) out.caData = Buffer.from(caData, "base64").toString("utf8");
  else if (caFile) out.caFile = isAbsolute(expand(caFile)) ? expand(caFile) : resolvePath(dirname(path), caFile);
  out.token = str(user.token) ?? (str(user.tokenFile) ? readFileSync(expand(str(user.tokenFile) as string), "utf8").trim() : undefined);
  out.namespace = str(ctx.namespace);
  return out;
}

/** The `Config` of `new Kairon(opts)` (see the module's comment for the order). */
export function resolveConfig(opts: ConfigOptions = {}): Config {
  const env = process.env;
  let source = opts.url ? "options" : env.KAIRON_URL ? "environment" : "";
  let url = opts.url || env.KAIRON_URL || undefined;
  let token = opts.token || env.KAIRON_TOKEN || undefined;
  let namespace = opts.namespace || env.KAIRON_NAMESPACE || undefined;
  let caFile = opts.caFile || env.KAIRON_CA_FILE || undefined;
  let caData: string | undefined;
  const need = !(url && token) || opts.kubeconfig !== undefined || opts.context !== undefined;
  const path = need ? kubeconfigPath(opts.kubeconfig) : undefined;
  if (path) {
    if (!isFile(path)) throw new ConfigError(`the kubeconfig ${path} does not exist`);
    const kc = readKubeconfig(path, opts.context);
    const server = (kc.server ?? "").replace(/\/+$/, "");
    if (!url || url.replace(/\/+$/, "") === server) {
      if (!url && server) {
        url = server;
        source = path;
      }
      token ??= kc.token;
      namespace ??= kc.namespace;
      if (!caFile) {
        caData = kc.caData;
        caFile = kc.caFile;
      }
    }
  }
  if (!url || !token) {
    const missing = [!url && "a server URL", !token && "a token"].filter(Boolean).join(" and ");
    const looked = path ? `the kubeconfig ${path}` : `a kubeconfig ($KUBECONFIG or ${DEFAULT_KUBECONFIG})`;
    throw new ConfigError(
      `new Kairon() found no ${missing}: pass url and token, set KAIRON_URL and KAIRON_TOKEN, or point KUBECONFIG at the kubeconfig \`kairon up\` printed (looked in ${looked})`,
    );
  }
  return { url: url.replace(/\/+$/, ""), token, namespace: namespace ?? "default", caFile, caData, source };
}

// A kubeconfig is YAML (or JSON); this reads the block-style subset kubeconfigs are written in
// (what `kairon up` and kubectl write): mappings, sequences of mappings, plain and quoted scalars,
// empty `{}` / `[]`, comments.

type Line = [number, string];

/** The document of a kubeconfig's YAML (or JSON) text. */
export function parseYaml(text: string): unknown {
  if (text.trimStart().startsWith("{")) return JSON.parse(text);
  const lines: Line[] = [];
  for (const raw of text.split(/\r?\n/)) {
    const line = stripComment(raw).trimEnd();
    const t = line.trim();
    if (!t || t === "---" || t === "...") continue;
    lines.push([line.length - line.trimStart().length, t]);
  }
  const [value, i] = block(lines, 0);
  if (i !== lines.length) throw new Error(`unexpected line ${JSON.stringify(lines[i]?.[1])}`);
  return value;
}

function stripComment(line: string): string {
  let quote = "";
  for (let i = 0; i < line.length; i++) {
    const ch = line[i] as string;
    if (quote) {
      if (ch === quote) quote = "";
    } else if (ch === "'" || ch === '"') quote = ch;
    else if (ch === "#" && (i === 0 || line[i - 1] === " " || line[i - 1] === "\t")) return line.slice(0, i);
  }
  return line;
}

function scalar(s: string): unknown {
  s = s.trim();
  if (s === "" || s === "~" || s === "null") return null;
  if (s === "{}") return {};
  if (s === "[]") return [];
  if (s.length >= 2 && s.startsWith('"') && s.endsWith('"')) return JSON.parse(s);
  if (s.length >= 2 && s.startsWith("'") && s.endsWith("'")) return s.slice(1, -1).replaceAll("''", "'");
  if (s === "true" || s === "false") return s === "true";
  return s;
}

function splitKey(s: string): [string, string] | undefined {
  if (s.startsWith("'") || s.startsWith('"')) {
    const end = s.indexOf(s[0] as string, 1);
    if (end > 0 && s[end + 1] === ":" && (s.length === end + 2 || s[end + 2] === " ")) return [String(scalar(s.slice(0, end + 1))), s.slice(end + 2).trim()];
    return undefined;
  }
  for (let i = 0; i < s.length; i++) {
    if (s[i] === ":" && (i + 1 === s.length || s[i + 1] === " ")) return [s.slice(0, i).trim(), s.slice(i + 1).trim()];
  }
  return undefined;
}

const isItem = (t: string) => t === "-" || t.startsWith("- ");

function block(lines: Line[], i: number): [unknown, number] {
  const line = lines[i];
  if (!line) return [null, i];
  const [ind, content] = line;
  if (isItem(content)) {
    const seq: unknown[] = [];
    while (i < lines.length && (lines[i] as Line)[0] === ind && isItem((lines[i] as Line)[1])) {
      const text = (lines[i] as Line)[1];
      const rest = text.slice(1).trimStart();
      let item: unknown;
      if (!rest) [item, i] = block(lines, i + 1);
      else if (splitKey(rest)) {
        // "- key: value" opens a mapping whose keys sit at the column after "- ".
        const col = ind + (text.length - rest.length);
        lines[i] = [col, rest];
        [item, i] = mapping(lines, i, col);
      } else [item, i] = [scalar(rest), i + 1];
      seq.push(item);
    }
    return [seq, i];
  }
  if (splitKey(content)) return mapping(lines, i, ind);
  return [scalar(content), i + 1];
}

function mapping(lines: Line[], i: number, ind: number): [Obj, number] {
  const out: Obj = {};
  while (i < lines.length && (lines[i] as Line)[0] === ind) {
    const kv = splitKey((lines[i] as Line)[1]);
    if (!kv) throw new Error(`expected \`key: value\`, got ${JSON.stringify((lines[i] as Line)[1])}`);
    const [key, rest] = kv;
    const next = lines[i + 1];
    if (rest && rest !== "|" && rest !== ">") {
      out[key] = scalar(rest);
      i += 1;
    } else if (next && (next[0] > ind || (next[0] === ind && isItem(next[1])))) {
      [out[key], i] = block(lines, i + 1);
    } else {
      out[key] = null;
      i += 1;
    }
  }
  const after = lines[i];
  if (after && after[0] > ind) throw new Error(`unexpected indentation at ${JSON.stringify(after[1])}`);
  return [out, i];
}
