//! Tenant against tenant at the API: each test is an attack as a tenant would try it against a
//! real `kairon up` (raw Kubernetes paths, as kubectl and kube-rs send them, and the REST API),
//! asserting the refusal says what to do AND that the victim is untouched. SECURITY.md's
//! "Tenant against tenant at the API" names these tests.

use std::time::Duration;

use serde_json::{Value, json};

use kairon_e2e::flags::API_ONLY;
use kairon_e2e::{Answer, Kairon, Rest, eventually, hold};

const GROUP: &str = "/apis/kairon.zyvor.dev/v1";
const IMAGE: &str = "/var/lib/fluxvm/images/kairon-hw.qcow2";
// The write-table tests are about the API alone (API_ONLY): nothing else writes next to them.

fn path(ns: &str, plural: &str, name: &str) -> String {
    format!("{GROUP}/namespaces/{ns}/{plural}/{name}")
}

fn vm(name: &str) -> Value {
    json!({"apiVersion": "kairon.zyvor.dev/v1", "kind": "Machine",
           "metadata": {"name": name, "labels": {"app": "x"}, "annotations": {"note": "x"}},
           "spec": {"image": {"path": IMAGE}}})
}

async fn send(r: &Rest, method: reqwest::Method, path: &str, content_type: &str, body: &Value) -> Answer {
    let req = r.request(method, path).header("content-type", content_type).body(serde_json::to_vec(body).unwrap());
    r.send(req).await
}

async fn merge(r: &Rest, path: &str, body: Value) -> Answer {
    send(r, reqwest::Method::PATCH, path, "application/merge-patch+json", &body).await
}

async fn json_patch(r: &Rest, path: &str, body: Value) -> Answer {
    send(r, reqwest::Method::PATCH, path, "application/json-patch+json", &body).await
}

async fn apply(r: &Rest, path: &str, body: Value) -> Answer {
    let p = format!("{path}?fieldManager=attacker&force=true");
    send(r, reqwest::Method::PATCH, &p, "application/apply-patch+yaml", &body).await
}

async fn put(r: &Rest, path: &str, body: Value) -> Answer {
    send(r, reqwest::Method::PUT, path, "application/json", &body).await
}

async fn post(r: &Rest, path: &str, body: Value) -> Answer {
    send(r, reqwest::Method::POST, path, "application/json", &body).await
}

/// A refusal that names the rule: `code`, and a message containing `text`.
#[track_caller]
fn refused(what: &str, got: &Answer, code: u16, text: &str) {
    assert_eq!(got.status, code, "{what}: wanted {code}, got {} {}", got.status, got.body);
    let msg = got.body["message"].as_str().unwrap_or_default();
    assert!(msg.contains(text), "{what}: the message should say {text:?}: {msg}");
}

#[track_caller]
fn ok(what: &str, got: &Answer) {
    assert!((200..300).contains(&got.status), "{what}: wanted success, got {} {}", got.status, got.body);
}

