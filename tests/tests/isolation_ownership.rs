//! Nothing below the API trusts a tenant-written field to locate an instance: each instance
//! carries the UID of the Machine that owns it, and the node agent adopts, drives and deletes
//! only what its Machine owns. Each test is an attack (or the race it guards) against a real
//! `kairon up` with runc busybox sandboxes, asserting the refusal or condition AND that the
//! victim's instance is untouched. SECURITY.md's "Instances belong to Machines" names them.

use std::time::Duration;

use serde_json::{Value, json};

use kairon_e2e::{Flags, Kairon, Rest, eventually, hold};
use kairon_runtime_api::InstanceId;
use kairon_runtime_api::types::{CreateVmRequest, Vm, VmState};

const GROUP: &str = "/apis/kairon.zyvor.dev/v1";

fn sandbox(name: &str) -> Value {
    json!({"metadata": {"name": name}, "spec": {"sandbox": {"templateName": "busybox"}, "guestAgent": {"console": true}}})
}

fn uid(m: &Value) -> String {
    m["metadata"]["uid"].as_str().expect("a Machine has a UID").to_string()
}

/// A busybox sandbox made on the runtime directly, as something outside the Machine's own
/// reconcile would (a pool member renamed by a claim, a copy, another Machine's instance).
async fn instance(k: &Kairon, name: &str, owner: Option<&str>) -> Vm {
    let req = CreateVmRequest {
        name: name.into(),
        sandbox: Some(kairon_model::SandboxSpec { template_name: Some("busybox".into()) }),
        owner_uid: owner.map(str::to_string),
        ..Default::default()
    };
    let rt = k.runtime().unwrap();
    eventually("the busybox template to be ready", Duration::from_secs(120), || async {
        match rt.create(&req).await {
            Ok(vm) => Some(vm),
            Err(e) if e.to_string().contains("not ready yet") => None,
            Err(e) => panic!("creating {name}: {e}"),
        }
    })
    .await
}

/// Every instance holding `name` on the runtime.
async fn named(k: &Kairon, name: &str) -> Vec<Vm> {
    k.runtime().unwrap().list().await.unwrap().into_iter().filter(|v| v.name == name).collect()
}

/// The Machine, once a Ready condition with `reason` is on it.
async fn condition(rest: &Rest, ns: &str, name: &str, reason: &str) -> Value {
    eventually(&format!("{ns}/{name} to report {reason}"), Duration::from_secs(60), || async {
        let m = rest.get(&format!("/api/v1/machines/{ns}/{name}")).await.ok();
        let found = m["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Ready" && c["status"] == "False" && c["reason"] == reason);
        found.then_some(m)
    })
    .await
}

/// Polls until the Machine is gone (its finalizer released by the node agent).
async fn gone(rest: &Rest, ns: &str, name: &str) {
    eventually(&format!("{ns}/{name} to be gone"), Duration::from_secs(90), || async {
        (rest.get(&format!("/api/v1/machines/{ns}/{name}")).await.status == 404).then_some(())
    })
    .await;
}

