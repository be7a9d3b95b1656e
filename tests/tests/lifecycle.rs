//! The lifecycle controller and leader election under `kairon up`, with real runc: idle
//! Machines are paused, stopped or deleted; busy, hand-paused, stopped and lifecycle-less ones
//! are left alone; a migrating one too; max lifetime and ttlSeconds delete; the controller holds
//! its Lease.
//!
//! Hibernate and Halt need the QEMU backend (API validation refuses them for template
//! sandboxes), so they are shown on real VMs booted from the default image.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::events::v1::Event;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use kairon_e2e::{Flags, Kairon, MINUTE, eventually, hold, phase, wait_for_object, wait_gone, wait_phase};
use kairon_model::{Machine, MachineClaim, MachinePhase, MachinePool, PowerState};
use kairon_runtime_api::types::ExecRequest;

fn flags() -> Flags<'static> {
    Flags::fast_activity("1s").min_idle_timeout_seconds("1")
}

const IDLE_SUSPENDED: &str = "kairon.zyvor.dev/idle-suspended";

fn sandbox(name: &str, spec_extra: serde_json::Value, labels: serde_json::Value) -> Machine {
    let mut m = json!({
        "apiVersion": "kairon.zyvor.dev/v1", "kind": "Machine",
        "metadata": {"name": name, "labels": {"kairon.zyvor.dev/sandbox": "true"}},
        "spec": {"sandbox": {"templateName": "busybox"}}
    });
    if let serde_json::Value::Object(extra) = spec_extra {
        for (k, v) in extra {
            m["spec"][k] = v;
        }
    }
    if let serde_json::Value::Object(l) = labels {
        for (k, v) in l {
            m["metadata"]["labels"][k] = v;
        }
    }
    serde_json::from_value(m).unwrap()
}

fn suspended(m: &Machine) -> Option<String> {
    m.annotations().get(IDLE_SUSPENDED).cloned()
}

async fn events(client: &kube::Client, reason: &str, name: &str) -> Vec<Event> {
    let api: Api<Event> = Api::namespaced(client.clone(), "default");
    api.list(&ListParams::default())
        .await
        .map(|l| {
            l.items
                .into_iter()
                .filter(|e| {
                    e.reason.as_deref() == Some(reason)
                        && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
                })
                .collect()
        })
        .unwrap_or_default()
}

