//! The Helm chart installed on a real Kubernetes API server (`scripts/k8s-testbed`) with the real
//! `helm`, as the README says: `helm install` creates the CRDs and every object of the chart,
//! `helm uninstall` removes all of them but the CRDs (Helm leaves those, and so the Machines),
//! and the README's command for the CRDs removes them. No kubelet runs here, so the pods are
//! never scheduled: what runs is checked by the tests that start Kairon's processes.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use kairon_e2e::testbed::Testbed;
use kairon_e2e::wait::wait_for_sync;

fn chart() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/helm/kairon").to_string_lossy().into_owned()
}

/// `(kind, namespace, name)` of each document of a manifest.
fn objects(manifest: &str) -> Vec<(String, Option<String>, String)> {
    serde_yaml::Deserializer::from_str(manifest)
        .map(|doc| serde_json::to_value(serde_yaml::Value::deserialize(doc).unwrap()).unwrap())
        .filter(|v: &Value| !v.is_null())
        .map(|o| {
            (
                o["kind"].as_str().unwrap().to_string(),
                o["metadata"]["namespace"].as_str().map(String::from),
                o["metadata"]["name"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn exists(tb: &Testbed, kind: &str, ns: Option<&str>, name: &str) -> bool {
    let mut args = vec!["get", kind, name, "--ignore-not-found", "-o", "name"];
    if let Some(ns) = ns {
        args.extend(["-n", ns]);
    }
    !tb.kubectl(&args).unwrap().trim().is_empty()
}

#[test]
fn helm_installs_the_chart_and_uninstalls_all_of_it_but_the_crds() {
    let tb = Testbed::shared();
    let ca = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, std::fs::read(tb.ca()).unwrap());
    let chart = chart();
    let ca_bundle = format!("webhook.caBundle={ca}");
    // The README's install command.
    let out = tb
        .helm(&[
            "install",
            "kairon",
            &chart,
            "--set",
            "image.repository=registry.example/kairon",
            "--set",
            "image.tag=test",
            "--set",
            &ca_bundle,
        ])
        .unwrap();
    assert!(out.contains("STATUS: deployed"), "{out}");

    let manifest = tb.helm(&["get", "manifest", "kairon"]).unwrap();
    let installed = objects(&manifest);
    for kind in ["Namespace", "Deployment", "DaemonSet", "ClusterRole", "ValidatingWebhookConfiguration"] {
        assert!(installed.iter().any(|(k, _, _)| k == kind), "the chart installs a {kind}: {installed:?}");
    }
    for (kind, ns, name) in &installed {
        assert!(exists(tb, kind, ns.as_deref(), name), "{kind} {name} was not created");
    }
    let crds: Vec<String> = kairon_model::crds::all().into_iter().map(|c| c.metadata.name.unwrap()).collect::<Vec<_>>();
    for crd in &crds {
        assert!(exists(tb, "crd", None, crd), "helm install created the CRD {crd} from the chart's crds/");
    }
    // What the API server stored is what the chart's Deployment says, the node agent's
    // DaemonSet included (read back through the real server's defaulting and validation).
    let api = tb.kubectl(&["get", "deployment", "kairon-api", "-n", "kairon-system", "-o", "json"]).unwrap();
    let api: Value = serde_json::from_str(&api).unwrap();
    assert_eq!(api["spec"]["template"]["spec"]["serviceAccountName"], "kairon-api");
    assert_eq!(api["spec"]["template"]["spec"]["containers"][0]["image"], "registry.example/kairon:test");

    let out = tb.helm(&["uninstall", "kairon", "--wait", "--timeout", "120s"]).unwrap();
    assert!(out.contains("uninstalled"), "{out}");
    // The namespace's contents go with it (the namespace controller empties it first).
    wait_for_sync("every object of the chart gone", Duration::from_secs(120), Duration::from_millis(500), || {
        match installed.iter().find(|(kind, ns, name)| exists(tb, kind, ns.as_deref(), name)) {
            Some(left) => Err(left.clone()),
            None => Ok(()),
        }
    });
    for crd in &crds {
        assert!(exists(tb, "crd", None, crd), "helm uninstall leaves the CRD {crd} (and so the Machines)");
    }
    // The README's removal of the CRDs.
    tb.kubectl(&["delete", "-f", &format!("{chart}/crds/crds.yaml"), "--wait"]).unwrap();
    for crd in &crds {
        assert!(!exists(tb, "crd", None, crd), "{crd} removed");
    }
}
