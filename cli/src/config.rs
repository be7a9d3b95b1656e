//! Where kaironctl connects, found like kubectl: `--kubeconfig`, else `KUBECONFIG`, else
//! `~/.kube/config`, else the one `kairon up` writes (`~/.local/state/kairon/kubeconfig`); its
//! current context gives the server, the CA, the token and the namespace. `--server`,
//! `--token` and `-n` override them. The REST API is served by the same server.

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

/// The connection kaironctl uses.
pub struct Target {
    pub server: String,
    pub token: Option<String>,
    pub namespace: String,
    pub ca_pem: Option<Vec<u8>>,
}

fn kubeconfig_path(flag: Option<PathBuf>) -> Option<PathBuf> {
    if let Some(p) = flag {
        return Some(p);
    }
    if let Some(k) = std::env::var_os("KUBECONFIG").filter(|v| !v.is_empty()) {
        return std::env::split_paths(&k).next();
    }
    let home = PathBuf::from(std::env::var_os("HOME")?);
    [home.join(".kube/config"), home.join(".local/state/kairon/kubeconfig")].into_iter().find(|p| p.exists())
}

pub fn load(
    kubeconfig: Option<PathBuf>,
    server: Option<String>,
    token: Option<String>,
    namespace: Option<String>,
) -> Result<Target> {
    let explicit = kubeconfig.is_some();
    let kc = match kubeconfig_path(kubeconfig) {
        Some(path) if path.exists() || explicit => {
            let text =
                std::fs::read_to_string(&path).with_context(|| format!("reading kubeconfig {}", path.display()))?;
            serde_yaml::from_str::<Kubeconfig>(&text)
                .with_context(|| format!("parsing kubeconfig {}", path.display()))?
        }
        _ => Kubeconfig::default(),
    };
    let ctx = kc.contexts.iter().find(|c| c.name == kc.current_context).map(|c| &c.item);
    let cluster = ctx.and_then(|c| kc.clusters.iter().find(|k| k.name == c.cluster)).map(|c| &c.item);
    let user = ctx.and_then(|c| kc.users.iter().find(|u| u.name == c.user)).map(|u| &u.item);
    let Some(server) = server.or_else(|| cluster.map(|c| c.server.clone())) else {
        bail!("no server: pass --server URL or --kubeconfig FILE (kairon up prints the kubeconfig it wrote)");
    };
    let ca_pem = match cluster {
        Some(Cluster { ca_data: Some(d), .. }) => Some(
            base64::engine::general_purpose::STANDARD
                .decode(d.trim())
                .context("certificate-authority-data is not base64")?,
        ),
        Some(Cluster { ca_file: Some(f), .. }) => {
            Some(std::fs::read(f).with_context(|| format!("reading {}", f.display()))?)
        }
        _ => None,
    };
    Ok(Target {
        server: server.trim_end_matches('/').to_string(),
        token: token.or_else(|| user.and_then(|u| u.token.clone())),
        namespace: namespace.or_else(|| ctx.and_then(|c| c.namespace.clone())).unwrap_or_else(|| "default".into()),
        ca_pem,
    })
}