async fn wait_event(client: &kube::Client, reason: &str, name: &str) -> Event {
    eventually(&format!("a {reason} event for {name}"), Duration::from_secs(30), || async {
        events(client, reason, name).await.into_iter().next()
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn idle_machines_are_suspended_and_others_left_alone() {
    let k = Kairon::start_with(&flags()).unwrap();
    let client = k.client().await.unwrap();
    let api: Api<Machine> = Api::namespaced(client.clone(), "default");
    let rt = k.runtime().unwrap();
    let pp = PostParams::default();
    let none = json!({});

    // A busy one first, so its loop runs before it could be idle for its timeout. Until the loop
    // starts it *is* idle (since creation), so the timeout leaves room for a loaded CI host to
    // create and start it.
    api.create(&pp, &sandbox("busy", json!({"lifecycle": {"idleTimeoutSeconds": 15}}), none.clone())).await.unwrap();
    for (name, action) in [("idle-pause", "Pause"), ("idle-stop", "Stop"), ("idle-delete", "Delete")] {
        let spec = json!({"lifecycle": {"idleTimeoutSeconds": 3, "idleAction": action}});
        api.create(&pp, &sandbox(name, spec, none.clone())).await.unwrap();
    }
    api.create(&pp, &sandbox("plain", json!({}), none.clone())).await.unwrap();
    let quick = |ps: &str| json!({"lifecycle": {"idleTimeoutSeconds": 1}, "powerState": ps});
    api.create(&pp, &sandbox("by-hand", quick("Paused"), none.clone())).await.unwrap();
    api.create(&pp, &sandbox("stopped", quick("Stopped"), none.clone())).await.unwrap();

    let m = wait_phase(&api, "busy", MachinePhase::Running, MINUTE).await;
    let id = kairon_runtime_api::InstanceId::new(m.status.as_ref().unwrap().runtime_id.clone().unwrap()).unwrap();
    let busy = ExecRequest {
        command: vec!["sh".into(), "-c".into(), "sh -c 'while :; do :; done' & wait".into()],
        ..Default::default()
    };
    rt.start_process(&id, &busy).await.unwrap();
    let busy_since = Instant::now();

    // Pause: powerState Paused, the annotation, and the node follows.
    let m = wait_phase(&api, "idle-pause", MachinePhase::Paused, MINUTE).await;
    assert_eq!(m.spec.power_state, Some(PowerState::Paused));
    assert!(suspended(&m).is_some_and(|v| v.starts_with("Pause")), "{:?}", m.annotations());
    // Stop.
    let m = wait_phase(&api, "idle-stop", MachinePhase::Stopped, MINUTE).await;
    assert_eq!(m.spec.power_state, Some(PowerState::Stopped));
    assert!(suspended(&m).is_some_and(|v| v.starts_with("Stop")));
    // Delete.
    wait_gone(&api, "idle-delete", Duration::from_secs(60)).await;

    let ev = wait_event(&client, "IdleSuspended", "idle-pause").await;
    let note = ev.note.clone().unwrap_or_default();
    assert!(note.contains("(threshold 3s): paused"), "{note}");
    assert!(note.starts_with("idle for "), "{note}");
    wait_event(&client, "IdleSuspended", "idle-stop").await;
    wait_event(&client, "IdleSuspended", "idle-delete").await;

    let metrics = k.kubectl_ok(&["get", "--raw", "/metrics"]);
    assert!(metrics.contains("kairon_lifecycle_actions_total{action=\"Pause\"}"), "{metrics}");
    assert!(metrics.contains("kairon_lifecycle_actions_total{action=\"Stop\"}"), "{metrics}");
    assert!(metrics.contains("kairon_lifecycle_actions_total{action=\"Delete\"}"), "{metrics}");

    // The busy one outlives its 15 s timeout (twice over) untouched.
    let left = Duration::from_secs(30).saturating_sub(busy_since.elapsed());
    hold(left, "busy for 30 s, twice its idle timeout: it must not be suspended").await;
    let m = api.get("busy").await.unwrap();
    assert_eq!(phase(&m), Some(MachinePhase::Running), "a busy Machine keeps running");
    assert_eq!(m.spec.power_state, None);
    assert_eq!(suspended(&m), None);

    // Without spec.lifecycle, paused by hand, or stopped: never touched.
    let m = api.get("plain").await.unwrap();
    assert_eq!((m.spec.power_state, suspended(&m)), (None, None));
    assert_eq!(phase(&m), Some(MachinePhase::Running));
    for (name, ps) in [("by-hand", PowerState::Paused), ("stopped", PowerState::Stopped)] {
        let m = api.get(name).await.unwrap();
        assert_eq!(m.spec.power_state, Some(ps), "{name}");
        assert_eq!(suspended(&m), None, "{name}");
        assert!(events(&client, "IdleSuspended", name).await.is_empty(), "{name}");
    }
    assert!(events(&client, "IdleSuspended", "busy").await.is_empty());
    assert!(events(&client, "IdleSuspended", "plain").await.is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn quiet_vms_are_hibernated_and_halted() {
    // The default image, built once per machine (scripts/test runs `kairon image` first).
    let images = kairon_runtime::vm::image::images_dir(&std::env::temp_dir().join("kairon-images"));
    let image = kairon_runtime::vm::image::ensure_default_image(&images, &Default::default()).await.unwrap();
    let k = Kairon::start_with(&flags()).unwrap();
    let client = k.client().await.unwrap();
    let api: Api<Machine> = Api::namespaced(client.clone(), "default");
    for (name, action) in [("idle-hibernate", "Hibernate"), ("idle-halt", "Halt")] {
        // At the default idle threshold (50 millicores): under TCG (software emulation) QEMU's
        // own threads cost more than that while the guest sleeps, so only its vCPU threads count.
        let m: Machine = serde_json::from_value(json!({
            "apiVersion": "kairon.zyvor.dev/v1", "kind": "Machine", "metadata": {"name": name},
            "spec": {"image": {"path": image}, "resources": {"cpu": "1", "memory": "256Mi"}, "guestAgent": {"enabled": true},
                     "lifecycle": {"idleTimeoutSeconds": 5, "idleAction": action}}
        }))
        .unwrap();
        api.create(&PostParams::default(), &m).await.unwrap();
    }
    for (name, want, ps, prefix) in [
        ("idle-hibernate", MachinePhase::Hibernated, PowerState::Hibernated, "Hibernate"),
        ("idle-halt", MachinePhase::Halted, PowerState::Halted, "Halt"),
    ] {
        let m = wait_phase(&api, name, want, Duration::from_secs(300)).await;
        assert_eq!(m.spec.power_state, Some(ps), "{name}");
        assert!(suspended(&m).is_some_and(|v| v.starts_with(prefix)), "{name}: {:?}", m.annotations());
        wait_event(&client, "IdleSuspended", name).await;
    }
    let metrics = k.kubectl_ok(&["get", "--raw", "/metrics"]);
    for action in ["Hibernate", "Halt"] {
        assert!(metrics.contains(&format!("kairon_lifecycle_actions_total{{action=\"{action}\"}}")), "{metrics}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn max_lifetime_and_ttl_delete_and_warm_pool_members_are_exempt() {
    let k = Kairon::start_with(&flags()).unwrap();
    let client = k.client().await.unwrap();
    let api: Api<Machine> = Api::namespaced(client.clone(), "default");
    let pp = PostParams::default();
    let max3 = json!({"lifecycle": {"maxLifetimeSeconds": 3}});

    let created = Instant::now();
    api.create(&pp, &sandbox("short", max3.clone(), json!({}))).await.unwrap();
    api.create(&pp, &sandbox("ttl", json!({"ttlSeconds": 3}), json!({}))).await.unwrap();
    api.create(&pp, &sandbox("warm", max3.clone(), json!({"kairon.zyvor.dev/pool": "nopool"}))).await.unwrap();
    // A claimed member whose lifecycle started 8 s after now: it lives until then + 3 s.
    let start = k8s_openapi::jiff::Timestamp::now() + k8s_openapi::jiff::SignedDuration::from_secs(8);
    let mut claimed =
        sandbox("claimed", max3.clone(), json!({"kairon.zyvor.dev/pool": "nopool", "kairon.zyvor.dev/claim": "c"}));
    claimed.annotations_mut().insert("kairon.zyvor.dev/lifecycle-start".into(), format!("{start:.0}"));
    api.create(&pp, &claimed).await.unwrap();

    wait_gone(&api, "short", Duration::from_secs(30)).await;
    assert!(created.elapsed() >= Duration::from_secs(2), "not before its lifetime: {:?}", created.elapsed());
    wait_gone(&api, "ttl", Duration::from_secs(30)).await;
    let ev = wait_event(&client, "LifetimeExpired", "short").await;
    assert!(ev.note.unwrap_or_default().contains("max lifetime of 3s"));
    let ev = wait_event(&client, "LifetimeExpired", "ttl").await;
    assert!(ev.note.unwrap_or_default().contains("ttlSeconds of 3s"));

    // Past creation + 3 s, the claimed one (lifecycle-start + 3 s) and the warm one remain.
    let wait = Duration::from_secs(6).saturating_sub(created.elapsed());
    hold(wait, "past creation + 3 s: the claimed and the warm one must not be deleted yet").await;
    for name in ["claimed", "warm"] {
        let m = api.get(name).await.unwrap();
        assert!(m.metadata.deletion_timestamp.is_none(), "{name} is not being deleted");
    }
    wait_gone(&api, "claimed", Duration::from_secs(30)).await;
    assert!(created.elapsed() >= Duration::from_secs(10), "claimed lived until lifecycle-start + 3 s");
    wait_event(&client, "LifetimeExpired", "claimed").await;

    // The warm member outlived its lifetime; once claimed, it expires.
    hold(Duration::from_secs(1), "the warm member must outlive its lifetime until claimed").await;
    let m = api.get("warm").await.unwrap();
    assert!(m.metadata.deletion_timestamp.is_none());
    let patch = json!({"metadata": {"labels": {"kairon.zyvor.dev/claim": "c2"}}});
    api.patch("warm", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    wait_gone(&api, "warm", Duration::from_secs(30)).await;
    wait_event(&client, "LifetimeExpired", "warm").await;
}

fn expires_at(m: &Machine) -> Option<i64> {
    m.status.as_ref()?.lifecycle.as_ref()?.expires_at.as_ref().map(|t| t.0.as_second())
}

fn created(m: &Machine) -> i64 {
    m.metadata.creation_timestamp.as_ref().unwrap().0.as_second()
}

async fn wait_expires_at(api: &Api<Machine>, name: &str, want: i64) -> Machine {
    wait_for_object(api, name, &format!("{name}'s status.lifecycle.expiresAt to be {want}"), MINUTE, |m| {
        expires_at(m) == Some(want)
    })
    .await
}

/// `status.lifecycle.expiresAt` is the earliest of max lifetime, ttlSeconds and the claim's TTL;
/// `extend` moves it (lengthening each deadline that would end the Machine sooner, the claim's
/// too), answers the new end, and refuses what it cannot do with a reason.
#[tokio::test(flavor = "multi_thread")]
async fn extend_moves_the_end_and_expires_at_follows() {
    let k = Kairon::start_with(&flags()).unwrap();
    let client = k.client().await.unwrap();
    let rest = k.rest().unwrap();
    let api: Api<Machine> = Api::namespaced(client.clone(), "default");
    let pp = PostParams::default();
    let both = json!({"lifecycle": {"maxLifetimeSeconds": 3600}, "ttlSeconds": 600});
    let m = api.create(&pp, &sandbox("both", both, json!({}))).await.unwrap();
    let c = created(&m);
    wait_expires_at(&api, "both", c + 600).await;

    let base = "/api/v1/machines/default/both/extend";
    // A dry run answers the new end and stores nothing (the node agent may write the status
    // meanwhile: the spec and its generation are what must not move).
    let before = api.get("both").await.unwrap();
    let dry = rest.post(&format!("{base}?dryRun=All"), json!({"seconds": 300})).await.ok();
    assert_eq!(dry["expiresAt"].as_str().map(ts), Some(c + 900), "{dry}");
    let after = api.get("both").await.unwrap();
    assert_eq!((after.spec.ttl_seconds, after.metadata.generation), (Some(600), before.metadata.generation));

    let ext = rest.post(base, json!({"seconds": 300})).await.ok();
    assert_eq!(ext["expiresAt"].as_str().map(ts), Some(c + 900), "{ext}");
    assert_eq!(ext["machine"]["spec"]["ttlSeconds"], 900, "the earlier deadline moved: {ext}");
    assert_eq!(ext["machine"]["spec"]["lifecycle"]["maxLifetimeSeconds"], 3600, "a later one is kept: {ext}");
    wait_expires_at(&api, "both", c + 900).await;
    // Past the max lifetime: both move.
    let ext = rest.post(base, json!({"seconds": 3000})).await.ok();
    assert_eq!(ext["expiresAt"].as_str().map(ts), Some(c + 3900), "{ext}");
    assert_eq!(ext["machine"]["spec"]["ttlSeconds"], 3900);
    assert_eq!(ext["machine"]["spec"]["lifecycle"]["maxLifetimeSeconds"], 3900);
    wait_expires_at(&api, "both", c + 3900).await;

    // Refusals, each with its reason; none changes anything.
    for (body, status, reason) in [
        (json!({"seconds": 0}), 422, "Invalid"),
        (json!({"seconds": 31_536_001}), 422, "Invalid"),
        (json!({"seconds": "soon"}), 422, "Invalid"),
        (json!({}), 422, "Invalid"),
    ] {
        let r = rest.post(base, body.clone()).await;
        assert_eq!((r.status, r.reason()), (status, reason), "{body}: {r:?}");
    }
    let r = rest.post(base, json!({"seconds": 0})).await;
    assert!(r.message().contains("must be 1 to 31536000"), "{r:?}");
    api.create(&pp, &sandbox("forever", json!({}), json!({}))).await.unwrap();
    let r = rest.post("/api/v1/machines/default/forever/extend", json!({"seconds": 60})).await;
    assert_eq!((r.status, r.reason()), (409, "NoDeadline"), "{r:?}");
    assert!(r.message().contains("nothing to extend"), "{r:?}");
    let r = rest.post("/api/v1/machines/default/nosuch/extend", json!({"seconds": 60})).await;
    assert_eq!((r.status, r.reason()), (404, "NotFound"), "{r:?}");
    assert_eq!(expires_at(&api.get("forever").await.unwrap()), None);

    // Set timeout: a Machine with no deadline ends `seconds` from now (its ttlSeconds counted
    // from creation), later or sooner; out of range is a 422.
    let timeout = "/api/v1/machines/default/forever/timeout";
    for bad in [json!({"seconds": 0}), json!({"seconds": 31_536_001}), json!({})] {
        let r = rest.post(timeout, bad.clone()).await;
        assert_eq!((r.status, r.reason()), (422, "Invalid"), "{bad}: {r:?}");
    }
    let now = k8s_openapi::jiff::Timestamp::now().as_second();
    let r = rest.post(timeout, json!({"seconds": 1200})).await.ok();
    let at: k8s_openapi::jiff::Timestamp = r["expiresAt"].as_str().unwrap().parse().unwrap();
    assert!((at.as_second() - (now + 1200)).abs() <= 2, "ends 1200 s from now: {r}");
    let forever = wait_expires_at(&api, "forever", at.as_second()).await;
    assert_eq!(forever.spec.ttl_seconds, Some(at.as_second() - created(&forever)), "ttlSeconds counts from creation");
    let r = rest.post(&format!("{timeout}?dryRun=All"), json!({"seconds": 60})).await.ok();
    assert!(r["expiresAt"].as_str().is_some(), "{r}");
    assert_eq!(
        api.get("forever").await.unwrap().spec.ttl_seconds,
        forever.spec.ttl_seconds,
        "a dry run changes nothing"
    );
    rest.post(timeout, json!({"seconds": 2})).await.ok();
    eventually("the Machine gone at its new, sooner end", MINUTE, || async {
        api.get_opt("forever").await.ok().filter(Option::is_none)
    })
    .await;

    // A claimed member: its claim's TTL is its end; extend lengthens the claim's TTL.
    let pools: Api<MachinePool> = Api::namespaced(client.clone(), "default");
    let claims: Api<MachineClaim> = Api::namespaced(client.clone(), "default");
    let pool: MachinePool = serde_json::from_value(json!({
        "apiVersion": "kairon.zyvor.dev/v1", "kind": "MachinePool",
        "metadata": {"name": "p"},
        "spec": {"replicas": 1, "warmPowerState": "Running", "template": {"spec": {
            "sandbox": {"templateName": "busybox"}, "lifecycle": {"maxLifetimeSeconds": 7200}}}}
    }))
    .unwrap();
    pools.create(&pp, &pool).await.unwrap();
    let warm = eventually("a warm member", MINUTE, || async {
        let l = api.list(&ListParams::default().labels("kairon.zyvor.dev/pool=p")).await.ok()?;
        l.items.into_iter().find(|m| phase(m) == Some(MachinePhase::Running))
    })
    .await;
    assert_eq!(expires_at(&warm), None, "a warm member has no end yet");
    let r = rest.post(&format!("/api/v1/machines/default/{}/extend", warm.name_any()), json!({"seconds": 60})).await;
    assert_eq!((r.status, r.reason()), (409, "NoDeadline"), "{r:?}");
    assert!(r.message().contains("warm pool member"), "{r:?}");

    let claim: MachineClaim = serde_json::from_value(json!({
        "apiVersion": "kairon.zyvor.dev/v1", "kind": "MachineClaim",
        "metadata": {"name": "c"}, "spec": {"poolName": "p", "ttlSeconds": 600}
    }))
    .unwrap();
    claims.create(&pp, &claim).await.unwrap();
    let bound = wait_for_object(&claims, "c", "claim c bound", MINUTE, |c| {
        c.status.as_ref().is_some_and(|s| s.bound_time.is_some() && s.machine_name.is_some())
    })
    .await;
    let status = bound.status.unwrap();
    let (member, at) = (status.machine_name.unwrap(), status.bound_time.unwrap().0.as_second());
    wait_expires_at(&api, &member, at + 600).await;
    let ext = rest.post(&format!("/api/v1/machines/default/{member}/extend"), json!({"seconds": 120})).await.ok();
    assert_eq!(ext["expiresAt"].as_str().map(ts), Some(at + 720), "{ext}");
    assert_eq!(claims.get("c").await.unwrap().spec.ttl_seconds, Some(720), "the claim's TTL moved");
    assert_eq!(ext["machine"]["spec"]["lifecycle"]["maxLifetimeSeconds"], 7200, "the member's own is later");
    // The claim's change reaches the Machine's status (the controller watches claims).
    wait_expires_at(&api, &member, at + 720).await;
    // A change to the claim alone moves it too.
    let patch = json!({"spec": {"ttlSeconds": 300}});
    claims.patch("c", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    wait_expires_at(&api, &member, at + 300).await;
}

fn ts(s: &str) -> i64 {
    s.parse::<k8s_openapi::jiff::Timestamp>().unwrap().as_second()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_controller_holds_its_lease() {
    let k = Kairon::start_with(&["--test-lease-duration", "3s"]).unwrap();
    let leases: Api<Lease> = Api::namespaced(k.client().await.unwrap(), "kairon-system");
    let first = eventually("the controller Lease", Duration::from_secs(30), || async {
        leases.get_opt("kairon-controller").await.ok().flatten()
    })
    .await;
    let spec = first.spec.clone().unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("kairon-controller-local"));
    assert_eq!(spec.lease_duration_seconds, Some(3));
    let renewed = spec.renew_time.unwrap().0;
    // It keeps renewing (every lease duration / 3).
    eventually("the Lease renewed", Duration::from_secs(15), || async {
        let l = leases.get("kairon-controller").await.ok()?;
        let s = l.spec?;
        (s.holder_identity.as_deref() == Some("kairon-controller-local") && s.renew_time?.0 > renewed).then_some(())
    })
    .await;
}

/// A Machine the node reports Migrating is never suspended, even long past its idle timeout;
/// a Running one beside it is. The node is simulated here (its status written through the status
/// subresource, on an API with no node agent) because migration needs a second node, and the
/// controllers run on their own (`kairon controller`).
#[tokio::test(flavor = "multi_thread")]
async fn a_migrating_machine_is_never_suspended() {
    let k = Kairon::start_with(&["--no-runtime", "--test-min-idle-timeout-seconds", "1"]).unwrap();
    let kubeconfig = k.kubeconfig.to_string_lossy().to_string();
    let _controller = kairon_e2e::Process::start(
        &["controller", "--kubeconfig", &kubeconfig, "--identity", "solo", "--test-min-idle-timeout-seconds", "1"],
        "is up",
    )
    .unwrap();
    let client = k.client().await.unwrap();
    let api: Api<Machine> = Api::namespaced(client.clone(), "default");
    for (name, phase) in [("moving", "Migrating"), ("idle", "Running")] {
        let spec = json!({"lifecycle": {"idleTimeoutSeconds": 1, "idleAction": "Pause"}});
        api.create(&PostParams::default(), &sandbox(name, spec, json!({}))).await.unwrap();
        // The scheduler first marks it Pending (no node here); then the simulated node takes it.
        eventually(&format!("{name} to be marked unschedulable"), Duration::from_secs(30), || async {
            let m = api.get(name).await.ok()?;
            m.status?.conditions.iter().any(|c| c.type_ == "Scheduled").then_some(())
        })
        .await;
        let status = json!({"status": {"phase": phase, "nodeName": "elsewhere"}});
        api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
    }
    let m = eventually("the Running one to be paused", Duration::from_secs(60), || async {
        api.get("idle").await.ok().filter(|m| m.spec.power_state == Some(PowerState::Paused))
    })
    .await;
    assert!(suspended(&m).is_some());
    wait_event(&client, "IdleSuspended", "idle").await;
    // Well past its timeout too, and the controller has evidently run: untouched.
    hold(Duration::from_secs(3), "past its idle timeout, a Migrating Machine must not be suspended").await;
    let m = api.get("moving").await.unwrap();
    assert_eq!((m.spec.power_state, suspended(&m)), (None, None));
    assert!(events(&client, "IdleSuspended", "moving").await.is_empty());
}

/// Two `kairon controller`s: one leads, the other stands by; the leader stopped cleanly
/// (SIGTERM) gives the Lease up and the other takes it.
#[tokio::test(flavor = "multi_thread")]
async fn a_stopped_controller_hands_its_lease_over() {
    let k = Kairon::start_with(&["--no-runtime"]).unwrap();
    let kubeconfig = k.kubeconfig.to_string_lossy().to_string();
    let start = |id: &'static str| {
        kairon_e2e::Process::start(
            &["controller", "--kubeconfig", &kubeconfig, "--identity", id, "--test-lease-duration", "90s"],
            "is up",
        )
        .unwrap()
    };
    let leases: Api<Lease> = Api::namespaced(k.client().await.unwrap(), "kairon-system");
    let holder =
        || async { leases.get_opt("kairon-controller").await.ok().flatten().and_then(|l| l.spec?.holder_identity) };
    let mut first = start("first");
    eventually("first to lead", Duration::from_secs(30), || async { (holder().await? == "first").then_some(()) }).await;
    let _second = start("second");
    // With a 90 s lease (renewed every 30 s), only a release lets the second take over within
    // the wait below.
    std::process::Command::new("kill").args(["-TERM", &first.child.id().to_string()]).status().unwrap();
    let status = first.child.wait().unwrap();
    assert!(status.success(), "a clean stop: {status:?}");
    eventually("second to lead", Duration::from_secs(30), || async { (holder().await? == "second").then_some(()) })
        .await;
}
