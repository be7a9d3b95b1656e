"""Where `Kairon()` finds its server, token, namespace and CA.

Each setting comes from the first of: the argument, the environment (`KAIRON_URL`,
`KAIRON_TOKEN`, `KAIRON_NAMESPACE`, `KAIRON_CA_FILE`), the kubeconfig `kairon up` writes
(`kubeconfig=` argument, else `$KUBECONFIG`, else `~/.local/state/kairon/kubeconfig`: its
current context's server, token, namespace and CA). The kubeconfig's token and CA are taken only
for its own server: a URL from an argument or the environment that names another server takes
nothing from it.
"""

from __future__ import annotations

import base64
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import KaironError

#: Where `kairon up` writes its kubeconfig by default.
DEFAULT_KUBECONFIG = "~/.local/state/kairon/kubeconfig"


class ConfigError(KaironError):
    """No server or token could be found, or the kubeconfig could not be read."""


@dataclass(frozen=True)
class Config:
    """What a `Kairon` connects with, and where each part came from (`source`)."""

    url: str
    token: str
    namespace: str
    ca_file: str | None = None
    #: The CA as PEM text (a kubeconfig's `certificate-authority-data`).
    ca_data: str | None = None
    #: "arguments", "environment" or the kubeconfig's path, for the URL.
    source: str = "arguments"


def kubeconfig_path(explicit: str | os.PathLike[str] | None = None) -> Path | None:
    """The kubeconfig to read: `explicit`, else the first existing file of `$KUBECONFIG`, else
    `kairon up`'s default if it exists."""
    if explicit:
        return Path(explicit).expanduser()
    for p in (os.environ.get("KUBECONFIG") or "").split(os.pathsep):
        if p and Path(p).expanduser().is_file():
            return Path(p).expanduser()
    default = Path(DEFAULT_KUBECONFIG).expanduser()
    return default if default.is_file() else None


def read_kubeconfig(path: str | os.PathLike[str], context: str | None = None) -> dict[str, str]:
    """The `server`, `token`, `namespace`, `ca_data` / `ca_file` of a kubeconfig's context
    (`context`, else its current context); the keys it does not set are missing."""
    p = Path(path)
    try:
        doc = parse_yaml(p.read_text())
    except (OSError, ValueError) as e:
        raise ConfigError(f"cannot read the kubeconfig {p}: {e}") from e
    if not isinstance(doc, dict):
        raise ConfigError(f"the kubeconfig {p} is not a mapping")
    name = context or doc.get("current-context")

    def named(section: str, key: str | None) -> dict[str, Any]:
        for entry in doc.get(section) or []:
            if isinstance(entry, dict) and entry.get("name") == key:
                inner = entry.get(section[:-1]) or {}
                return inner if isinstance(inner, dict) else {}
        return {}

    ctx = named("contexts", name)
    if not ctx and name:
        raise ConfigError(f"the kubeconfig {p} has no context {name!r}")
    cluster = named("clusters", ctx.get("cluster"))
    user = named("users", ctx.get("user"))
    out: dict[str, str] = {}
    if cluster.get("server"):
        out["server"] = str(cluster["server"])
    if cluster.get("certificate-authority-data"):
        out["ca_data"] = base64.b64decode(str(cluster["certificate-authority-data"])).decode()
    elif cluster.get("certificate-authority"):
        ca = Path(str(cluster["certificate-authority"])).expanduser()
        out["ca_file"] = str(ca if ca.is_absolute() else p.parent / ca)
    if user.get("token"):
        out["token"] = str(user["token"])
    elif user.get("tokenFile"):
        out["token"] = Path(str(user["tokenFile"])).expanduser().read_text().strip()
    if ctx.get("namespace"):
        out["namespace"] = str(ctx["namespace"])
    return out


def resolve(
    url: str | None = None,
    token: str | None = None,
    namespace: str | None = None,
    *,
    ca_file: str | None = None,
    kubeconfig: str | os.PathLike[str] | None = None,
    context: str | None = None,
) -> Config:
    """The `Config` of `Kairon(...)` (see the module's docstring for the order)."""
    env = os.environ
    source = "arguments" if url else "environment" if env.get("KAIRON_URL") else ""
    url = url or env.get("KAIRON_URL") or None
    token = token or env.get("KAIRON_TOKEN") or None
    namespace = namespace or env.get("KAIRON_NAMESPACE") or None
    ca_file = ca_file or env.get("KAIRON_CA_FILE") or None
    ca_data: str | None = None
    need_kubeconfig = not (url and token) or kubeconfig is not None or context is not None
    path = kubeconfig_path(kubeconfig) if need_kubeconfig else None
    if path is not None:
        kc = read_kubeconfig(path, context)
        server = kc.get("server", "").rstrip("/")
        if url is None or url.rstrip("/") == server:
            if url is None and server:
                url, source = server, str(path)
            token = token or kc.get("token")
            namespace = namespace or kc.get("namespace")
            if ca_file is None:
                ca_data = kc.get("ca_data")
                ca_file = kc.get("ca_file")
    if not url or not token:
        missing = " and ".join(n for n, v in (("a server URL", url), ("a token", token)) if not v)
        looked = f"the kubeconfig {path}" if path else f"a kubeconfig ($KUBECONFIG or {DEFAULT_KUBECONFIG})"
        raise ConfigError(
            f"Kairon() found no {missing}: pass url= and token=, set KAIRON_URL and KAIRON_TOKEN, "
            f"or point KUBECONFIG at the kubeconfig `kairon up` printed (looked in {looked})"
        )
    return Config(url=url.rstrip("/"), token=token, namespace=namespace or "default", ca_file=ca_file,
                  ca_data=ca_data, source=source)


