//! Machines on the guest network under `kairon up` and under a node agent of its own, with the
//! node side in namespaces of `kairon_runtime::net::testbed` (only they and loopback see
//! traffic): `status.guestIP`, a server on the guest IP through sandbox-http, refusals as
//! `EgressDenied` Events and `kairon_egress_denied_total`, and the address kept across
//! pause/resume and a kill -9 of the node agent.

use std::time::Duration;

use kube::api::{Api, PostParams};
use serde_json::{Value, json};

use kairon_e2e::{Kairon, MINUTE, SeparateNode, eventually, wait_phase};
use kairon_model::{Machine, MachinePhase};
use kairon_runtime::net::testbed::{ALLOWED_IP, RESOLVER_IP, Testbed};

/// The node config: `allowed.test` only, the node side in the bed's node namespace.
fn node_config(bed: &Testbed, dir: &std::path::Path) -> String {
    let path = dir.join("node.toml");
    std::fs::write(
        &path,
        format!(
            "[sandbox]\negress_allow_domains = [\"allowed.test\"]\n\n[network]\nnetns = \"{}\"\ndns_upstream = \"{RESOLVER_IP}\"\n",
            bed.node.0
        ),
    )
    .unwrap();
    path.to_string_lossy().into_owned()
}

fn attached(name: &str) -> Value {
    json!({
        "metadata": {"name": name, "labels": {"kairon.zyvor.dev/sandbox": "true"}},
        "spec": {
            "sandbox": {"templateName": "busybox"}, "guestAgent": {"console": true}, "network": {"mode": "Tap"}
        }
    })
}

fn guest_ip(m: &Value) -> String {
    m["status"]["guestIP"].as_str().unwrap_or_else(|| panic!("status.guestIP is set: {m}")).to_string()
}

fn sh(cmd: &str) -> Value {
    json!({"command": ["sh", "-c", cmd]})
}

#[tokio::test(flavor = "multi_thread")]
async fn an_attached_machine_gets_a_guest_ip_and_its_refusals_show_as_events_and_metrics() {
    let bed = Testbed::start();
    let dir = tempfile::tempdir().unwrap();
    let config = node_config(&bed, dir.path());
    let k = Kairon::start_with(&["--node-config", &config]).unwrap();
    let rest = k.rest().unwrap();
    rest.post("/api/v1/machines/default", attached("web")).await.ok();
    let m = rest.running("default", "web").await;
    let ip = guest_ip(&m);
    let base = "/api/v1/machines/default/web";

    let got = rest.post(&format!("{base}/exec"), sh("wget -q -O - http://allowed.test/")).await.ok();
    assert_eq!(got["stdout"], format!("hello from {ALLOWED_IP}\n"), "{got}");
    let refused = rest.post(&format!("{base}/exec"), sh("wget -q -O - http://refused.test/")).await.ok();
    assert_ne!(refused["exitCode"], 0, "{refused}");

    // Why it failed is on the Machine, once, and counted.
    let events = eventually("an EgressDenied event", Duration::from_secs(30), || async {
        let out = k.kubectl_ok(&["get", "events", "--field-selector", "involvedObject.name=web", "-o", "json"]);
        let v: Value = serde_json::from_str(&out).unwrap();
        let items = v["items"].as_array().cloned().unwrap_or_default();
        items.iter().any(|e| e["reason"] == "EgressDenied").then_some(items)
    })
    .await;
    let denied: Vec<&Value> = events.iter().filter(|e| e["reason"] == "EgressDenied").collect();
    assert_eq!(denied.len(), 1, "one Event per host a minute: {denied:?}");
    let note = denied[0]["message"].as_str().or(denied[0]["note"].as_str()).unwrap_or_default();
    assert!(note.contains("refused.test") && note.contains("egress_allow_domains"), "{note}");
    rest.post(&format!("{base}/exec"), sh("wget -q -O - http://refused.test/ || true")).await.ok();
    let metrics = k.kubectl_ok(&["get", "--raw", "/metrics"]);
    let line = metrics
        .lines()
        .find(|l| l.starts_with("kairon_egress_denied_total{node=\"local\",reason=\"DnsRefused\"}"))
        .unwrap_or_else(|| panic!("the refusals are counted:\n{metrics}"));
    let count: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(count >= 1.0, "{line}");

    // sandbox-http dials the guest IP: a server bound to it answers.
    rest.post(
        &format!("{base}/processes"),
        json!({"command": ["sh", "-c", format!("mkdir -p /www && echo on-the-guest-ip > /www/index.html && exec httpd -f -p {ip}:8080 -h /www")]}),
    )
    .await
    .ok();
    let page = eventually("the guest's server", Duration::from_secs(20), || async {
        let r = rest.get(&format!("{base}/sandbox-http/8080/index.html")).await;
        (r.status == 200).then_some(r.body)
    })
    .await;
    assert_eq!(page, "on-the-guest-ip\n");

    // Paused and resumed, it keeps its address.
    let api: Api<Machine> = Api::namespaced(k.client().await.unwrap(), "default");
    for state in ["Paused", "Running"] {
        let patch = json!({"spec": {"powerState": state}});
        api.patch("web", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&patch)).await.unwrap();
        let phase = if state == "Paused" { MachinePhase::Paused } else { MachinePhase::Running };
        wait_phase(&api, "web", phase, MINUTE).await;
        let m = api.get("web").await.unwrap();
        assert_eq!(m.status.and_then(|s| s.guest_ip).as_deref(), Some(ip.as_str()), "after {state}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn guest_ips_stay_across_a_killed_node_agent() {
    let bed = Testbed::start();
    let dir = tempfile::tempdir().unwrap();
    let config = node_config(&bed, dir.path());
    let k = Kairon::start_with(&["--no-runtime"]).unwrap();
    let state = tempfile::tempdir().unwrap();
    let mut node = SeparateNode::start(&k, "netnode", state.path(), &["--config", &config]).unwrap();
    let api: Api<Machine> = Api::namespaced(k.client().await.unwrap(), "default");
    let names = ["n1", "n2", "n3"];
    for n in names {
        api.create(&PostParams::default(), &serde_json::from_value(attached(n)).unwrap()).await.unwrap();
    }
    let mut before = Vec::new();
    for n in names {
        wait_phase(&api, n, MachinePhase::Running, MINUTE).await;
        before.push(api.get(n).await.unwrap().status.and_then(|s| s.guest_ip).expect("guest IP"));
    }
    let unique: std::collections::BTreeSet<_> = before.iter().collect();
    assert_eq!(unique.len(), names.len(), "{before:?}");

    node.kill_agent();
    node.start_agent().unwrap();
    // The new agent reports every Machine again; the addresses are those they had.
    for (n, ip) in names.iter().zip(&before) {
        let m = eventually("a report from the new agent", Duration::from_secs(30), || async {
            let m = api.get(n).await.ok()?;
            let fresh = m.status.as_ref()?.conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True");
            fresh.then_some(m)
        })
        .await;
        assert_eq!(m.status.and_then(|s| s.guest_ip).as_ref(), Some(ip), "{n}");
    }
    let rt = node.runtime_client().unwrap();
    let ips: Vec<Option<String>> = rt.list().await.unwrap().into_iter().map(|v| v.guest_ip).collect();
    assert_eq!(ips.iter().flatten().count(), names.len(), "no instance made twice, none lost: {ips:?}");
}
