//! The hot path stays off runc: a warm claim plus its first exec, and a wake from an idle Pause
//! plus the exec that woke it, start no `runc` process for the sandbox (the runtime counts them
//! per sandbox). Exec goes through the agent inside the sandbox, resume through the freezer.
//! Independent of timing: only the counts are compared.

use std::time::Duration;

use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use kairon_e2e::{Flags, Kairon, Rest, eventually};
use kairon_model::Machine;
use kairon_runtime_api::InstanceId;

const NS: &str = "hot";

async fn runc_count(k: &Kairon, id: &InstanceId) -> u64 {
    let stats = k.runtime().unwrap().stats(id).await.unwrap();
    stats.runc_invocations.expect("a sandbox's stats count its runc processes")
}

async fn runtime_id(rest: &Rest, name: &str) -> InstanceId {
    let m = rest.get(&format!("/api/v1/machines/{NS}/{name}")).await;
    let id = m.body["status"]["runtimeID"].as_str().unwrap_or_else(|| panic!("{name} has no runtime id: {}", m.body));
    InstanceId::new(id.to_string()).unwrap()
}

async fn exec_true(rest: &Rest, name: &str) {
    let r = rest.post(&format!("/api/v1/machines/{NS}/{name}/exec"), json!({"command": ["true"]})).await;
    assert_eq!((r.status, &r.body["exitCode"]), (200, &json!(0)), "{:?}", r.body);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_warm_claim_and_a_wake_start_no_runc_process() {
    let k = Kairon::start_with(&Flags::fast_activity("1s")).unwrap();
    let rest = k.rest().unwrap();

    // A Paused pool of one: its only member is the one the claim gets.
    let pool = rest
        .post(
            &format!("/api/v1/machinepools/{NS}"),
            json!({"metadata": {"name": "warm"},
                   "spec": {"replicas": 1, "warmPowerState": "Paused", "warmupSeconds": 1,
                            "template": {"metadata": {"labels": {"kairon.zyvor.dev/sandbox": "true"}},
                                         "spec": {"sandbox": {"templateName": "busybox"}, "guestAgent": {"console": true},
                                                  "lifecycle": {"wakeOnConnect": true, "idleTimeoutSeconds": 60}}}}}),
        )
        .await;
    assert_eq!(pool.status, 201, "{:?}", pool.body);
    eventually("the pool's member to be warm", Duration::from_secs(120), || async {
        let p = rest.get(&format!("/api/v1/machinepools/{NS}/warm")).await;
        (p.body["status"]["warm"].as_i64() == Some(1)).then_some(())
    })
    .await;
    let members = rest.get(&format!("/api/v1/machines/{NS}?labelSelector=kairon.zyvor.dev/pool%3Dwarm")).await;
    let member = members.body["items"][0]["metadata"]["name"].as_str().expect("one member").to_string();
    let id = runtime_id(&rest, &member).await;
    let before = runc_count(&k, &id).await;

    let claim = rest
        .post(
            &format!("/api/v1/machineclaims/{NS}"),
            json!({"metadata": {"name": "job"}, "spec": {"poolName": "warm"}}),
        )
        .await;
    assert_eq!(claim.status, 201, "{:?}", claim.body);
    let bound = rest.get(&format!("/api/v1/machineclaims/{NS}/job/wait?phase=Bound&timeoutSeconds=60")).await;
    assert_eq!(bound.status, 200, "{:?}", bound.body);
    assert_eq!(bound.body["status"]["machineName"], json!(member));
    exec_true(&rest, &member).await;
    assert_eq!(runc_count(&k, &id).await, before, "a warm claim and its first exec start no runc process");

    // An idle Pause as the lifecycle controller writes it, then the exec that wakes it.
    let machines: Api<Machine> = Api::namespaced(k.client().await.unwrap(), NS);
    for _ in 0..3 {
        let idle = json!({"spec": {"powerState": "Paused"},
                          "metadata": {"annotations": {"kairon.zyvor.dev/idle-suspended": "Pause"}}});
        machines.patch(&member, &PatchParams::default(), &Patch::Merge(&idle)).await.unwrap();
        let paused = rest.get(&format!("/api/v1/machines/{NS}/{member}/wait?phase=Paused&timeoutSeconds=60")).await;
        assert_eq!(paused.status, 200, "{:?}", paused.body);
        let before = runc_count(&k, &id).await;
        exec_true(&rest, &member).await;
        assert_eq!(runc_count(&k, &id).await, before, "a wake and its exec start no runc process");
        // Woken: Running again before the next idle Pause.
        let running = rest.wait_phase(NS, &member, "Running", 60).await;
        assert_eq!(running.status, 200, "{:?}", running.body);
    }
}