fn ready_message(m: &Value) -> String {
    let c = m["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "Ready").unwrap();
    c["message"].as_str().unwrap().to_string()
}

/// The victim's sandbox answers a command as before.
async fn exec_ok(rest: &Rest, ns: &str, name: &str) {
    let out =
        rest.post(&format!("/api/v1/machines/{ns}/{name}/exec"), json!({"command": ["echo", "still here"]})).await.ok();
    assert_eq!(out["stdout"], "still here\n", "the victim's sandbox answers as before");
}

/// (a) The live attack, now with the status write done by an admin (tenants can no longer
/// write status): Machine B's status.runtimeID points at Machine A's instance. The node agent
/// never adopts A's instance for B, and deleting B deletes B's own instance only.
#[tokio::test(flavor = "multi_thread")]
async fn a_runtime_id_pointing_at_another_machines_instance_is_neither_adopted_nor_deleted() {
    let k = Kairon::start_with(&Flags::fast()).unwrap();
    let admin = k.rest().unwrap();
    admin.post("/api/v1/machines/agents", sandbox("victim")).await.ok();
    admin.post("/api/v1/machines/b", sandbox("mine")).await.ok();
    let a = admin.running("agents", "victim").await;
    let b = admin.running("b", "mine").await;
    let id_a = a["status"]["runtimeID"].as_str().unwrap().to_string();
    let id_b = b["status"]["runtimeID"].as_str().unwrap().to_string();
    let rt = k.runtime().unwrap();
    let inst_a = rt.get(&InstanceId::new(&id_a).unwrap()).await.unwrap();
    assert_eq!(inst_a.owner_uid.as_deref(), Some(uid(&a).as_str()), "the node agent creates with the Machine's UID");

    // Point B at A's instance.
    let status = format!("{GROUP}/namespaces/b/machines/mine/status");
    let evil = json!({"status": {"runtimeID": id_a}});
    let req = admin
        .request(reqwest::Method::PATCH, &status)
        .header("content-type", "application/merge-patch+json")
        .body(evil.to_string());
    let marker = "/tmp/only-in-a";
    admin.post("/api/v1/machines/agents/victim/exec", json!({"command": ["touch", marker]})).await.ok();
    let patched = admin.send(req).await;
    assert_eq!(patched.status, 200, "{patched:?}");
    // Whether the node agent has put B's status right yet or not, a guest operation through B
    // never lands in A's sandbox: the api checks the owner of the instance the id names.
    for _ in 0..5 {
        let probe = admin.post("/api/v1/machines/b/mine/exec", json!({"command": ["ls", marker]})).await;
        assert!(
            probe.status == 409 || (probe.status == 200 && probe.body["exitCode"] != 0),
            "an exec through B reached A's sandbox: {probe:?}"
        );
    }

    // The node agent finds B's own instance by its owner, never A's by the id it was given.
    let back = eventually("B's runtimeID back on B's own instance", Duration::from_secs(30), || async {
        let m = admin.get("/api/v1/machines/b/mine").await.ok();
        (m["status"]["runtimeID"] == json!(id_b)).then_some(m)
    })
    .await;
    assert_eq!(back["status"]["phase"], "Running");

    // Again, and delete B at once: its cleanup must not follow the runtimeID either.
    let req = admin
        .request(reqwest::Method::PATCH, &status)
        .header("content-type", "application/merge-patch+json")
        .body(evil.to_string());
    assert_eq!(admin.send(req).await.status, 200);
    admin.delete("/api/v1/machines/b/mine").await.ok();
    gone(&admin, "b", "mine").await;
    hold(Duration::from_secs(2), "B's cleanup must not follow the runtimeID to A's instance").await;

    let after = rt.get(&InstanceId::new(&id_a).unwrap()).await.expect("A's instance survives B's deletion");
    assert_eq!(after.state, VmState::Running);
    assert_eq!(after.owner_uid, inst_a.owner_uid, "A's instance still belongs to A");
    assert_eq!(after.pid, inst_a.pid, "A's sandbox was not restarted");
    assert!(rt.get(&InstanceId::new(&id_b).unwrap()).await.unwrap_err().is_not_found(), "B's own instance went");
    let v = admin.get("/api/v1/machines/agents/victim").await.ok();
    assert_eq!((v["status"]["phase"].as_str(), v["status"]["runtimeID"].as_str()), (Some("Running"), Some(&*id_a)));
    exec_ok(&admin, "agents", "victim").await;
}

/// (b) The spec's createMachine pool claim still works end to end: the member is unowned until
/// the api stamps the new Machine's UID on it, then the node adopts it. A REST fork's copy is
/// stamped with its new Machine's UID the same way.
#[tokio::test(flavor = "multi_thread")]
async fn a_create_machine_claim_and_a_fork_are_stamped_with_the_new_machines_uid() {
    let k = Kairon::start_with(&Flags::fast()).unwrap();
    let admin = k.rest().unwrap();
    let pool = json!({"name": "warm", "size": 1, "template": {"name": "x", "ownerUid": "forged",
                      "sandbox": {"templateName": "busybox"}, "guestAgent": {"console": true}}});
    eventually("the node to register", Duration::from_secs(60), || async {
        (admin.get("/api/v1/nodes/local").await.status == 200).then_some(())
    })
    .await;
    let created = admin.post("/api/v1/nodes/local/pools", pool).await;
    assert_eq!(created.status, 201, "{created:?}");
    let member = eventually("a ready member", Duration::from_secs(120), || async {
        let p = admin.get("/api/v1/nodes/local/pools/warm").await.ok();
        p["members"].as_array().unwrap().iter().find(|m| m["state"] == "Ready").cloned()
    })
    .await;
    let rt = k.runtime().unwrap();
    let unclaimed = rt.get(&InstanceId::new(member["id"].as_str().unwrap()).unwrap()).await.unwrap();
    assert_eq!(unclaimed.owner_uid, None, "a pool member is nobody's, whatever its template says");

    let claimed = admin
        .post(
            "/api/v1/nodes/local/pools/warm/claim",
            json!({"createMachine": true, "namespace": "agents", "machineName": "from-pool"}),
        )
        .await
        .ok();
    assert!(claimed["machineError"].is_null(), "{claimed}");
    let m_uid = uid(&claimed["machine"]);
    assert_eq!(claimed["vm"]["ownerUid"], json!(m_uid), "{claimed}");
    let m = admin.running("agents", "from-pool").await;
    assert_eq!(m["status"]["runtimeID"], claimed["vm"]["id"], "the node adopted the claimed member");
    let owned = named(&k, "kairon-agents-from-pool").await;
    assert_eq!(owned.len(), 1, "no duplicate instance");
    assert_eq!(owned[0].owner_uid.as_deref(), Some(m_uid.as_str()));
    exec_ok(&admin, "agents", "from-pool").await;

    // A second stamp of the same instance is refused: compare-and-set from unowned only.
    let again = rt.set_owner(&owned[0].id, None, "someone-else").await.unwrap_err();
    assert!(matches!(again, kairon_runtime_api::ClientError::Api { status: 409, .. }), "{again}");

    let fork = admin.post("/api/v1/machines/agents/from-pool/fork", json!({"name": "copy"})).await.ok();
    let c_uid = uid(&fork["machine"]);
    let c = admin.running("agents", "copy").await;
    let copy = rt.get(&InstanceId::new(c["status"]["runtimeID"].as_str().unwrap()).unwrap()).await.unwrap();
    assert_eq!(copy.name, "kairon-agents-copy");
    assert_eq!(copy.owner_uid.as_deref(), Some(c_uid.as_str()), "the copy is its new Machine's");
    assert_eq!(named(&k, "kairon-agents-copy").await.len(), 1);
}

/// (c) An unowned instance holding a new Machine's runtime name (as a claim or copy is before
/// the api stamps it, or one made outside Kairon): the node agent neither adopts nor replaces
/// nor deletes it, and says AdoptionPending; once the owner is stamped it adopts.
#[tokio::test(flavor = "multi_thread")]
async fn an_unowned_instance_with_a_machines_runtime_name_is_not_adopted() {
    let k = Kairon::start_with(&Flags::fast()).unwrap();
    let admin = k.rest().unwrap();
    let rt = k.runtime().unwrap();
    let early = instance(&k, "kairon-agents-early", None).await;

    admin.post("/api/v1/machines/agents", sandbox("early")).await.ok();
    let m = condition(&admin, "agents", "early", "AdoptionPending").await;
    assert!(ready_message(&m).contains("unowned instance holds the runtime name kairon-agents-early"), "{m}");
    assert_ne!(m["status"]["runtimeID"], json!(early.id.to_string()), "not adopted: {m}");
    hold(Duration::from_secs(3), "the node agent must neither adopt, replace nor delete the unowned instance").await;
    let still = named(&k, "kairon-agents-early").await;
    assert_eq!(still.len(), 1, "nothing created next to it");
    assert_eq!((still[0].id.as_str(), still[0].owner_uid.as_ref()), (early.id.as_str(), None));
    assert_eq!((still[0].state, still[0].pid), (VmState::Running, early.pid), "the instance is untouched");

    // Stamped with the Machine's UID (what the api does after a claim), it is adopted.
    rt.set_owner(&early.id, None, &uid(&m)).await.unwrap();
    let adopted = admin.running("agents", "early").await;
    assert_eq!(adopted["status"]["runtimeID"], json!(early.id.to_string()));

    // Deleting a Machine whose name an unowned instance holds leaves that instance alone.
    let stray = instance(&k, "kairon-agents-late", None).await;
    admin.post("/api/v1/machines/agents", sandbox("late")).await.ok();
    condition(&admin, "agents", "late", "AdoptionPending").await;
    admin.delete("/api/v1/machines/agents/late").await.ok();
    gone(&admin, "agents", "late").await;
    let left = rt.get(&stray.id).await.expect("the unowned instance is not deleted with the Machine");
    assert_eq!((left.state, left.owner_uid), (VmState::Running, None));
}

/// (d) Two Machines of two namespaces whose runtime names collide (`team`/`x-api` and
/// `team-x`/`api` are both `kairon-team-x-api`): the second gets RuntimeNameTaken and nothing
/// else happens: no create, no adopt, no delete, even when it is deleted.
#[tokio::test(flavor = "multi_thread")]
async fn a_runtime_name_held_by_another_machine_is_reported_and_left_alone() {
    let k = Kairon::start_with(&Flags::fast()).unwrap();
    let admin = k.rest().unwrap();
    let rt = k.runtime().unwrap();
    admin.post("/api/v1/machines/team", sandbox("x-api")).await.ok();
    let first = admin.running("team", "x-api").await;
    let held = rt.get(&InstanceId::new(first["status"]["runtimeID"].as_str().unwrap()).unwrap()).await.unwrap();
    assert_eq!(held.name, "kairon-team-x-api");

    admin.post("/api/v1/machines/team-x", sandbox("api")).await.ok();
    let second = condition(&admin, "team-x", "api", "RuntimeNameTaken").await;
    let why = ready_message(&second);
    assert!(why.contains("held by an instance of another Machine"), "{why}");
    assert!(!why.contains(held.id.as_str()), "the other Machine's instance id is not told: {why}");
    assert!(second["status"]["runtimeID"].is_null(), "{second}");
    eventually("a RuntimeNameTaken event", Duration::from_secs(30), || async {
        let events = admin.get("/api/v1/machines/team-x/api/events").await.ok();
        events.to_string().contains("RuntimeNameTaken").then_some(())
    })
    .await;

    admin.delete("/api/v1/machines/team-x/api").await.ok();
    gone(&admin, "team-x", "api").await;
    let after = named(&k, "kairon-team-x-api").await;
    assert_eq!(after.len(), 1);
    assert_eq!((&after[0].id, &after[0].owner_uid, after[0].pid), (&held.id, &held.owner_uid, held.pid));
    assert_eq!(after[0].state, VmState::Running);
    exec_ok(&admin, "team", "x-api").await;
}

/// (e) The node's sandbox list names every sandbox, but one of a Machine outside the caller's
/// namespaces shows only its ID, state and backend; admins see all.
#[tokio::test(flavor = "multi_thread")]
async fn the_sandbox_list_redacts_sandboxes_outside_the_callers_namespaces() {
    let k = Kairon::start_with(&Flags::fast()).unwrap();
    let admin = k.rest().unwrap();
    admin.post("/api/v1/machines/agents", sandbox("mine")).await.ok();
    admin.post("/api/v1/machines/other", sandbox("theirs")).await.ok();
    let mine = admin.running("agents", "mine").await["status"]["runtimeID"].as_str().unwrap().to_string();
    let theirs = admin.running("other", "theirs").await["status"]["runtimeID"].as_str().unwrap().to_string();
    // An unowned one made outside Kairon, named like a Machine of the caller's namespace.
    let stray = instance(&k, "kairon-agents-stray", None).await;

    let alice = k.rest_as(&k.token("alice", "operator", &["agents"]).unwrap()).unwrap();
    let listed = alice.get("/api/v1/nodes/local/sandboxes").await.ok();
    let items = listed.as_array().unwrap();
    let item = |id: &str| items.iter().find(|v| v["id"] == id).unwrap_or_else(|| panic!("{id} is listed: {listed}"));
    assert_eq!(item(&mine)["name"], "kairon-agents-mine");
    assert!(item(&mine)["spec"].is_object());
    for hidden in [theirs.as_str(), stray.id.as_str()] {
        let mut keys: Vec<&String> = item(hidden).as_object().unwrap().keys().collect();
        keys.sort();
        assert_eq!(keys, ["backend", "id", "state"], "{listed}");
        assert_eq!(item(hidden)["backend"], "runc");
    }
    assert!(!listed.to_string().contains("kairon-other-theirs"), "{listed}");

    let all = admin.get("/api/v1/nodes/local/sandboxes").await.ok();
    let full = all.as_array().unwrap().iter().find(|v| v["id"] == theirs.as_str()).unwrap();
    assert_eq!(full["name"], "kairon-other-theirs", "admins see all: {all}");
}