/// JSON pointer escaping of a map key (`/` → `~1`).
fn esc(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

// ---------------------------------------------------------------------------------------------
// 1. Status is written by admin, node and controller identities only.

/// The attack seen live: an operator of `b` points its own Machine's status.runtimeID at a
/// Machine of `agents`, then deletes its Machine, hoping the node agent deletes the victim's
/// sandbox with it. Every status write path is refused, and the victim keeps running.
#[tokio::test(flavor = "multi_thread")]
async fn a_tenant_cannot_point_its_status_at_another_tenants_sandbox() {
    let k = Kairon::start().unwrap();
    let admin = k.rest().unwrap();
    let victim = json!({"metadata": {"name": "victim"}, "spec": {"sandbox": {"templateName": "busybox"}}});
    admin.post("/api/v1/machines/agents", victim).await.ok();
    let running = admin.get("/api/v1/machines/agents/victim/wait?phase=Running&timeoutSeconds=120").await.ok();
    let runtime_id = running["status"]["runtimeID"].as_str().expect("the victim runs").to_string();

    let mallory = k.rest_as(&k.token("mallory", "operator", &["b"]).unwrap()).unwrap();
    ok("mallory creates her own Machine", &post(&mallory, &format!("{GROUP}/namespaces/b/machines"), vm("mine")).await);
    let status = format!("{}/status", path("b", "machines", "mine"));
    let evil = json!({"status": {"runtimeID": runtime_id, "nodeName": "local", "phase": "Running"}});
    refused("merge patch of status", &merge(&mallory, &status, evil.clone()).await, 403, "written by the controllers");
    refused(
        "JSON patch of status",
        &json_patch(&mallory, &status, json!([{"op": "add", "path": "/status", "value": evil["status"]}])).await,
        403,
        "written by the controllers",
    );
    let mut whole = admin.get(&format!("{GROUP}/namespaces/b/machines/mine")).await.ok();
    whole["status"] = evil["status"].clone();
    refused("PUT of status", &put(&mallory, &status, whole.clone()).await, 403, "written by the controllers");
    let applied = json!({"apiVersion": "kairon.zyvor.dev/v1", "kind": "Machine",
                         "metadata": {"name": "mine"}, "status": evil["status"]});
    refused("server-side apply of status", &apply(&mallory, &status, applied).await, 403, "written by the controllers");
    // The object's own paths keep the stored status (as in Kubernetes): nothing changes.
    let _ = put(&mallory, &path("b", "machines", "mine"), whole.clone()).await;
    let _ = merge(&mallory, &path("b", "machines", "mine"), json!({"status": evil["status"]})).await;
    // Nor does the REST API write status.
    let mut rest_obj = mallory.get("/api/v1/machines/b/mine").await.ok();
    rest_obj["status"] = evil["status"].clone();
    let _ = mallory.put("/api/v1/machines/b/mine", rest_obj).await;
    let mine = admin.get("/api/v1/machines/b/mine").await.ok();
    assert_ne!(mine["status"]["runtimeID"], json!(runtime_id), "mallory's status is untouched: {mine}");

    // Delete it: the node agent removes mallory's nothing, and the victim runs on.
    mallory.delete("/api/v1/machines/b/mine").await.ok();
    admin.wait_deleted("b", "mine", 60).await;
    hold(Duration::from_secs(3), "the node agent's cleanup of mallory's Machine must not reach the victim").await;
    let v = admin.get("/api/v1/machines/agents/victim").await.ok();
    assert_eq!(v["status"]["phase"], "Running", "the victim still runs: {v}");
    assert_eq!(v["status"]["runtimeID"], json!(runtime_id));
    let instances = k.runtime().unwrap().list().await.unwrap();
    assert!(instances.iter().any(|v| v.id == runtime_id), "the victim's instance is still on the runtime");
}

/// Status of MachinePools, MachineClaims and KaironNodes: not the tenants' either, and claim
/// usage and phase after binding cannot be forged (item 5).
#[tokio::test(flavor = "multi_thread")]
async fn a_tenant_cannot_write_pool_claim_or_node_status() {
    let k = Kairon::start_with(API_ONLY).unwrap();
    let admin = k.rest().unwrap();
    let alice = k.rest_as(&k.token("alice", "operator", &["agents"]).unwrap()).unwrap();
    let pool =
        json!({"metadata": {"name": "p"}, "spec": {"replicas": 0, "template": {"spec": {"image": {"path": IMAGE}}}}});
    alice.post("/api/v1/machinepools/agents", pool).await.ok();
    let claim = json!({"metadata": {"name": "c"}, "spec": {"poolName": "p"}});
    alice.post("/api/v1/machineclaims/agents", claim).await.ok();
    // The controller's view of the claim, written with an admin token.
    let bound = json!({"status": {"phase": "Bound", "machineName": "m1",
                                  "usage": {"activeSeconds": 100, "suspendedSeconds": 0}}});
    ok(
        "admin writes claim status",
        &merge(&admin, &format!("{}/status", path("agents", "machineclaims", "c")), bound).await,
    );
    let before = admin.get("/api/v1/machineclaims/agents/c").await.ok();

    let forged = json!({"status": {"phase": "Released", "usage": {"activeSeconds": 0, "vcpuSeconds": 0}}});
    let claim_status = format!("{}/status", path("agents", "machineclaims", "c"));
    refused("claim usage", &merge(&alice, &claim_status, forged.clone()).await, 403, "written by the controllers");
    refused(
        "claim phase by JSON patch",
        &json_patch(&alice, &claim_status, json!([{"op": "replace", "path": "/status/phase", "value": "Pending"}]))
            .await,
        403,
        "written by the controllers",
    );
    let pool_status = format!("{}/status", path("agents", "machinepools", "p"));
    refused("pool status", &merge(&alice, &pool_status, json!({"status": {"ready": 9}})).await, 403, "controllers");
    refused(
        "node status",
        &merge(&alice, &format!("{GROUP}/kaironnodes/local/status"), json!({"status": {"heartbeatTime": null}})).await,
        403,
        "admin token",
    );
    let after = admin.get("/api/v1/machineclaims/agents/c").await.ok();
    assert_eq!(before["status"], after["status"], "the claim's status is untouched");
    assert_eq!(after["status"]["usage"]["activeSeconds"], 100);
}

// ---------------------------------------------------------------------------------------------
// 2. The well-known keys write table (SECURITY.md), one test per row, on every write path.

#[derive(Clone, Copy, PartialEq)]
enum Map {
    Labels,
    Annotations,
}

impl Map {
    fn field(self) -> &'static str {
        match self {
            Map::Labels => "labels",
            Map::Annotations => "annotations",
        }
    }
}

/// Every way a tenant could set (`Some`) or remove (`None`) `key` on `agents/victim`, each
/// expected to be refused with a message naming the key; the victim keeps its value.
async fn tenant_cannot_write(k: &Kairon, tenant: &Rest, map: Map, key: &str, value: Option<&str>) {
    tenant_cannot_write_to(k, tenant, map, key, value, true).await
}

