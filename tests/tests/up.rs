//! `kairon up` as a user runs it: private PostgreSQL, clean shutdown, restart, tokens, CRDs.

use std::process::Command;

use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

use kairon_e2e::{Kairon, kairon_bin};
use kairon_model::Machine;

fn machine(name: &str) -> Machine {
    serde_json::from_value(json!({
        "apiVersion": "kairon.zyvor.dev/v1", "kind": "Machine", "metadata": {"name": name},
        "spec": {"image": {"path": "/var/lib/fluxvm/images/kairon-hw.qcow2"}}
    }))
    .unwrap()
}

fn postgres_running_in(dir: &std::path::Path) -> bool {
    let out = Command::new("pgrep").args(["-af", "postgres"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).lines().any(|l| l.contains(&*dir.to_string_lossy()))
}

#[tokio::test]
async fn private_postgres_survives_a_restart_and_stops_with_kairon() {
    let mut k = Kairon::start_private().unwrap();
    let api: Api<Machine> = Api::namespaced(k.client().await.unwrap(), "agents");
    api.create(&PostParams::default(), &machine("persisted")).await.unwrap();
    let pg_dir = k.data_dir.path().join("postgres");
    let pg_dir = if pg_dir.exists() { pg_dir } else { std::path::PathBuf::from("/var/lib/kairon/postgres") };
    assert!(postgres_running_in(&pg_dir), "a private PostgreSQL runs for this instance");

    let status = k.stop().unwrap();
    assert!(status.success(), "Ctrl-C/SIGTERM stops cleanly: {status:?}\n{}", k.logs());
    assert!(k.logs().contains("Kairon stopped."), "{}", k.logs());

    assert!(!postgres_running_in(&pg_dir), "PostgreSQL stops with Kairon");

    // Tokens can be minted while Kairon is down.
    let out = Command::new(kairon_bin())
        .args(["token", "--data-dir"])
        .arg(k.data_dir.path())
        .args(["--sub", "ci", "--role", "viewer", "--namespaces", "agents"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    // Same data dir again: the Machine is still there, and the old kubeconfig's CA still holds.
    let k = k.restart().unwrap();
    let api: Api<Machine> = Api::namespaced(k.client().await.unwrap(), "agents");
    assert!(api.get_opt("persisted").await.unwrap().is_some());
}

#[tokio::test]
async fn roles_and_namespaces_hold_on_the_kubernetes_paths() {
    let k = Kairon::start().unwrap();
    let admin: Api<Machine> = Api::namespaced(k.client().await.unwrap(), "agents");
    admin.create(&PostParams::default(), &machine("a1")).await.unwrap();

    let op_token = k.token("olga", "operator", &["agents"]).unwrap();
    let op = k.client_with_token(Some(&op_token)).await.unwrap();
    let mine: Api<Machine> = Api::namespaced(op.clone(), "agents");
    mine.create(&PostParams::default(), &machine("a2")).await.unwrap();
    let theirs: Api<Machine> = Api::namespaced(op.clone(), "other");
    match theirs.create(&PostParams::default(), &machine("x")).await {
        Err(kube::Error::Api(s)) => assert_eq!((s.code, s.reason.as_str()), (403, "Forbidden")),
        other => panic!("an operator must not write another namespace: {other:?}"),
    }
    match theirs.list(&ListParams::default()).await {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 403),
        other => panic!("an operator must not read another namespace: {other:?}"),
    }
    // A list across all namespaces shows only theirs.
    admin.create(&PostParams::default(), &machine("a3")).await.unwrap();
    Api::<Machine>::namespaced(k.client().await.unwrap(), "hidden")
        .create(&PostParams::default(), &machine("h"))
        .await
        .unwrap();
    let all: Api<Machine> = Api::all(op);
    let names: Vec<_> = all
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|m| m.metadata.namespace)
        .collect();
    assert!(names.iter().all(|ns| ns == "agents"), "{names:?}");

    let viewer = k.client_with_token(Some(&k.token("vic", "viewer", &["agents"]).unwrap())).await.unwrap();
    let ro: Api<Machine> = Api::namespaced(viewer, "agents");
    assert_eq!(ro.list(&ListParams::default()).await.unwrap().items.len(), 3);
    match ro.delete("a1", &Default::default()).await {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 403),
        other => panic!("a viewer must not delete: {other:?}"),
    }

    for bad in ["not-a-jwt", &k.token("eve", "admin", &[]).unwrap().replace('.', "x")] {
        let c = k.client_with_token(Some(bad)).await.unwrap();
        match Api::<Machine>::namespaced(c, "agents").list(&ListParams::default()).await {
            Err(kube::Error::Api(s)) => assert_eq!(s.code, 401),
            other => panic!("a bad token must be refused: {other:?}"),
        }
    }
}

#[test]
fn crds_print_the_committed_manifests() {
    let out = Command::new(kairon_bin()).arg("crds").output().unwrap();
    assert!(out.status.success());
    let committed = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/crds.yaml")).unwrap();
    assert_eq!(String::from_utf8(out.stdout).unwrap(), committed);
}
