//! Where kaironctl connects, found as the SDKs find it: each setting from the first of the flags
//! (`--server`, `--token`, `--ca-file`, `-n`), the environment (`KAIRON_URL`, `KAIRON_TOKEN`,
//! `KAIRON_CA_FILE`, `KAIRON_NAMESPACE`), and a kubeconfig: `--kubeconfig`, else `$KUBECONFIG`,
//! else the one `kairon up` writes (`~/.local/state/kairon/kubeconfig`), and `~/.kube/config`
//! only when there is none of those (a kind or minikube cluster's is not Kairon's). The
//! kubeconfig's token and CA are taken only for its own server. `kaironctl config view` says
//! what was used and from where. The REST API is served by the same server.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use base64::Engine;
use serde::Deserialize;

#[derive(Deserialize, Default)]
struct Kubeconfig {
    #[serde(default)]
    clusters: Vec<Named<Cluster>>,
    #[serde(default)]
    users: Vec<Named<User>>,
    #[serde(default)]
    contexts: Vec<Named<KubeContext>>,
    #[serde(rename = "current-context", default)]
    current_context: String,
}

#[derive(Deserialize)]
struct Named<T> {
    name: String,
    #[serde(alias = "cluster", alias = "user", alias = "context")]
    item: T,
}

#[derive(Deserialize, Default)]
struct Cluster {
    server: String,
    #[serde(rename = "certificate-authority-data")]
    ca_data: Option<String>,
    #[serde(rename = "certificate-authority")]
    ca_file: Option<PathBuf>,
}

#[derive(Deserialize, Default)]
struct User {
    token: Option<String>,
}

#[derive(Deserialize, Default)]
struct KubeContext {
    cluster: String,
    user: String,
    namespace: Option<String>,
}

/// The connection kaironctl uses, and where each part came from.
pub struct Target {
    pub server: String,
    pub token: Option<String>,
    pub namespace: String,
    pub ca_pem: Option<Vec<u8>>,
    /// Where the server, token, CA and namespace came from: `flag`, `environment`, a
    /// kubeconfig's path, or `default`.
    pub sources: [(&'static str, String); 4],
}

/// What the flags say (each `None` when not given).
#[derive(Default)]
pub struct Flags {
    pub kubeconfig: Option<PathBuf>,
    pub server: Option<String>,
    pub token: Option<String>,
    pub ca_file: Option<PathBuf>,
    pub namespace: Option<String>,
}

/// The kubeconfig to read: the flag's, else `$KUBECONFIG`'s first, else Kairon's own, else
/// `~/.kube/config`.
fn kubeconfig_path(flag: Option<PathBuf>) -> Option<PathBuf> {
    if let Some(p) = flag {
        return Some(p);
    }
    if let Some(k) = std::env::var_os("KUBECONFIG").filter(|v| !v.is_empty()) {
        return std::env::split_paths(&k).next();
    }
    let home = PathBuf::from(std::env::var_os("HOME")?);
    [home.join(".local/state/kairon/kubeconfig"), home.join(".kube/config")].into_iter().find(|p| p.exists())
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// The first of `flag` and `environment` that is set, with where it came from.
fn first<T>(flag: Option<T>, environment: Option<T>) -> Option<(T, String)> {
    flag.map(|v| (v, "flag".to_string())).or_else(|| environment.map(|v| (v, "environment".to_string())))
}

pub fn load(flags: Flags) -> Result<Target> {
    let explicit = flags.kubeconfig.is_some();
    let path = kubeconfig_path(flags.kubeconfig);
    let kc = match &path {
        Some(path) if path.exists() || explicit => {
            let text =
                std::fs::read_to_string(path).with_context(|| format!("reading kubeconfig {}", path.display()))?;
            serde_yaml::from_str::<Kubeconfig>(&text)
                .with_context(|| format!("parsing kubeconfig {}", path.display()))?
        }
        _ => Kubeconfig::default(),
    };
    let from_kubeconfig = path.map(|p| p.display().to_string()).unwrap_or_default();
    let ctx = kc.contexts.iter().find(|c| c.name == kc.current_context).map(|c| &c.item);
    let cluster = ctx.and_then(|c| kc.clusters.iter().find(|k| k.name == c.cluster)).map(|c| &c.item);
    let user = ctx.and_then(|c| kc.users.iter().find(|u| u.name == c.user)).map(|u| &u.item);
    let kc_server = cluster.map(|c| c.server.trim_end_matches('/').to_string());
    let (server, server_from) = match first(flags.server, env("KAIRON_URL")) {
        Some(s) => s,
        None => match &kc_server {
            Some(s) => (s.clone(), from_kubeconfig.clone()),
            None => bail!(
                "no server: pass --server URL, set KAIRON_URL, or point --kubeconfig at the one `kairon up` wrote"
            ),
        },
    };
    let server = server.trim_end_matches('/').to_string();
    // The kubeconfig's token and CA are its own server's, never another's.
    let same_server = kc_server.as_deref() == Some(server.as_str());
    let (token, token_from) = match first(flags.token, env("KAIRON_TOKEN")) {
        Some((t, from)) => (Some(t), from),
        None => match user.and_then(|u| u.token.clone()).filter(|_| same_server) {
            Some(t) => (Some(t), from_kubeconfig.clone()),
            None => (None, "none".to_string()),
        },
    };
    let (ca_pem, ca_from) = match first(flags.ca_file, env("KAIRON_CA_FILE").map(PathBuf::from)) {
        Some((f, from)) => {
            (Some(std::fs::read(&f).with_context(|| format!("reading the CA file {}", f.display()))?), from)
        }
        None => match cluster.filter(|_| same_server) {
            Some(Cluster { ca_data: Some(d), .. }) => (
                Some(
                    base64::engine::general_purpose::STANDARD
                        .decode(d.trim())
                        .context("certificate-authority-data is not base64")?,
                ),
                from_kubeconfig.clone(),
            ),
            Some(Cluster { ca_file: Some(f), .. }) => {
                (Some(std::fs::read(f).with_context(|| format!("reading {}", f.display()))?), from_kubeconfig.clone())
            }
            _ => (None, "the system's roots".to_string()),
        },
    };
    let (namespace, namespace_from) = match first(flags.namespace, env("KAIRON_NAMESPACE")) {
        Some(n) => n,
        None => match ctx.and_then(|c| c.namespace.clone()).filter(|_| same_server) {
            Some(n) => (n, from_kubeconfig),
            None => ("default".to_string(), "default".to_string()),
        },
    };
    Ok(Target {
        server,
        token,
        namespace,
        ca_pem,
        sources: [("server", server_from), ("token", token_from), ("ca", ca_from), ("namespace", namespace_from)],
    })
}