# A kubeconfig is YAML (or JSON). PyYAML is used when it is installed; otherwise this reads the
# block-style subset kubeconfigs are written in (what `kairon up` and kubectl write): mappings,
# sequences of mappings, plain and quoted scalars, empty `{}` / `[]`, comments.


def parse_yaml(text: str) -> Any:
    """The document of a kubeconfig's YAML (or JSON) text."""
    stripped = text.lstrip()
    if stripped.startswith("{"):
        return json.loads(text)
    try:
        import yaml  # type: ignore[import-untyped, unused-ignore]
    except ImportError:
        pass
    else:
        return yaml.safe_load(text)
    lines: list[tuple[int, str]] = []
    for raw in text.splitlines():
        line = _strip_comment(raw).rstrip()
        if not line.strip() or line.strip() in ("---", "..."):
            continue
        lines.append((len(line) - len(line.lstrip(" ")), line.strip()))
    value, i = _block(lines, 0, 0)
    if i != len(lines):
        raise ValueError(f"unexpected line {lines[i][1]!r}")
    return value


def _strip_comment(line: str) -> str:
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i]
    return line


def _scalar(s: str) -> Any:
    s = s.strip()
    if s == "" or s in ("~", "null"):
        return None
    if s == "{}":
        return {}
    if s == "[]":
        return []
    if s.startswith('"') and s.endswith('"') and len(s) >= 2:
        return json.loads(s)
    if s.startswith("'") and s.endswith("'") and len(s) >= 2:
        return s[1:-1].replace("''", "'")
    if s in ("true", "false"):
        return s == "true"
    return s


def _split_key(s: str) -> tuple[str, str] | None:
    if s.startswith(("'", '"')):
        end = s.find(s[0], 1)
        if end > 0 and s[end + 1:end + 2] == ":" and (len(s) == end + 2 or s[end + 2] == " "):
            return str(_scalar(s[:end + 1])), s[end + 2:].strip()
        return None
    for i, ch in enumerate(s):
        if ch == ":" and (i + 1 == len(s) or s[i + 1] == " "):
            return s[:i].strip(), s[i + 1:].strip()
    return None


def _block(lines: list[tuple[int, str]], i: int, indent: int) -> tuple[Any, int]:
    if i >= len(lines):
        return None, i
    ind, content = lines[i]
    if content.startswith("- ") or content == "-":
        seq: list[Any] = []
        while i < len(lines) and lines[i][0] == ind and (lines[i][1].startswith("- ") or lines[i][1] == "-"):
            rest = lines[i][1][1:].lstrip()
            if not rest:
                item, i = _block(lines, i + 1, ind + 1)
            elif _split_key(rest) is not None:
                # "- key: value" opens a mapping whose keys sit at the column after "- ".
                col = ind + (len(lines[i][1]) - len(rest))
                lines[i] = (col, rest)
                item, i = _mapping(lines, i, col)
            else:
                item, i = _scalar(rest), i + 1
            seq.append(item)
        return seq, i
    if _split_key(content) is not None:
        return _mapping(lines, i, ind)
    return _scalar(content), i + 1


def _mapping(lines: list[tuple[int, str]], i: int, ind: int) -> tuple[dict[str, Any], int]:
    out: dict[str, Any] = {}
    while i < len(lines) and lines[i][0] == ind:
        kv = _split_key(lines[i][1])
        if kv is None:
            raise ValueError(f"expected `key: value`, got {lines[i][1]!r}")
        key, rest = kv
        if rest and rest not in ("|", ">"):
            out[key] = _scalar(rest)
            i += 1
        elif i + 1 < len(lines) and (lines[i + 1][0] > ind or
                                     (lines[i + 1][0] == ind and lines[i + 1][1].startswith("-"))):
            out[key], i = _block(lines, i + 1, lines[i + 1][0])
        else:
            out[key] = None
            i += 1
    if i < len(lines) and lines[i][0] > ind:
        raise ValueError(f"unexpected indentation at {lines[i][1]!r}")
    return out, i