/// The same; `creates`: also on new objects (POST, REST POST, server-side apply creating).
async fn tenant_cannot_write_to(k: &Kairon, tenant: &Rest, map: Map, key: &str, value: Option<&str>, creates: bool) {
    let admin = k.rest().unwrap();
    let target = path("agents", "machines", "victim");
    let before = admin.get(&target).await.ok();
    let f = map.field();
    let v = value.map(|v| json!(v)).unwrap_or(Value::Null);
    let mut attempts: Vec<(&str, Answer)> = Vec::new();
    attempts.push(("merge patch", merge(tenant, &target, json!({"metadata": {f: {key: v.clone()}}})).await));
    let op = match value {
        Some(_) => json!([{"op": "add", "path": format!("/metadata/{f}/{}", esc(key)), "value": v}]),
        None => json!([{"op": "remove", "path": format!("/metadata/{f}/{}", esc(key))}]),
    };
    attempts.push(("JSON patch", json_patch(tenant, &target, op).await));
    let mut whole = before.clone();
    match value {
        Some(_) => whole["metadata"][f][key] = v.clone(),
        None => {
            whole["metadata"][f].as_object_mut().unwrap().remove(key);
        }
    }
    attempts.push(("PUT", put(tenant, &target, whole.clone()).await));
    let rest_path = "/api/v1/machines/agents/victim";
    attempts.push(("REST PUT", tenant.put(rest_path, whole.clone()).await));
    if value.is_some() {
        let applied = json!({"apiVersion": "kairon.zyvor.dev/v1", "kind": "Machine",
                             "metadata": {"name": "victim", f: {key: v.clone()}}, "spec": {"image": {"path": IMAGE}}});
        attempts.push(("server-side apply", apply(tenant, &target, applied).await));
    }
    if value.is_some() && creates {
        // And on a new object: a create is a write too.
        let mut created = vm("fresh");
        created["metadata"][f][key] = v.clone();
        attempts.push(("POST", post(tenant, &format!("{GROUP}/namespaces/agents/machines"), created.clone()).await));
        created["metadata"]["name"] = json!("fresh-rest");
        attempts.push(("REST POST", tenant.post("/api/v1/machines/agents", created.clone()).await));
        created["metadata"]["name"] = json!("fresh-apply");
        let p = path("agents", "machines", "fresh-apply");
        attempts.push(("server-side apply create", apply(tenant, &p, created).await));
    }
    for (how, got) in attempts {
        refused(&format!("{how} writing {key}={value:?}"), &got, 403, key);
    }
    let after = admin.get(&target).await.ok();
    assert_eq!(before["metadata"][f][key], after["metadata"][f][key], "{key} untouched on the victim");
    assert_eq!(before["metadata"]["resourceVersion"], after["metadata"]["resourceVersion"], "the victim is untouched");
    for fresh in ["fresh", "fresh-rest", "fresh-apply"] {
        assert_eq!(admin.get(&path("agents", "machines", fresh)).await.status, 404, "{fresh} was not created");
    }
}

/// `kairon up` without runtime, a Machine `agents/victim` on node `local` (status written by
/// the admin), the operator alice of `agents`, and the victim's `map[key]` set to `value`.
async fn table_setup(map: Map, key: &str, value: Option<&str>) -> (Kairon, Rest) {
    let k = Kairon::start_with(API_ONLY).unwrap();
    let admin = k.rest().unwrap();
    let mut m = vm("victim");
    if let Some(v) = value {
        m["metadata"][map.field()][key] = json!(v);
    }
    ok("admin creates the victim", &post(&admin, &format!("{GROUP}/namespaces/agents/machines"), m).await);
    let status = format!("{}/status", path("agents", "machines", "victim"));
    ok("admin places it on node local", &merge(&admin, &status, json!({"status": {"nodeName": "local"}})).await);
    let alice = k.rest_as(&k.token("alice", "operator", &["agents"]).unwrap()).unwrap();
    (k, alice)
}

