//! Kairon installed on a real Kubernetes control plane (`scripts/k8s-testbed`) as a user would
//! (`kairon_e2e::testbed::Install`: the kustomize base, then the api, two controllers and two
//! nodes as processes with their own ServiceAccounts' bound tokens), and its stories run there.

use std::time::Duration;

use serde_json::{Value, json};

use kairon_e2e::testbed::Install;
use kairon_e2e::wait::wait_for_sync;

#[tokio::test(flavor = "multi_thread")]
async fn a_machine_runs_on_a_node_of_a_real_cluster() {
    let install = Install::start(&["a", "b"]).unwrap();
    let tb = install.testbed;
    // Each node registered itself with its own identity.
    wait_for_sync("both nodes registered", Duration::from_secs(60), Duration::from_millis(500), || {
        let names = tb.kubectl(&["get", "kaironnodes", "-o", "name"]).map_err(|e| e.to_string())?;
        if names.contains("kaironnode.kairon.zyvor.dev/a") && names.contains("kaironnode.kairon.zyvor.dev/b") {
            Ok(())
        } else {
            Err(names)
        }
    });

    tb.kubectl(&["create", "namespace", "agents"]).unwrap();
    tb.apply(
        "apiVersion: kairon.zyvor.dev/v1\nkind: Machine\nmetadata: {name: first, namespace: agents}\n\
         spec:\n  sandbox: {templateName: busybox}\n  guestAgent: {console: true}\n",
    )
    .unwrap();
    let rest = install.rest();
    let running = rest.wait_phase("agents", "first", "Running", 120).await;
    assert_eq!(
        running.status,
        200,
        "{running:?}\nrefused by RBAC: {:#?}\n{}",
        tb.forbidden(),
        tb.kubectl(&["get", "machine", "-A", "-o", "yaml"]).unwrap()
    );
    let machine: Value =
        serde_json::from_str(&tb.kubectl(&["get", "machine", "first", "-n", "agents", "-o", "json"]).unwrap()).unwrap();
    let node = machine["status"]["nodeName"].as_str().unwrap();
    assert!(node == "a" || node == "b", "{machine}");
    let out =
        rest.post("/api/v1/machines/agents/first/exec", json!({"command": ["echo", "on a real cluster"]})).await.ok();
    assert_eq!(out["stdout"], "on a real cluster\n", "{out}");
}
