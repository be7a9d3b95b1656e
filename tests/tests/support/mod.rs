//! What the SDK test binaries share (`sdk.rs`, `previews.rs`): the SDK tools' venv, the built
//! TypeScript SDK, running a script against `kairon up`, and checking it left nothing behind.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use kairon_e2e::{Kairon, eventually};
use kairon_model::{Machine, MachineClaim};
use kube::api::{Api, ListParams};

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The venv `sdk-gen/setup` made (pytest, mypy, the SDK installed editable).
pub fn venv_bin(tool: &str) -> PathBuf {
    let tools = std::env::var_os("KAIRON_SDK_TOOLS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/kairon-sdk-tools"));
    let bin = tools.join("venv/bin").join(tool);
    assert!(bin.exists(), "{} is missing: run sdk-gen/setup (scripts/test does)", bin.display());
    bin
}

pub fn with_env(cmd: &mut Command, k: &Kairon) {
    let ca = k.data_dir.path().join("tls/ca.crt");
    cmd.env("KAIRON_URL", &k.url)
        .env("KAIRON_TOKEN", &k.admin_token)
        .env("KAIRON_CA_FILE", &ca)
        .env("NODE_EXTRA_CA_CERTS", &ca)
        .env_remove("KAIRON_IMAGE")
        .env_remove("KAIRON_TEMPLATE");
}

pub fn run(what: &str, cmd: &mut Command) -> String {
    let out: Output = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what} failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Nothing of the example is left: no Machine or claim in its namespace, no runtime instance.
pub async fn assert_clean(k: &Kairon, namespace: &str) {
    let client = k.client().await.expect("client");
    let machines: Api<Machine> = Api::namespaced(client.clone(), namespace);
    let claims: Api<MachineClaim> = Api::namespaced(client, namespace);
    let left: Vec<String> = machines
        .list(&ListParams::default())
        .await
        .expect("list machines")
        .items
        .into_iter()
        .filter_map(|m| m.metadata.name)
        .collect();
    assert!(left.is_empty(), "Machines left behind: {left:?}");
    assert!(claims.list(&ListParams::default()).await.expect("list claims").items.is_empty(), "claims left behind");
    let runtime = k.runtime().expect("runtime");
    // The Machine is gone once the node agent deleted its instance; allow for a slow host.
    let instances = eventually("the runtime to hold no instance", Duration::from_secs(120), || async {
        let all = runtime.list().await.ok()?;
        all.is_empty().then_some(all)
    })
    .await;
    assert!(instances.is_empty());
}

/// `sdk/typescript` after `npm run build`: the ESM build (dist/src, with the tests and examples)
/// and the CommonJS one (dist/cjs), made once for the tests that use them rather than by each
/// (two tsc runs writing dist/ at once would race).
pub fn built_typescript() -> PathBuf {
    static BUILD: std::sync::Once = std::sync::Once::new();
    let ts = repo().join("sdk/typescript");
    BUILD.call_once(|| {
        run("npm run build", Command::new("npm").args(["run", "--silent", "build"]).current_dir(&ts));
    });
    ts
}