async fn controller_may_write(k: &Kairon, map: Map, key: &str) {
    let ctl = k.rest_as(&k.token("kairon-controller-x", "controller", &[]).unwrap()).unwrap();
    let target = path("agents", "machines", "victim");
    ok(
        "the controller writes it",
        &merge(&ctl, &target, json!({"metadata": {map.field(): {key: "by-controller"}}})).await,
    );
    let node = k.rest_as(&k.token("local", "node", &[]).unwrap()).unwrap();
    refused(
        "a node may not",
        &merge(&node, &target, json!({"metadata": {map.field(): {key: "by-node"}}})).await,
        403,
        "node",
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn row_claim_label_is_written_by_the_controller_only() {
    let key = "kairon.zyvor.dev/claim";
    let (k, alice) = table_setup(Map::Labels, key, Some("theirs")).await;
    tenant_cannot_write(&k, &alice, Map::Labels, key, Some("mine")).await;
    tenant_cannot_write(&k, &alice, Map::Labels, key, None).await;
    controller_may_write(&k, Map::Labels, key).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn row_pool_label_is_written_by_the_controller_only() {
    let key = "kairon.zyvor.dev/pool";
    let (k, alice) = table_setup(Map::Labels, key, Some("theirs")).await;
    tenant_cannot_write(&k, &alice, Map::Labels, key, Some("mine")).await;
    tenant_cannot_write(&k, &alice, Map::Labels, key, None).await;
    controller_may_write(&k, Map::Labels, key).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn row_lifecycle_start_is_written_by_the_controller_only() {
    let key = "kairon.zyvor.dev/lifecycle-start";
    let (k, alice) = table_setup(Map::Annotations, key, Some("2030-01-01T00:00:00Z")).await;
    tenant_cannot_write(&k, &alice, Map::Annotations, key, Some("2099-01-01T00:00:00Z")).await;
    tenant_cannot_write(&k, &alice, Map::Annotations, key, None).await;
    controller_may_write(&k, Map::Annotations, key).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn row_owner_references_are_written_by_the_controller_only() {
    let (k, alice) = table_setup(Map::Labels, "app", Some("x")).await;
    let admin = k.rest().unwrap();
    let target = path("agents", "machines", "victim");
    let before = admin.get(&target).await.ok();
    let owner = json!([{"apiVersion": "kairon.zyvor.dev/v1", "kind": "MachinePool", "name": "other",
                         "uid": "00000000-0000-0000-0000-000000000001", "controller": true}]);
    let mut whole = before.clone();
    whole["metadata"]["ownerReferences"] = owner.clone();
    let mut created = vm("fresh");
    created["metadata"]["ownerReferences"] = owner.clone();
    for (how, got) in [
        ("merge patch", merge(&alice, &target, json!({"metadata": {"ownerReferences": owner}})).await),
        (
            "JSON patch",
            json_patch(&alice, &target, json!([{"op": "add", "path": "/metadata/ownerReferences", "value": owner}]))
                .await,
        ),
        ("PUT", put(&alice, &target, whole.clone()).await),
        ("REST PUT", alice.put("/api/v1/machines/agents/victim", whole.clone()).await),
        (
            "server-side apply",
            apply(
                &alice,
                &target,
                json!({"apiVersion": "kairon.zyvor.dev/v1", "kind": "Machine",
                       "metadata": {"name": "victim", "ownerReferences": owner}}),
            )
            .await,
        ),
        ("POST", post(&alice, &format!("{GROUP}/namespaces/agents/machines"), created.clone()).await),
        ("REST POST", alice.post("/api/v1/machines/agents", created).await),
    ] {
        refused(how, &got, 403, "ownerReferences");
    }
    let after = admin.get(&target).await.ok();
    assert_eq!(before["metadata"]["resourceVersion"], after["metadata"]["resourceVersion"], "the victim is untouched");
    assert_eq!(admin.get(&path("agents", "machines", "fresh")).await.status, 404);
    let ctl = k.rest_as(&k.token("kairon-controller-x", "controller", &[]).unwrap()).unwrap();
    ok("the controller sets it", &merge(&ctl, &target, json!({"metadata": {"ownerReferences": owner}})).await);
    // With one set, removing it is a write too.
    refused(
        "removing ownerReferences",
        &merge(&alice, &target, json!({"metadata": {"ownerReferences": null}})).await,
        403,
        "ownerReferences",
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn row_fs_frozen_is_written_by_the_node_only() {
    let key = "kairon.zyvor.dev/fs-frozen";
    let (k, alice) = table_setup(Map::Annotations, key, Some("2030-01-01T00:00:00Z")).await;
    tenant_cannot_write(&k, &alice, Map::Annotations, key, Some("forged")).await;
    tenant_cannot_write(&k, &alice, Map::Annotations, key, None).await;
    let target = path("agents", "machines", "victim");
    let node = k.rest_as(&k.token("local", "node", &[]).unwrap()).unwrap();
    ok(
        "the victim's node confirms a freeze",
        &merge(&node, &target, json!({"metadata": {"annotations": {key: null}}})).await,
    );
    let elsewhere = k.rest_as(&k.token("elsewhere", "node", &[]).unwrap()).unwrap();
    refused(
        "another node",
        &merge(&elsewhere, &target, json!({"metadata": {"annotations": {key: "x"}}})).await,
        403,
        "not on node",
    );
    let ctl = k.rest_as(&k.token("kairon-controller-x", "controller", &[]).unwrap()).unwrap();
    refused("the controller", &merge(&ctl, &target, json!({"metadata": {"annotations": {key: "x"}}})).await, 403, key);
}

#[tokio::test(flavor = "multi_thread")]
async fn row_fs_frozen_until_is_the_tenants() {
    let key = "kairon.zyvor.dev/fs-frozen-until";
    let (k, alice) = table_setup(Map::Annotations, "note", Some("x")).await;
    let target = path("agents", "machines", "victim");
    ok("set", &merge(&alice, &target, json!({"metadata": {"annotations": {key: "2030-01-01T00:00:00Z"}}})).await);
    ok("change", &merge(&alice, &target, json!({"metadata": {"annotations": {key: "2031-01-01T00:00:00Z"}}})).await);
    ok("remove", &merge(&alice, &target, json!({"metadata": {"annotations": {key: null}}})).await);
    let mut created = vm("fresh");
    created["metadata"]["annotations"][key] = json!("2030-01-01T00:00:00Z");
    ok("create with it", &post(&alice, &format!("{GROUP}/namespaces/agents/machines"), created).await);
    drop(k);
}

#[tokio::test(flavor = "multi_thread")]
async fn row_idle_suspended_may_be_cleared_not_set_by_tenants() {
    let key = "kairon.zyvor.dev/idle-suspended";
    let (k, alice) = table_setup(Map::Annotations, key, Some("Pause")).await;
    tenant_cannot_write(&k, &alice, Map::Annotations, key, Some("Stop")).await;
    let target = path("agents", "machines", "victim");
    ok("alice clears it", &merge(&alice, &target, json!({"metadata": {"annotations": {key: null}}})).await);
    tenant_cannot_write(&k, &alice, Map::Annotations, key, Some("Pause")).await;
    // The REST power operations clear it for the caller, as kaironctl start does.
    let admin = k.rest().unwrap();
    let ctl = k.rest_as(&k.token("kairon-controller-x", "controller", &[]).unwrap()).unwrap();
    ok(
        "the controller suspends",
        &merge(&ctl, &target, json!({"metadata": {"annotations": {key: "Pause"}}, "spec": {"powerState": "Paused"}}))
            .await,
    );
    ok(
        "alice resumes through REST",
        &alice
            .send(alice.request(reqwest::Method::POST, "/api/v1/machines/agents/victim/resume").json(&json!({})))
            .await,
    );
    let after = admin.get(&target).await.ok();
    assert!(after["metadata"]["annotations"].get(key).is_none(), "resume cleared it: {after}");
    assert_eq!(after["spec"]["powerState"], "Running");
}

// ---------------------------------------------------------------------------------------------
// 3. spec.sandbox and the sandbox label.

#[tokio::test(flavor = "multi_thread")]
async fn the_sandbox_track_is_admin_only_on_every_path_and_immutable() {
    let k = Kairon::start_with(API_ONLY).unwrap();
    let admin = k.rest().unwrap();
    let alice = k.rest_as(&k.token("alice", "operator", &["agents"]).unwrap()).unwrap();
    let machines = format!("{GROUP}/namespaces/agents/machines");
    ok("alice creates a VM", &post(&alice, &machines, vm("plain")).await);
    let plain = path("agents", "machines", "plain");
    let sandbox = json!({"templateName": "busybox"});
    let before = admin.get(&plain).await.ok();

    // Turning her VM into a sandbox, on every path: admin-only for her.
    let mut whole = before.clone();
    whole["spec"]["sandbox"] = sandbox.clone();
    for (how, got) in [
        ("merge patch", merge(&alice, &plain, json!({"spec": {"sandbox": sandbox}})).await),
        (
            "JSON patch",
            json_patch(&alice, &plain, json!([{"op": "add", "path": "/spec/sandbox", "value": sandbox}])).await,
        ),
        ("PUT", put(&alice, &plain, whole.clone()).await),
        ("REST PUT", alice.put("/api/v1/machines/agents/plain", whole.clone()).await),
        (
            "server-side apply",
            apply(
                &alice,
                &plain,
                json!({"apiVersion": "kairon.zyvor.dev/v1", "kind": "Machine", "metadata": {"name": "plain"},
                       "spec": {"sandbox": sandbox, "image": {"path": IMAGE}}}),
            )
            .await,
        ),
        (
            "server-side apply create",
            apply(
                &alice,
                &path("agents", "machines", "new-sb"),
                json!({"apiVersion": "kairon.zyvor.dev/v1", "kind": "Machine", "metadata": {"name": "new-sb"},
                       "spec": {"sandbox": sandbox}}),
            )
            .await,
        ),
    ] {
        refused(how, &got, 403, "admin-only");
    }
    assert_eq!(admin.get(&plain).await.ok()["metadata"]["resourceVersion"], before["metadata"]["resourceVersion"]);
    assert_eq!(admin.get(&path("agents", "machines", "new-sb")).await.status, 404);

    // A pool template is the same rule.
    let pool = json!({"apiVersion": "kairon.zyvor.dev/v1", "kind": "MachinePool", "metadata": {"name": "p"},
                      "spec": {"replicas": 0, "template": {"spec": {"image": {"path": IMAGE}}}}});
    ok("alice creates a VM pool", &post(&alice, &format!("{GROUP}/namespaces/agents/machinepools"), pool).await);
    let p = path("agents", "machinepools", "p");
    refused(
        "pool template",
        &merge(&alice, &p, json!({"spec": {"template": {"spec": {"sandbox": sandbox}}}})).await,
        403,
        "admin-only",
    );
    refused(
        "pool template by JSON patch",
        &json_patch(&alice, &p, json!([{"op": "add", "path": "/spec/template/spec/sandbox", "value": sandbox}])).await,
        403,
        "admin-only",
    );

    // Immutable for everyone: 422 with the field.
    let got = merge(&admin, &plain, json!({"spec": {"sandbox": sandbox}})).await;
    refused("admin adds spec.sandbox", &got, 422, "immutable");
    assert_eq!(got.body["details"]["causes"][0]["field"], "spec.sandbox", "{}", got.body);
    ok(
        "admin creates a sandbox",
        &post(
            &admin,
            &machines,
            json!({"apiVersion": "kairon.zyvor.dev/v1", "kind": "Machine",
        "metadata": {"name": "sb"}, "spec": {"sandbox": sandbox}}),
        )
        .await,
    );
    let sb = path("agents", "machines", "sb");
    let got = merge(&admin, &sb, json!({"spec": {"sandbox": null, "image": {"path": IMAGE}}})).await;
    refused("admin removes spec.sandbox", &got, 422, "immutable");
    let got = merge(&admin, &sb, json!({"spec": {"sandbox": {"templateName": "python"}}})).await;
    refused("admin changes spec.sandbox", &got, 422, "immutable");
    refused(
        "alice writes the admin's sandbox",
        &merge(&alice, &sb, json!({"spec": {"ttlSeconds": 60}})).await,
        403,
        "admin-only",
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_sandbox_label_is_set_only_at_create() {
    let key = "kairon.zyvor.dev/sandbox";
    let (k, alice) = table_setup(Map::Labels, "app", Some("x")).await;
    // Adding it to an existing Machine would open it to operator guest exec.
    tenant_cannot_write_to(&k, &alice, Map::Labels, key, Some("true"), false).await;
    // A new Machine may carry it.
    let mut labelled = vm("labelled");
    labelled["metadata"]["labels"][key] = json!("true");
    ok("create with the label", &post(&alice, &format!("{GROUP}/namespaces/agents/machines"), labelled).await);
    let target = path("agents", "machines", "labelled");
    let admin = k.rest().unwrap();
    let before = admin.get(&target).await.ok();
    for (how, got) in [
        ("change", merge(&alice, &target, json!({"metadata": {"labels": {key: "false"}}})).await),
        ("remove", merge(&alice, &target, json!({"metadata": {"labels": {key: null}}})).await),
        (
            "remove by JSON patch",
            json_patch(&alice, &target, json!([{"op": "remove", "path": format!("/metadata/labels/{}", esc(key))}]))
                .await,
        ),
    ] {
        refused(how, &got, 403, key);
    }
    assert_eq!(admin.get(&target).await.ok()["metadata"]["resourceVersion"], before["metadata"]["resourceVersion"]);
    ok("other labels stay hers", &merge(&alice, &target, json!({"metadata": {"labels": {"team": "a"}}})).await);
    ok("the admin may", &merge(&admin, &target, json!({"metadata": {"labels": {key: null}}})).await);
}

// ---------------------------------------------------------------------------------------------
// 4. Lists, continue tokens, namespace-less writes, kairon-system and Leases.

fn decode_token(token: &str) -> String {
    let bytes: Vec<u8> =
        (0..token.len()).step_by(2).filter_map(|i| u8::from_str_radix(token.get(i..i + 2)?, 16).ok()).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn lists_and_continue_tokens_reveal_nothing_elsewhere() {
    let k = Kairon::start_with(API_ONLY).unwrap();
    let admin = k.rest().unwrap();
    // The secret namespace sorts between and around the viewer's own.
    for (ns, name) in
        [("aa", "secret-1"), ("agents", "mine-1"), ("agents", "mine-2"), ("zz", "secret-2"), ("b", "secret-3")]
    {
        ok("admin creates", &post(&admin, &format!("{GROUP}/namespaces/{ns}/machines"), vm(name)).await);
    }
    let viewer = k.rest_as(&k.token("vic", "viewer", &["agents", "c"]).unwrap()).unwrap();
    let mut seen = Vec::new();
    let mut cont: Option<String> = None;
    for _ in 0..10 {
        let mut p = format!("{GROUP}/machines?limit=1");
        if let Some(c) = &cont {
            p.push_str(&format!("&continue={c}"));
        }
        let page = viewer.get(&p).await.ok();
        for item in page["items"].as_array().unwrap() {
            seen.push(item["metadata"]["name"].as_str().unwrap().to_string());
        }
        match page["metadata"]["continue"].as_str().filter(|c| !c.is_empty()) {
            Some(c) => {
                let decoded = decode_token(c);
                assert!(
                    !decoded.contains("secret"),
                    "the continue token names another namespace's object: {decoded:?}"
                );
                assert!(!decoded.contains("\u{1}aa\u{1}") && !decoded.contains("\u{1}zz\u{1}"), "{decoded:?}");
                cont = Some(c.to_string());
            }
            None => break,
        }
    }
    assert_eq!(seen, ["mine-1", "mine-2"], "only her own objects, every one of them");
    // A forged token pointing elsewhere gains nothing.
    let forged: String = "1\u{1}aa\u{1}".bytes().map(|b| format!("{b:02x}")).collect();
    let page = viewer.get(&format!("{GROUP}/machines?limit=5&continue={forged}")).await.ok();
    let names: Vec<&str> =
        page["items"].as_array().unwrap().iter().filter_map(|i| i["metadata"]["name"].as_str()).collect();
    assert_eq!(names, ["mine-1", "mine-2"]);
    // Not her namespace: refused before anything about what is there.
    let got = viewer.get(&format!("{GROUP}/namespaces/aa/machines/secret-1")).await;
    refused("get elsewhere", &got, 403, "may not use namespace");
    assert!(!got.body.to_string().contains("secret-1\" not found"), "{}", got.body);
}

#[tokio::test(flavor = "multi_thread")]
async fn namespace_less_writes_kairon_system_and_leases_are_refused() {
    let k = Kairon::start_with(API_ONLY).unwrap();
    let admin = k.rest().unwrap();
    // An operator in every namespace, and the legacy-style wildcard.
    let star = k.rest_as(&k.token("star", "operator", &["*"]).unwrap()).unwrap();
    let got = post(&star, &format!("{GROUP}/machines"), vm("nowhere")).await;
    refused("POST without a namespace", &got, 405, "/namespaces/{namespace}/machines");
    let got = post(&admin, &format!("{GROUP}/machines"), vm("nowhere")).await;
    refused("POST without a namespace, even for an admin", &got, 405, "namespaced");
    let got = send(&star, reqwest::Method::DELETE, &format!("{GROUP}/machines"), "application/json", &json!({})).await;
    refused("DELETE across namespaces", &got, 405, "namespaced");

    let got = post(&star, &format!("{GROUP}/namespaces/kairon-system/machines"), vm("x")).await;
    refused("a Machine in kairon-system", &got, 403, "kairon-system");
    let lease = |holder: &str| {
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
               "metadata": {"name": "kairon-controller"}, "spec": {"holderIdentity": holder}})
    };
    let leases = "/apis/coordination.k8s.io/v1/namespaces/kairon-system/leases";
    refused("the controllers' Lease", &post(&star, leases, lease("star")).await, 403, "Leases");
    let own = "/apis/coordination.k8s.io/v1/namespaces/agents/leases";
    refused("a Lease in her own namespace", &post(&star, own, lease("star")).await, 403, "Leases");
    let ctl = k.rest_as(&k.token("kairon-controller-x", "controller", &[]).unwrap()).unwrap();
    ok("the controller takes the Lease", &post(&ctl, leases, lease("kairon-controller-x")).await);
    let held = format!("{leases}/kairon-controller");
    refused(
        "stealing the Lease",
        &merge(&star, &held, json!({"spec": {"holderIdentity": "star"}})).await,
        403,
        "Leases",
    );
    refused("deleting the Lease", &star.delete(&held).await, 403, "Leases");
    let l = admin.get(&held).await.ok();
    assert_eq!(l["spec"]["holderIdentity"], "kairon-controller-x", "the Lease is the controller's, as it wrote it");
}

// ---------------------------------------------------------------------------------------------
// Node and controller identities hold only their own rights.

#[tokio::test(flavor = "multi_thread")]
async fn node_and_controller_identities_stay_in_their_lanes() {
    let k = Kairon::start_with(API_ONLY).unwrap();
    let admin = k.rest().unwrap();
    let machines = format!("{GROUP}/namespaces/agents/machines");
    for (name, node) in [("here", "local"), ("there", "other")] {
        ok("create", &post(&admin, &machines, vm(name)).await);
        let s = format!("{}/status", path("agents", "machines", name));
        ok("place", &merge(&admin, &s, json!({"status": {"nodeName": node}})).await);
    }
    let node = k.rest_as(&k.token("local", "node", &[]).unwrap()).unwrap();
    let here = path("agents", "machines", "here");
    let there = path("agents", "machines", "there");
    ok(
        "status of its Machine",
        &merge(&node, &format!("{here}/status"), json!({"status": {"phase": "Running"}})).await,
    );
    refused(
        "status of another node's Machine",
        &merge(&node, &format!("{there}/status"), json!({"status": {"phase": "Failed"}})).await,
        403,
        "not on node",
    );
    refused(
        "moving a Machine",
        &merge(&node, &format!("{here}/status"), json!({"status": {"nodeName": "other"}})).await,
        403,
        "nodeName",
    );
    refused("spec", &merge(&node, &here, json!({"spec": {"powerState": "Stopped"}})).await, 403, "spec");
    refused("labels", &merge(&node, &here, json!({"metadata": {"labels": {"a": "b"}}})).await, 403, "spec, labels");
    refused("delete", &node.delete(&here).await, 403, "deletes nothing");
    refused("create", &post(&node, &machines, vm("new")).await, 403, "creates no Machines");
    ok("finalizer", &merge(&node, &here, json!({"metadata": {"finalizers": ["kairon.zyvor.dev/machine"]}})).await);
    ok(
        "activity stamp",
        &merge(
            &node,
            &here,
            json!({"metadata": {"annotations": {"kairon.zyvor.dev/last-activity": "2030-01-01T00:00:00Z"}}}),
        )
        .await,
    );
    let pool = json!({"apiVersion": "kairon.zyvor.dev/v1", "kind": "MachinePool", "metadata": {"name": "p"},
                      "spec": {"replicas": 0, "template": {"spec": {"image": {"path": IMAGE}}}}});
    refused(
        "a pool",
        &post(&node, &format!("{GROUP}/namespaces/agents/machinepools"), pool).await,
        403,
        "machinepools",
    );
    let kn = |n: &str| {
        json!({"apiVersion": "kairon.zyvor.dev/v1", "kind": "KaironNode", "metadata": {"name": n},
               "spec": {"runtimeEndpoint": "http://127.0.0.1:1"}})
    };
    // spec.capacity caps what the scheduler places on a node: an admin's, never the node's (a
    // compromised node would draw every new Machine onto itself). It reports in its status.
    let mut lying = kn("local");
    lying["spec"]["capacity"] = json!({"cpu": "100000", "memory": "1Pi"});
    refused("its capacity", &post(&node, &format!("{GROUP}/kaironnodes"), lying).await, 403, "spec.capacity");
    ok("its own KaironNode", &post(&node, &format!("{GROUP}/kaironnodes"), kn("local")).await);
    let local = format!("{GROUP}/kaironnodes/local");
    refused(
        "its capacity later",
        &merge(&node, &local, json!({"spec": {"capacity": {"cpu": "100000", "memory": "1Pi"}}})).await,
        403,
        "is an admin's",
    );
    ok(
        "capped by an admin",
        &merge(&admin, &local, json!({"spec": {"capacity": {"cpu": "4", "memory": "2Gi"}}})).await,
    );
    ok(
        "what it offers",
        &merge(&node, &format!("{local}/status"), json!({"status": {"capacity": {"cpu": "100000", "memory": "1Pi"}}}))
            .await,
    );
    assert_eq!(admin.get(&local).await.ok()["spec"]["capacity"]["memory"], "2Gi", "the admin's cap stands");
    // No Leases: the controllers' one Lease would stop them all.
    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "kairon-controller"},
                       "spec": {"holderIdentity": "x"}});
    refused(
        "a Lease",
        &post(&node, "/apis/coordination.k8s.io/v1/namespaces/kairon-system/leases", lease).await,
        403,
        "Leases",
    );
    // Events only about its own node's Machines, in their namespace.
    let event = |name: &str, about: &str| {
        json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": "agents"},
               "involvedObject": {"apiVersion": "kairon.zyvor.dev/v1", "kind": "Machine", "name": about, "namespace": "agents"},
               "reason": "Forged", "message": "says the node", "type": "Warning"})
    };
    let events = "/api/v1/namespaces/agents/events";
    ok("an Event about its Machine", &post(&node, events, event("own", "here")).await);
    refused(
        "an Event about another node's Machine",
        &post(&node, events, event("forged", "there")).await,
        403,
        "Events only about Machines on its own node",
    );
    refused("an Event about no Machine", &post(&node, events, event("ghost", "nobody")).await, 403, "own node");
    refused(
        "another KaironNode",
        &post(&node, &format!("{GROUP}/kaironnodes"), kn("other")).await,
        403,
        "own KaironNode",
    );
    // The REST API is not a node's: its writes go through the Kubernetes paths.
    refused(
        "REST power",
        &node.send(node.request(reqwest::Method::POST, "/api/v1/machines/agents/here/pause").json(&json!({}))).await,
        403,
        "Kubernetes-compatible",
    );

    let ctl = k.rest_as(&k.token("kairon-controller-x", "controller", &[]).unwrap()).unwrap();
    ok("controller: status", &merge(&ctl, &format!("{there}/status"), json!({"status": {"phase": "Pending"}})).await);
    ok("controller: pool member", &post(&ctl, &machines, vm("member")).await);
    ok("controller: delete", &ctl.delete(&path("agents", "machines", "member")).await);
    refused(
        "controller: a KaironNode",
        &post(&ctl, &format!("{GROUP}/kaironnodes"), kn("x")).await,
        403,
        "cluster-scoped",
    );
    let v = admin.get(&there).await.ok();
    assert_eq!(v["status"]["nodeName"], "other");
}

/// The in-process node agent and controllers now run with node and controller tokens: a
/// sandbox still runs, pauses and goes away, its KaironNode registers and the Lease is held.
#[tokio::test(flavor = "multi_thread")]
async fn kairon_up_runs_its_node_agent_and_controllers_with_their_own_identities() {
    let k = Kairon::start().unwrap();
    let admin = k.rest().unwrap();
    let sb = json!({"metadata": {"name": "sb"}, "spec": {"sandbox": {"templateName": "busybox"}}});
    admin.post("/api/v1/machines/agents", sb).await.ok();
    admin.get("/api/v1/machines/agents/sb/wait?phase=Running&timeoutSeconds=120").await.ok();
    admin.send(admin.request(reqwest::Method::POST, "/api/v1/machines/agents/sb/pause").json(&json!({}))).await.ok();
    admin.get("/api/v1/machines/agents/sb/wait?phase=Paused&timeoutSeconds=60").await.ok();
    let node = admin.get(&format!("{GROUP}/kaironnodes/local")).await.ok();
    assert!(node["status"]["heartbeatTime"].is_string(), "{node}");
    eventually("the controller Lease", Duration::from_secs(30), || async {
        let l = admin.get("/apis/coordination.k8s.io/v1/namespaces/kairon-system/leases/kairon-controller").await;
        (l.status == 200).then_some(())
    })
    .await;
    admin.delete("/api/v1/machines/agents/sb").await.ok();
    admin.wait_deleted("agents", "sb", 60).await;
}

// ---------------------------------------------------------------------------------------------
// 6. Shared secrets and the private PostgreSQL.

#[test]
fn short_shared_tokens_are_refused_at_startup() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path().to_str().unwrap();
    for args in [
        vec![
            "up",
            "--data-dir",
            dir,
            "--no-runtime",
            "--listen",
            "127.0.0.1:0",
            "--legacy-token",
            "short-legacy-token",
        ],
        vec![
            "node",
            "--kubeconfig",
            "/nonexistent",
            "--node-name",
            "n",
            "--runtime-endpoint",
            "http://127.0.0.1:1",
            "--runtime-token",
            "0123456789abcdef0123456789abcde",
        ],
        vec!["api", "--data-dir", dir, "--database-url", "postgres://x", "--runtime-token", "short"],
    ] {
        let out = std::process::Command::new(kairon_e2e::kairon_bin())
            .args(&args)
            .env_remove("KAIRON_LEGACY_TOKEN")
            .env_remove("KAIRON_RUNTIME_TOKEN")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "kairon {args:?} started with a short token");
        assert!(err.contains("at least 32 bytes"), "kairon {args:?}: {err}");
    }
}

/// `kairon up`'s own PostgreSQL listens on no TCP port and keeps its socket in a 0700 dir.
#[test]
fn the_private_postgres_has_no_tcp_port_and_a_private_socket_dir() {
    use std::hash::{Hash, Hasher};
    use std::os::unix::fs::PermissionsExt;
    let k = Kairon::start_private().unwrap();
    let data_dir = k.data_dir.path().canonicalize().unwrap();
    // Where `kairon up` keeps the cluster: in the data dir, or (when the postgres user cannot
    // reach it) under /var/lib/kairon/postgres/<hash of the data dir>.
    let mut h = std::collections::hash_map::DefaultHasher::new();
    data_dir.hash(&mut h);
    let hashed = std::path::PathBuf::from(format!("/var/lib/kairon/postgres/{:012x}", h.finish() & 0xffff_ffff_ffff));
    let pid_file = [data_dir.join("postgres/postmaster.pid"), hashed.join("postmaster.pid")]
        .into_iter()
        .find(|p| p.exists())
        .expect("the private cluster's postmaster.pid");
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    let lines: Vec<&str> = pid.lines().collect();
    // postmaster.pid: pid, data dir, start time, port, socket dir, listen address, …
    assert_eq!(lines.get(5).map(|l| l.trim()), Some(""), "no TCP listen address: {pid}");
    let socket_dir = lines[4].trim();
    let mode = std::fs::metadata(socket_dir).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700, "{socket_dir} is mode {mode:o}");
    // And nothing of that process listens on TCP.
    let postmaster = lines[0].trim();
    let inodes: Vec<String> = std::fs::read_dir(format!("/proc/{postmaster}/fd"))
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .filter_map(|l| l.to_string_lossy().strip_prefix("socket:[").map(|s| s.trim_end_matches(']').to_string()))
        .collect();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = std::fs::read_to_string(table).unwrap_or_default();
        for line in text.lines().skip(1) {
            let cols: Vec<&str> = line.split_whitespace().collect();
            // State 0A is LISTEN; column 9 is the inode.
            if cols.get(3) == Some(&"0A") && cols.get(9).is_some_and(|i| inodes.iter().any(|x| x == i)) {
                panic!("the private PostgreSQL listens on TCP: {line}");
            }
        }
    }
    drop(k);
}
