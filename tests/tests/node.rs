//! The node agent and the scheduler under `kairon up`, with real runc: Machines follow
//! `spec.powerState`, land on nodes by backend and capacity, report activity, and survive a
//! kill -9 of their node agent.

use std::collections::BTreeSet;
use std::time::Duration;

use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

use kairon_e2e::{
    Flags, Kairon, MINUTE, Process, SandboxCleanup, SeparateNode, during, eventually, hold, phase, wait_for_and_report,
    wait_phase,
};
use kairon_model::{Machine, MachinePhase};
use kairon_runtime_api::types::{ExecRequest, VmState};

/// lastActivityTime written at most every 2 s (a test below checks that spacing).
fn fast() -> Flags<'static> {
    Flags::fast_activity("2s")
}

fn sandbox(name: &str, lifecycle: Option<serde_json::Value>) -> Machine {
    let mut m = json!({
        "apiVersion": "kairon.zyvor.dev/v1", "kind": "Machine",
        "metadata": {"name": name, "labels": {"kairon.zyvor.dev/sandbox": "true"}},
        "spec": {"sandbox": {"templateName": "busybox"}}
    });
    if let Some(l) = lifecycle {
        m["spec"]["lifecycle"] = l;
    }
    serde_json::from_value(m).unwrap()
}

fn condition<'a>(m: &'a Machine, type_: &str) -> Option<&'a kairon_model::Condition> {
    m.status.as_ref()?.conditions.iter().find(|c| c.type_ == type_)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_machine_applied_with_kubectl_follows_its_power_state() {
    let k = Kairon::start_with(&fast()).unwrap();
    let api: Api<Machine> = Api::namespaced(k.client().await.unwrap(), "agents");
    let rt = k.runtime().unwrap();
    let manifest = "apiVersion: kairon.zyvor.dev/v1\nkind: Machine\nmetadata: {name: sb, namespace: agents}\nspec:\n  sandbox: {templateName: busybox}\n";
    let out = k.kubectl_stdin(&["apply", "-f", "-"], manifest);
    assert!(out.status.success(), "{out:?}");

    let m = wait_phase(&api, "sb", MachinePhase::Running, MINUTE).await;
    let id = kairon_runtime_api::InstanceId::new(m.status.as_ref().unwrap().runtime_id.clone().unwrap()).unwrap();
    assert_eq!(m.status.as_ref().unwrap().node_name.as_deref(), Some("local"));
    assert_eq!(rt.get(&id).await.unwrap().name, "kairon-agents-sb");
    assert!(m.finalizers().contains(&"kairon.zyvor.dev/machine".to_string()));

    for (want, phase_want, state) in [
        ("Paused", MachinePhase::Paused, VmState::Paused),
        ("Running", MachinePhase::Running, VmState::Running),
        ("Stopped", MachinePhase::Stopped, VmState::Stopped),
        ("Running", MachinePhase::Running, VmState::Running),
    ] {
        k.kubectl_ok(&[
            "patch",
            "machine",
            "sb",
            "-n",
            "agents",
            "--type",
            "merge",
            "-p",
            &format!("{{\"spec\":{{\"powerState\":\"{want}\"}}}}"),
        ]);
        wait_phase(&api, "sb", phase_want, MINUTE).await;
        assert_eq!(rt.get(&id).await.unwrap().state, state, "the instance follows {want}");
    }

    k.kubectl_ok(&["delete", "machine", "sb", "-n", "agents", "--timeout=60s"]);
    assert!(api.get_opt("sb").await.unwrap().is_none());
    assert!(rt.get(&id).await.unwrap_err().is_not_found(), "the instance is gone with the Machine");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_scheduler_places_by_backend_and_capacity_across_two_nodes() {
    // Each node takes one template sandbox (each requests 100m CPU).
    let k = Kairon::start_with(&fast().with(&["--node-cpu", "100m"])).unwrap();
    let state = tempfile::tempdir().unwrap();
    let _cleanup = SandboxCleanup(state.path().to_path_buf());
    let _second = second_node(&k, state.path(), &["--node-cpu", "100m"]);
    let client = k.client().await.unwrap();
    let nodes: Api<kairon_model::KaironNode> = Api::all(client.clone());
    eventually("two nodes", Duration::from_secs(30), || async {
        (nodes.list(&Default::default()).await.ok()?.items.len() == 2).then_some(())
    })
    .await;

    let api: Api<Machine> = Api::namespaced(client, "default");

    // Template-aware: a template built on the second node only takes its sandbox there, though
    // `local` (first by name, as much room) would be chosen otherwise. Each node reports what
    // it has built with its heartbeat.
    let rest = k.rest().unwrap();
    let built =
        rest.post("/api/v1/nodes/second/templates", json!({"name": "only-b", "imageRef": "builtin:busybox"})).await;
    assert!(built.status < 300, "{built:?}");
    let reported = |node: &'static str, template: &'static str| {
        let nodes = nodes.clone();
        async move {
            let n = nodes.get(node).await.ok()?;
            n.status?.templates?.iter().any(|t| t == template).then_some(())
        }
    };
    eventually("second to report only-b built", MINUTE, || reported("second", "only-b")).await;
    eventually("local to report busybox built", MINUTE, || reported("local", "busybox")).await;
    let local = nodes.get("local").await.unwrap();
    assert!(!local.status.unwrap().templates.unwrap().contains(&"only-b".to_string()));
    let mut only_b = sandbox("t", None);
    only_b.spec.sandbox.as_mut().unwrap().template_name = Some("only-b".into());
    api.create(&PostParams::default(), &only_b).await.unwrap();
    let t = wait_phase(&api, "t", MachinePhase::Running, MINUTE).await;
    assert_eq!(t.status.as_ref().unwrap().node_name.as_deref(), Some("second"), "where only-b is built");
    api.delete("t", &DeleteParams::default()).await.unwrap();
    rest.wait_deleted("default", "t", 60).await;

    for name in ["a", "b"] {
        api.create(&PostParams::default(), &sandbox(name, None)).await.unwrap();
    }
    let a = wait_phase(&api, "a", MachinePhase::Running, MINUTE).await;
    let b = wait_phase(&api, "b", MachinePhase::Running, MINUTE).await;
    let placed: BTreeSet<_> = [&a, &b].iter().map(|m| m.status.as_ref().unwrap().node_name.clone().unwrap()).collect();
    assert_eq!(placed, BTreeSet::from(["local".to_string(), "second".to_string()]), "one on each node");

    // A third fits nowhere, and says why.
    api.create(&PostParams::default(), &sandbox("c", None)).await.unwrap();
    let c = eventually("c to be unschedulable", Duration::from_secs(90), || async {
        api.get("c").await.ok().filter(|m| condition(m, "Scheduled").is_some_and(|c| c.status == "False"))
    })
    .await;
    assert_eq!(phase(&c), Some(MachinePhase::Pending));
    let msg = &condition(&c, "Scheduled").unwrap().message;
    assert!(msg.contains("local: 0m CPU free, 100m needed") && msg.contains("second: 0m CPU free"), "{msg}");

    // Both nodes offer the QEMU backend too, but a VM's whole vCPU fits on neither.
    let nodes_list = nodes.list(&Default::default()).await.unwrap();
    for n in &nodes_list.items {
        assert!(n.spec.backends.contains(&kairon_model::NodeBackend::Vm), "{} offers VMs", n.name_any());
        assert!(n.spec.acceleration.is_some(), "{} reports KVM or TCG", n.name_any());
    }
    let vm: Machine = serde_json::from_value(json!({
        "apiVersion": "kairon.zyvor.dev/v1", "kind": "Machine", "metadata": {"name": "vm"},
        "spec": {"image": {"path": "/var/lib/fluxvm/images/kairon-hw.qcow2"}, "resources": {"cpu": "1", "memory": "512Mi"}}
    }))
    .unwrap();
    api.create(&PostParams::default(), &vm).await.unwrap();
    let vm = eventually("vm to be unschedulable", Duration::from_secs(90), || async {
        api.get("vm").await.ok().filter(|m| condition(m, "Scheduled").is_some_and(|c| c.status == "False"))
    })
    .await;
    let msg = &condition(&vm, "Scheduled").unwrap().message;
    assert!(msg.contains("1000m needed"), "{msg}");

    // Room frees up: the pending sandbox is placed.
    api.delete("a", &DeleteParams::default()).await.unwrap();
    wait_phase(&api, "c", MachinePhase::Running, MINUTE).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn activity_moves_last_activity_time_and_quiet_does_not() {
    let k = Kairon::start_with(&fast()).unwrap();
    let api: Api<Machine> = Api::namespaced(k.client().await.unwrap(), "default");
    let rt = k.runtime().unwrap();
    api.create(&PostParams::default(), &sandbox("quiet", Some(json!({"idleTimeoutSeconds": 600})))).await.unwrap();
    api.create(&PostParams::default(), &sandbox("plain", None)).await.unwrap();
    let m = wait_phase(&api, "quiet", MachinePhase::Running, MINUTE).await;
    let last = |m: &Machine| {
        m.status.as_ref().and_then(|s| s.lifecycle.as_ref()).and_then(|l| l.last_activity_time.clone()).map(|t| t.0)
    };
    let id = kairon_runtime_api::InstanceId::new(m.status.as_ref().unwrap().runtime_id.clone().unwrap()).unwrap();
    let start = eventually("a first lastActivityTime (new VMM process)", Duration::from_secs(20), || async {
        api.get("quiet").await.ok().and_then(|m| last(&m))
    })
    .await;

    // Quiet: nothing moves.
    hold(Duration::from_secs(5), "a quiet guest's lastActivityTime must not move").await;
    assert_eq!(last(&api.get("quiet").await.unwrap()), Some(start), "a quiet guest is idle");
    let plain = wait_phase(&api, "plain", MachinePhase::Running, MINUTE).await;
    assert!(plain.status.unwrap().lifecycle.is_none(), "a Machine without spec.lifecycle is not sampled");

    // Busy in a grandchild process: it moves, at most once per write interval.
    let busy = ExecRequest {
        command: vec!["sh".into(), "-c".into(), "sh -c 'while :; do :; done' & wait".into()],
        ..Default::default()
    };
    rt.start_process(&id, &busy).await.unwrap();
    let mut seen = vec![start];
    // Every value it takes in 9 s: how many, and how far apart.
    let mut window = during(Duration::from_secs(9), Duration::from_millis(200));
    while window.tick().await {
        if let Some(t) = last(&api.get("quiet").await.unwrap())
            && seen.last() != Some(&t)
        {
            seen.push(t);
        }
    }
    assert!(seen.len() >= 3, "a busy guest keeps moving lastActivityTime: {seen:?}");
    for pair in seen.windows(2) {
        assert!(pair[1].as_second() - pair[0].as_second() >= 2, "written at most every 2 s: {seen:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn disk_writes_count_as_activity() {
    let k = Kairon::start_with(&fast()).unwrap();
    let api: Api<Machine> = Api::namespaced(k.client().await.unwrap(), "default");
    let rt = k.runtime().unwrap();
    // CPU never counts here (threshold far above what the writer uses), so only disk can.
    api.create(
        &PostParams::default(),
        &sandbox("disk", Some(json!({"idleTimeoutSeconds": 600, "idleCPUMillicores": 100000}))),
    )
    .await
    .unwrap();
    let m = wait_phase(&api, "disk", MachinePhase::Running, MINUTE).await;
    let id = kairon_runtime_api::InstanceId::new(m.status.as_ref().unwrap().runtime_id.clone().unwrap()).unwrap();
    let last = |m: &Machine| {
        m.status.as_ref().and_then(|s| s.lifecycle.as_ref()).and_then(|l| l.last_activity_time.clone()).map(|t| t.0)
    };
    let start = eventually("a first lastActivityTime", Duration::from_secs(20), || async {
        api.get("disk").await.ok().and_then(|m| last(&m))
    })
    .await;
    hold(Duration::from_secs(3), "with no disk writes yet, lastActivityTime must not move").await;
    assert_eq!(last(&api.get("disk").await.unwrap()), Some(start));
    // ~2 MiB/s of buffered writes, well above 256 KiB/s.
    let writer =
        "i=0; while :; do dd if=/dev/zero of=/tmp/f$((i%4)) bs=64k count=32 2>/dev/null; i=$((i+1)); sleep 1; done";
    rt.start_process(
        &id,
        &ExecRequest { command: vec!["sh".into(), "-c".into(), writer.into()], ..Default::default() },
    )
    .await
    .unwrap();
    eventually("disk writes to move lastActivityTime", Duration::from_secs(15), || async {
        api.get("disk").await.ok().and_then(|m| last(&m)).filter(|t| *t > start)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn errors_reach_the_user_as_conditions_and_events() {
    let k = Kairon::start_with(&fast()).unwrap();
    let api: Api<Machine> = Api::namespaced(k.client().await.unwrap(), "default");
    let mut missing = sandbox("missing", None);
    missing.spec.sandbox = Some(kairon_model::SandboxSpec { template_name: Some("alpine-agent".into()) });
    api.create(&PostParams::default(), &missing).await.unwrap();
    let m = eventually("a TemplateNotFound condition", Duration::from_secs(30), || async {
        api.get("missing").await.ok().filter(|m| condition(m, "Ready").is_some_and(|c| c.reason == "TemplateNotFound"))
    })
    .await;
    assert!(condition(&m, "Ready").unwrap().message.contains("template \"alpine-agent\" does not exist on node local"));
    let described = k.kubectl_ok(&["describe", "machine", "missing"]);
    assert!(described.contains("TemplateNotFound"), "{described}");

    api.create(&PostParams::default(), &sandbox("frozen", None)).await.unwrap();
    wait_phase(&api, "frozen", MachinePhase::Running, MINUTE).await;
    let patch = json!({"metadata": {"annotations": {"kairon.zyvor.dev/fs-frozen-until": "2030-01-01T00:00:00Z"}}});
    api.patch("frozen", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    let m = eventually("a FreezeUnsupported condition", Duration::from_secs(30), || async {
        api.get("frozen").await.ok().filter(|m| condition(m, "FilesystemFrozen").is_some())
    })
    .await;
    let c = condition(&m, "FilesystemFrozen").unwrap();
    assert_eq!((c.status.as_str(), c.reason.as_str()), ("False", "FreezeUnsupported"));
    assert!(!m.annotations().contains_key("kairon.zyvor.dev/fs-frozen"), "never confirmed on a sandbox");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_node_agent_creates_nothing_twice_and_loses_nothing() {
    let k = Kairon::start_with(&["--no-runtime"]).unwrap();
    let state = tempfile::tempdir().unwrap();
    let mut node = SeparateNode::start(&k, "killme", state.path(), &[]).unwrap();
    let rt = node.runtime_client().unwrap();
    let api: Api<Machine> = Api::namespaced(k.client().await.unwrap(), "default");
    for n in ["k1", "k2", "k3"] {
        api.create(&PostParams::default(), &sandbox(n, None)).await.unwrap();
    }
    for n in ["k1", "k2", "k3"] {
        wait_phase(&api, n, MachinePhase::Running, MINUTE).await;
    }

    node.kill_agent();
    // While it is down: one more Machine, one deleted, one paused.
    api.create(&PostParams::default(), &sandbox("k4", None)).await.unwrap();
    api.delete("k1", &DeleteParams::default()).await.unwrap();
    api.patch("k2", &PatchParams::default(), &Patch::Merge(json!({"spec": {"powerState": "Paused"}}))).await.unwrap();

    node.start_agent().unwrap();
    wait_phase(&api, "k4", MachinePhase::Running, MINUTE).await;
    wait_phase(&api, "k2", MachinePhase::Paused, MINUTE).await;
    eventually("k1 to be gone", Duration::from_secs(30), || async {
        api.get_opt("k1").await.ok().flatten().is_none().then_some(())
    })
    .await;
    let names: BTreeSet<String> = rt.list().await.unwrap().into_iter().map(|v| v.name).collect();
    let want: BTreeSet<String> = ["k2", "k3", "k4"].iter().map(|n| format!("kairon-default-{n}")).collect();
    assert_eq!(names, want, "one instance per Machine: none twice, none lost");
}

/// Kills the QEMU processes a test's `kairon up` leaves (VMs outlive their runtime on purpose).
struct QemuCleanup(std::path::PathBuf);

impl Drop for QemuCleanup {
    fn drop(&mut self) {
        kairon_runtime::vm::kill_all_under(&self.0);
    }
}

fn in_secs(s: i64) -> String {
    let t = k8s_openapi::jiff::Timestamp::now() + k8s_openapi::jiff::SignedDuration::from_secs(s);
    t.round(k8s_openapi::jiff::Unit::Second).unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_vm_machine_freezes_its_filesystems_until_the_deadline() {
    // The default image, built once per machine (scripts/test runs `kairon image` first).
    let images = kairon_runtime::vm::image::images_dir(&std::env::temp_dir().join("kairon-images"));
    let image = kairon_runtime::vm::image::ensure_default_image(&images, &Default::default()).await.unwrap();
    let k = Kairon::start_with(&fast()).unwrap();
    let _qemu = QemuCleanup(k.data_dir.path().to_path_buf());
    let api: Api<Machine> = Api::namespaced(k.client().await.unwrap(), "default");
    let vm: Machine = serde_json::from_value(json!({
        "apiVersion": "kairon.zyvor.dev/v1", "kind": "Machine", "metadata": {"name": "frozen-vm"},
        "spec": {"image": {"path": image}, "resources": {"cpu": "1", "memory": "256Mi"}, "guestAgent": {"enabled": true}}
    }))
    .unwrap();
    api.create(&PostParams::default(), &vm).await.unwrap();
    let m = eventually("the VM to run", Duration::from_secs(180), || async {
        api.get("frozen-vm").await.ok().filter(|m| phase(m) == Some(MachinePhase::Running))
    })
    .await;
    let id = kairon_runtime_api::InstanceId::new(m.status.as_ref().unwrap().runtime_id.clone().unwrap()).unwrap();
    let rt = k.runtime().unwrap();
    assert_eq!(rt.get(&id).await.unwrap().backend, "qemu");
    assert_eq!(rt.freeze_status(&id).await.unwrap().status, "thawed");
    // What a wait saw: the confirmation, the guest's own answer and the FilesystemFrozen
    // condition. The guest agent is asked only once the Machine looks right, so the waits do not
    // queue ten guest agent calls a second ahead of the node agent's own freeze and thaw (TCG).
    let frozen = |want: bool, reason: Option<&'static str>| {
        let (api, rt, id) = (api.clone(), rt.clone(), id.clone());
        async move {
            let m = api.get("frozen-vm").await.map_err(|e| format!("get: {e}"))?;
            let confirmed = m.annotations().contains_key("kairon.zyvor.dev/fs-frozen");
            let cond = condition(&m, "FilesystemFrozen").map(|c| format!("{} {}: {}", c.status, c.reason, c.message));
            let looks_right = confirmed == want
                && reason.is_none_or(|r| condition(&m, "FilesystemFrozen").is_some_and(|c| c.reason == r));
            if !looks_right {
                return Err(format!("confirmed={confirmed} condition={cond:?}"));
            }
            let status = rt.freeze_status(&id).await.map(|s| s.status).map_err(|e| format!("freeze status: {e}"))?;
            if status != if want { "frozen" } else { "thawed" } {
                return Err(format!("confirmed={confirmed} condition={cond:?} guest={status}"));
            }
            Ok(m)
        }
    };
    let log = || {
        let lines = k.logs();
        let lines: Vec<&str> = lines
            .lines()
            .filter(|l| ["freez", "thaw", "frozen", "guest agent"].iter().any(|w| l.contains(w)))
            .collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    };

    // Frozen until a deadline: confirmed, then thawed at the deadline with the confirmation gone.
    let patch = json!({"metadata": {"annotations": {"kairon.zyvor.dev/fs-frozen-until": in_secs(45)}}});
    api.patch("frozen-vm", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    let m = wait_for_and_report(
        "the freeze to be confirmed",
        Duration::from_secs(40),
        || frozen(true, Some("Frozen")),
        log,
    )
    .await;
    assert_eq!(condition(&m, "FilesystemFrozen").unwrap().status, "True");
    // The confirmation goes first, the condition follows in the status write after it.
    wait_for_and_report("the thaw at the deadline", Duration::from_secs(90), || frozen(false, Some("Thawed")), log)
        .await;

    // Frozen far out, then the annotation removed: thawed at once.
    let patch = json!({"metadata": {"annotations": {"kairon.zyvor.dev/fs-frozen-until": in_secs(3600)}}});
    api.patch("frozen-vm", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    wait_for_and_report("the second freeze", Duration::from_secs(60), || frozen(true, None), log).await;
    let patch = json!({"metadata": {"annotations": {"kairon.zyvor.dev/fs-frozen-until": null}}});
    api.patch("frozen-vm", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    wait_for_and_report("the thaw on removal", Duration::from_secs(60), || frozen(false, None), log).await;

    api.delete("frozen-vm", &DeleteParams::default()).await.unwrap();
    eventually("the VM to go", Duration::from_secs(90), || async {
        (api.get_opt("frozen-vm").await.ok()?.is_none() && rt.get(&id).await.is_err()).then_some(())
    })
    .await;
}

fn second_node(k: &Kairon, state: &std::path::Path, extra: &[&str]) -> Process {
    k.second_node("second", state, extra).unwrap()
}

/// Runs `script` in the Machine's sandbox through the REST API: exit code and stdout.
async fn sh(rest: &kairon_e2e::Rest, name: &str, script: &str) -> (i64, String) {
    let r = rest.post(&format!("/api/v1/machines/default/{name}/exec"), json!({"command": ["sh", "-c", script]})).await;
    let r = r.ok();
    if r["exitCode"] != 0 {
        eprintln!("{script:?} in {name}: {r}");
    }
    (r["exitCode"].as_i64().unwrap_or(-1), r["stdout"].as_str().unwrap_or_default().trim().to_string())
}

/// The reasons of the Events recorded on Machine `name`, oldest first.
async fn event_reasons(rest: &kairon_e2e::Rest, name: &str) -> Vec<(String, String)> {
    let events = rest.get(&format!("/api/v1/machines/default/{name}/events")).await.ok();
    events["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            (e["reason"].as_str().unwrap_or_default().to_string(), e["note"].as_str().unwrap_or_default().to_string())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sandbox_migrates_cold_with_its_files_and_rolls_back_when_its_target_dies() {
    let k = Kairon::start_with(&fast()).unwrap();
    let state = tempfile::tempdir().unwrap();
    let _cleanup = SandboxCleanup(state.path().to_path_buf());
    let mut second = second_node(&k, state.path(), &[]);
    let client = k.client().await.unwrap();
    let nodes: Api<kairon_model::KaironNode> = Api::all(client.clone());
    let rest = k.rest().unwrap();
    let api: Api<Machine> = Api::namespaced(client, "default");
    let m: Machine = serde_json::from_value(json!({
        "apiVersion": "kairon.zyvor.dev/v1", "kind": "Machine",
        "metadata": {"name": "mover", "labels": {"kairon.zyvor.dev/sandbox": "true"}},
        "spec": {"sandbox": {"templateName": "busybox"}, "guestAgent": {"enabled": true}, "nodeName": "local",
                 "network": {"mode": "Tap"}}
    }))
    .unwrap();
    api.create(&PostParams::default(), &m).await.unwrap();
    wait_phase(&api, "mover", MachinePhase::Running, MINUTE).await;
    let built_on_second = || async {
        let n = nodes.get("second").await.ok()?;
        n.status?.templates?.iter().any(|t| t == "busybox").then_some(())
    };
    eventually("second to report busybox built", MINUTE, built_on_second).await;

    // Files of every kind in its writable layer: a file owned by a user, a symlink, a deleted
    // template file (a whiteout), a directory made again (opaque: the template's files in it
    // stay hidden), and 160 MiB to copy.
    let setup = "mkdir -p /data/sub && echo hello > /data/sub/hello && chown 1000:1000 /data/sub/hello \
        && ln -s /data/sub/hello /data/link && rm /bin/ls \
        && rm -rf /usr && mkdir -p /usr/only \
        && dd if=/dev/urandom of=/data/big bs=1M count=160 2>/dev/null && md5sum /data/big > /data/big.md5";
    assert_eq!(sh(&rest, "mover", setup).await.0, 0);
    let check = "cat /data/sub/hello && stat -c %u:%g /data/sub/hello && readlink /data/link \
        && test ! -e /bin/ls && busybox ls /usr && md5sum -c -s /data/big.md5 && echo intact";
    let before = sh(&rest, "mover", check).await;
    assert_eq!(before, (0, "hello\n1000:1000\n/data/sub/hello\nonly\nintact".into()));

    // The plan: where it goes, how, and why each node fits or not.
    let plan = rest.post("/api/v1/machines/default/mover/migrate?dryRun=All", json!({})).await.ok();
    assert_eq!(plan["plan"]["source"], "local", "{plan}");
    assert_eq!(plan["plan"]["target"], "second");
    assert_eq!(plan["plan"]["mode"], "Cold");
    let fits: Vec<(String, bool, String)> = plan["plan"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (n["node"].as_str().unwrap().into(), n["fits"].as_bool().unwrap(), n["reason"].as_str().unwrap().into())
        })
        .collect();
    assert_eq!(
        fits,
        vec![("local".into(), false, "the Machine runs here".into()), ("second".into(), true, String::new())]
    );
    assert_eq!(phase(&api.get("mover").await.unwrap()), Some(MachinePhase::Running), "a dry run moves nothing");
    // As kaironctl prints it.
    let out = std::process::Command::new(kairon_e2e::kairon_bin().with_file_name("kaironctl"))
        .env("KUBECONFIG", &k.kubeconfig)
        .env_remove("KAIRON_TOKEN")
        .args(["migrate", "mover", "--to", "second", "--dry-run"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<Vec<&str>> = text.lines().map(|l| l.split_whitespace().collect()).collect();
    assert!(
        text.starts_with("machine mover would move from local to second (cold) (dry run: nothing changed)"),
        "{text}"
    );
    assert!(text.contains("2. stop the sandbox on local: its processes end"), "{text}");
    assert!(lines.contains(&vec!["NODE", "FITS", "WHY", "NOT"]), "{text}");
    assert!(lines.contains(&vec!["local", "no", "the", "Machine", "runs", "here"]), "{text}");
    assert!(lines.contains(&vec!["second", "yes"]), "{text}");
    let nowhere = rest.post("/api/v1/machines/default/mover/migrate?targetNode=nowhere&dryRun=All", json!({})).await;
    assert_eq!((nowhere.status, nowhere.reason()), (409, "NoTargetNode"), "{nowhere:?}");
    assert!(nowhere.message().contains("not a registered node (others: second)"), "{nowhere:?}");

    // Kill the target as its copy arrives: the Machine is back, running on its node, files and
    // all, and an Event says why.
    let instances = state.path().join("instances");
    let count = |dir: &std::path::Path| std::fs::read_dir(dir).map(|d| d.count()).unwrap_or(0);
    let already = count(&instances);
    let moving = {
        let rest = k.rest().unwrap();
        tokio::spawn(
            async move { rest.post("/api/v1/machines/default/mover/migrate?targetNode=second", json!({})).await },
        )
    };
    eventually("the copy to start arriving on second", MINUTE, || async {
        (count(&instances) > already).then_some(())
    })
    .await;
    let during = api.get("mover").await.unwrap().status.unwrap();
    assert_eq!(during.phase, Some(MachinePhase::Migrating));
    let mark = during.migration.expect("status.migration while it moves");
    assert_eq!((mark.target_node.as_str(), mark.mode), ("second", kairon_model::MigrationMode::Cold));
    second.kill9();
    let failed = moving.await.unwrap();
    assert_eq!((failed.status, failed.reason()), (502, "MigrationFailed"), "{failed:?}");
    assert!(failed.message().contains("the Machine stays on local"), "{failed:?}");
    let m = wait_phase(&api, "mover", MachinePhase::Running, MINUTE).await;
    let s = m.status.clone().unwrap();
    assert_eq!((s.node_name.as_deref(), s.migration), (Some("local"), None));
    assert!(
        event_reasons(&rest, "mover").await.iter().any(|(r, n)| r == "MigrationFailed" && n.contains("stays on local")),
        "{:?}",
        event_reasons(&rest, "mover").await
    );
    assert_eq!(sh(&rest, "mover", check).await, before, "its files where they were");

    // The target back: this time it moves, with its files, its new address, and nothing left
    // behind on the node it left.
    let _second = second_node(&k, state.path(), &[]);
    eventually("second to report again", MINUTE, built_on_second).await;
    let old_ip = s.guest_ip.clone();
    let done = eventually("the migration to succeed", MINUTE, || async {
        let r = rest.post("/api/v1/machines/default/mover/migrate", json!({})).await;
        // The API may still hold the node's old endpoint for a few seconds.
        (r.status == 200).then(|| r.ok())
    })
    .await;
    assert_eq!(done["plan"]["target"], "second", "{done}");
    assert!(done["copiedBytes"].as_u64().unwrap() >= 160 << 20, "{done}");
    let m = wait_phase(&api, "mover", MachinePhase::Running, MINUTE).await;
    let s = m.status.clone().unwrap();
    assert_eq!((s.node_name.as_deref(), s.migration), (Some("second"), None));
    assert_eq!(m.spec.node_name.as_deref(), Some("second"), "pinned to its new node");
    assert!(
        s.guest_ip.is_some() && s.guest_ip != old_ip,
        "re-addressed on its new node: {:?} → {:?}",
        old_ip,
        s.guest_ip
    );
    assert_eq!(sh(&rest, "mover", check).await, before, "its files moved with it");
    let reasons: Vec<String> = event_reasons(&rest, "mover").await.into_iter().map(|(r, _)| r).collect();
    assert!(reasons.contains(&"Migrating".to_string()) && reasons.contains(&"Migrated".to_string()), "{reasons:?}");
    let local = k.runtime().unwrap();
    let left: Vec<String> = local.list().await.unwrap().into_iter().map(|v| v.name).collect();
    assert!(!left.contains(&"kairon-default-mover".to_string()), "the source instance is gone: {left:?}");
    // The node it is on now follows it: a pause reaches the new instance.
    api.patch("mover", &PatchParams::default(), &Patch::Merge(json!({"spec": {"powerState": "Paused"}})))
        .await
        .unwrap();
    wait_phase(&api, "mover", MachinePhase::Paused, MINUTE).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_vm_migrates_live_with_its_processes_running_and_its_disk_writes() {
    let images = kairon_runtime::vm::image::images_dir(&std::env::temp_dir().join("kairon-images"));
    let image = kairon_runtime::vm::image::ensure_default_image(&images, &Default::default()).await.unwrap();
    let k = Kairon::start_with(&fast()).unwrap();
    let state = tempfile::tempdir().unwrap();
    let _cleanup = SandboxCleanup(state.path().to_path_buf());
    let _second = second_node(&k, state.path(), &[]);
    let rest = k.rest().unwrap();
    let api: Api<Machine> = Api::namespaced(k.client().await.unwrap(), "default");
    let vm: Machine = serde_json::from_value(json!({
        "apiVersion": "kairon.zyvor.dev/v1", "kind": "Machine", "metadata": {"name": "live"},
        "spec": {"image": {"path": image}, "resources": {"cpu": "1", "memory": "256Mi"}, "guestAgent": {"enabled": true},
                 "nodeName": "local", "network": {"mode": "Tap"}}
    }))
    .unwrap();
    api.create(&PostParams::default(), &vm).await.unwrap();
    let old_ip =
        wait_phase(&api, "live", MachinePhase::Running, Duration::from_secs(240)).await.status.unwrap().guest_ip;
    assert!(old_ip.is_some(), "on the guest network");
    let guest = |script: &'static str| {
        let rest = rest.clone();
        async move {
            let mut last = None;
            for _ in 0..120 {
                let r = rest.post("/api/v1/machines/default/live/exec", json!({"command": ["sh", "-c", script]})).await;
                if r.status == 200 && r.body["exitCode"] == 0 {
                    return r.body["stdout"].as_str().unwrap_or_default().trim().to_string();
                }
                last = Some(r);
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            panic!("{script:?} did not succeed in the guest: {last:?}")
        }
    };
    // A counter in the guest's memory (a process, its count in a tmpfs), and a write to its disk.
    let p = rest
        .post(
            "/api/v1/machines/default/live/processes",
            json!({"command": ["sh", "-c", "i=0; while true; do i=$((i+1)); echo $i > /dev/shm/count; sleep 0.1; done"]}),
        )
        .await;
    assert_eq!(p.status, 201, "{p:?}");
    guest("echo written-before > /root/disk-write && sync").await;
    let count = |s: String| s.parse::<u64>().unwrap_or(0);
    let before = eventually("the counter to count", MINUTE, || async {
        let n = count(guest("cat /dev/shm/count").await);
        (n >= 10).then_some(n)
    })
    .await;

    let plan = rest.post("/api/v1/machines/default/live/migrate?dryRun=All", json!({})).await.ok();
    assert_eq!(
        (plan["plan"]["mode"].as_str(), plan["plan"]["target"].as_str()),
        (Some("Live"), Some("second")),
        "{plan}"
    );
    let done = rest.post("/api/v1/machines/default/live/migrate?targetNode=second", json!({})).await;
    assert_eq!(done.status, 200, "{done:?}");
    let done = done.ok();
    let downtime = done["downtimeMs"].as_u64().expect("a live migration says how long the guest was paused");
    eprintln!(
        "live migration: {:.1} s, {downtime} ms paused, {} MiB",
        done["seconds"].as_f64().unwrap(),
        done["copiedBytes"].as_u64().unwrap() >> 20
    );
    let m = api.get("live").await.unwrap();
    let s = m.status.clone().unwrap();
    assert_eq!((s.node_name.as_deref(), s.phase, s.migration), (Some("second"), Some(MachinePhase::Running), None));
    // Re-addressed: an address of the new node's, which the guest now has.
    let new_ip = s.guest_ip.clone().expect("a guest IP on the new node");
    assert_ne!(Some(&new_ip), old_ip.as_ref());
    let addrs =
        guest("ip -4 -o addr show dev eth0 2>/dev/null || /usr/lib/kairon/busybox ip -4 -o addr show dev eth0").await;
    assert!(addrs.contains(&format!("{new_ip}/")), "the guest has {new_ip}: {addrs}");

    // The same guest, running on: its counter goes on from where it was, its disk has its write.
    let after = count(guest("cat /dev/shm/count").await);
    assert!(after >= before, "the counter went back: {before} → {after}");
    let later = eventually("the counter to go on", MINUTE, || async {
        let n = count(guest("cat /dev/shm/count").await);
        (n > after).then_some(n)
    })
    .await;
    assert!(later > after);
    assert_eq!(guest("cat /root/disk-write").await, "written-before");
    guest("echo written-after > /root/disk-write-2 && sync").await;
    // The source's instance is gone; the Events say what happened.
    let left: Vec<String> = k.runtime().unwrap().list().await.unwrap().into_iter().map(|v| v.name).collect();
    assert!(!left.contains(&"kairon-default-live".to_string()), "the source instance is gone: {left:?}");
    let migrated = event_reasons(&rest, "live").await;
    assert!(migrated.iter().any(|(r, n)| r == "Migrated" && n.contains("paused for")), "{migrated:?}");
}

/// A CA and a certificate it signs for 127.0.0.1, as a cluster's chart would issue per node;
/// the paths of the CA, the certificate and its key.
fn issue_runtime_certificate(dir: &std::path::Path) -> (String, String, String) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca.clone().self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    let path = |f: &str| dir.join(f).to_string_lossy().into_owned();
    std::fs::write(path("ca.crt"), ca_cert.pem()).unwrap();
    std::fs::write(path("runtime.crt"), cert.pem()).unwrap();
    std::fs::write(path("runtime.key"), key.serialize_pem()).unwrap();
    (path("ca.crt"), path("runtime.crt"), path("runtime.key"))
}

/// Starts a sandbox with a console on `node` and waits until it runs.
async fn run_console_sandbox_on(api: &Api<Machine>, name: &str, node: &str) {
    let mut m = sandbox(name, None);
    m.spec.guest_agent = serde_json::from_value(json!({"enabled": true, "console": true})).unwrap();
    m.spec.node_name = Some(node.into());
    api.create(&PostParams::default(), &m).await.unwrap();
    wait_phase(api, name, MachinePhase::Running, MINUTE).await;
}

/// Echoes `word` on a Machine's console through the api (a WebSocket relayed to its node's
/// runtime); what came back.
async fn console_echo(rest: &kairon_e2e::Rest, name: &str, word: &str) -> String {
    use futures::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    let mut console = rest.websocket(&format!("/api/v1/machines/default/{name}/console")).await.unwrap();
    console.send(Message::Binary(format!("echo {word}\nexit 0\n").into_bytes().into())).await.unwrap();
    let mut seen = Vec::new();
    while let Ok(Some(Ok(m))) = tokio::time::timeout(Duration::from_secs(30), console.next()).await {
        match m {
            Message::Binary(b) => seen.extend_from_slice(&b),
            Message::Text(t) => seen.extend_from_slice(t.as_bytes()),
            Message::Close(_) => break,
            _ => {}
        }
        let text = String::from_utf8_lossy(&seen);
        if text.contains(&format!("{word}\r\n")) || text.contains(&format!("{word}\n")) {
            break;
        }
    }
    String::from_utf8_lossy(&seen).into_owned()
}

/// A node's runtime served over TLS with a certificate of the operator's (signed by a CA of
/// theirs): it registers an https endpoint and that certificate, and the api and its node agent
/// reach it (requests and WebSocket relays alike); a client given the CA does too; without it,
/// or over plain HTTP, nothing; and a runtime never listens beyond loopback without TLS.
#[tokio::test(flavor = "multi_thread")]
async fn a_node_runtime_served_over_tls_is_reached_with_the_runtimes_ca() {
    let certs = tempfile::tempdir().unwrap();
    let (ca, cert, key) = issue_runtime_certificate(certs.path());
    let k = Kairon::start_with(&fast().with(&["--runtime-ca", &ca])).unwrap();
    let state = tempfile::tempdir().unwrap();
    let _cleanup = SandboxCleanup(state.path().to_path_buf());
    let tls = [
        "--runtime-listen",
        "127.0.0.1:0",
        "--runtime-tls-cert",
        &cert,
        "--runtime-tls-key",
        &key,
        "--runtime-ca",
        &ca,
    ];
    let _second = second_node(&k, state.path(), &tls);
    let client = k.client().await.unwrap();
    let nodes: Api<kairon_model::KaironNode> = Api::all(client.clone());
    let endpoint = eventually("second to register", MINUTE, || async {
        Some(nodes.get("second").await.ok()?.spec.runtime_endpoint)
    })
    .await;
    assert!(endpoint.starts_with("https://127.0.0.1:"), "{endpoint}");

    // A sandbox there, driven by its node agent and the api over TLS.
    let api: Api<Machine> = Api::namespaced(client, "default");
    run_console_sandbox_on(&api, "over-tls", "second").await;
    let rest = k.rest().unwrap();
    assert_eq!(sh(&rest, "over-tls", "echo over-tls").await, (0, "over-tls".to_string()));
    let seen = console_echo(&rest, "over-tls", "relayed-over-tls").await;
    assert!(seen.contains("relayed-over-tls"), "{seen}");

    // The runtime's token is never sent to a server the CA did not vouch for, nor in the clear.
    let token = std::fs::read_to_string(k.data_dir.path().join("runtime-token")).unwrap();
    let untrusting = kairon_runtime_api::RuntimeClient::new(&endpoint, token.trim()).unwrap();
    let refused = untrusting.node().await.unwrap_err();
    assert!(matches!(refused, kairon_runtime_api::ClientError::Unreachable { .. }), "{refused:?}");
    let plain = kairon_runtime_api::RuntimeClient::new(&endpoint.replacen("https", "http", 1), token.trim()).unwrap();
    assert!(plain.node().await.is_err(), "plain HTTP to the TLS port");
    let trusting =
        kairon_runtime_api::RuntimeConnector::with_ca(token.trim(), Some(&std::fs::read(&ca).unwrap())).unwrap();
    assert_eq!(trusting.client(&endpoint).unwrap().node().await.unwrap()["name"], "second");

    // Beyond loopback, a runtime serves only over TLS.
    let refusal = std::process::Command::new(kairon_e2e::kairon_bin())
        .args(["node", "--kubeconfig", &k.kubeconfig.to_string_lossy(), "--node-name", "third", "--state-dir"])
        .arg(state.path().join("third"))
        .args(["--runtime-listen", "0.0.0.0:0", "--runtime-advertise", "http://10.0.0.3:7444"])
        .output()
        .unwrap();
    assert!(!refusal.status.success());
    let err = String::from_utf8_lossy(&refusal.stderr);
    assert!(err.contains("only over TLS"), "{err}");
}

/// A runtime run on its own (`kairon runtime --tls-cert`) prints its certificate's SHA-256 with
/// its URL; its node agent registers it (`kairon node --runtime-endpoint
/// --runtime-certificate-sha256`), and the api, given no CA, reaches it by that certificate.
#[tokio::test(flavor = "multi_thread")]
async fn an_external_runtime_is_reached_by_the_certificate_it_prints() {
    let certs = tempfile::tempdir().unwrap();
    let (_ca, cert, key) = issue_runtime_certificate(certs.path());
    let k = Kairon::start_with(&["--no-runtime"]).unwrap();
    let state = tempfile::tempdir().unwrap();
    let node = SeparateNode::start(&k, "external", state.path(), &["--tls-cert", &cert, "--tls-key", &key]).unwrap();
    let pin = kairon_runtime_api::CertificatePin::of_pem(&std::fs::read(&cert).unwrap()).unwrap();
    let printed = &node.runtime.ready_line;
    assert!(printed.contains(&format!("{} (certificate sha256:{pin})", node.endpoint)), "{printed}");
    assert!(node.endpoint.starts_with("https://127.0.0.1:"), "{printed}");
    let client = k.client().await.unwrap();
    let nodes: Api<kairon_model::KaironNode> = Api::all(client.clone());
    let registered = eventually("the node to register", MINUTE, || async {
        nodes.get("external").await.ok()?.spec.runtime_certificate_sha256
    })
    .await;
    assert_eq!(registered, pin.to_string());
    let api: Api<Machine> = Api::namespaced(client, "default");
    run_console_sandbox_on(&api, "external", "external").await;
    assert_eq!(sh(&k.rest().unwrap(), "external", "echo external").await, (0, "external".to_string()));
}

/// Across a cluster each node's runtime serves a certificate of its own (made in its state
/// dir), which its node registers in its KaironNode and the api pins: the api reaches each
/// node's runtime by that certificate with no CA given (requests and WebSocket relays), and
/// takes no other. A node that redirects the api's traffic for another node (here: that node's
/// registered address pointed at it) presents its own certificate and receives nothing: no
/// request, so no credential. (Only a node itself may write its KaironNode: isolation.rs and
/// webhook.rs.)
#[tokio::test(flavor = "multi_thread")]
async fn each_node_runtime_is_trusted_by_its_own_certificate_alone() {
    use std::os::unix::fs::PermissionsExt;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::AsyncReadExt;

    let k = Kairon::start_with(&fast()).unwrap();
    let state = tempfile::tempdir().unwrap();
    let _cleanup = ["second", "third"].map(|n| SandboxCleanup(state.path().join(n)));
    let _second = k.second_node("second", &state.path().join("second"), &["--runtime-tls"]).unwrap();
    let _third = k.second_node("third", &state.path().join("third"), &["--runtime-tls"]).unwrap();
    let client = k.client().await.unwrap();
    let nodes: Api<kairon_model::KaironNode> = Api::all(client.clone());
    let mut pins = Vec::new();
    for name in ["second", "third"] {
        let spec =
            eventually("the node to register", MINUTE, || async { Some(nodes.get(name).await.ok()?.spec) }).await;
        assert!(spec.runtime_endpoint.starts_with("https://127.0.0.1:"), "{}", spec.runtime_endpoint);
        let tls = state.path().join(name).join("tls");
        let cert = std::fs::read(tls.join("runtime.crt")).unwrap();
        let pin = kairon_runtime_api::CertificatePin::of_pem(&cert).unwrap();
        assert_eq!(spec.runtime_certificate_sha256, Some(pin.to_string()), "{name} registers its certificate");
        let mode = std::fs::metadata(tls.join("runtime.key")).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "the key is the node's alone");
        pins.push(pin);
    }
    assert_ne!(pins[0], pins[1], "each node has a certificate of its own");

    // A sandbox on second, driven by its node agent and the api by its certificate alone.
    let api: Api<Machine> = Api::namespaced(client, "default");
    run_console_sandbox_on(&api, "pinned", "second").await;
    let rest = k.rest().unwrap();
    assert_eq!(sh(&rest, "pinned", "echo pinned").await, (0, "pinned".to_string()));
    let seen = console_echo(&rest, "pinned", "relayed-by-pin").await;
    assert!(seen.contains("relayed-by-pin"), "{seen}");

    // third, taken over, answers for second's address with its own certificate and key.
    let impostor = {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let tls = state.path().join("third").join("tls");
        let chain = CertificateDer::pem_file_iter(tls.join("runtime.crt")).unwrap().map(Result::unwrap).collect();
        let key = PrivateKeyDer::from_pem_file(tls.join("runtime.key")).unwrap();
        let config = rustls::ServerConfig::builder().with_no_client_auth().with_single_cert(chain, key).unwrap();
        tokio_rustls::TlsAcceptor::from(Arc::new(config))
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let impostor_url = format!("https://{}", listener.local_addr().unwrap());
    let (connections, received) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    {
        let (connections, received) = (connections.clone(), received.clone());
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                connections.fetch_add(1, Ordering::SeqCst);
                let (impostor, received) = (impostor.clone(), received.clone());
                tokio::spawn(async move {
                    let Ok(mut tls) = impostor.accept(tcp).await else { return };
                    let mut buf = vec![0u8; 4096];
                    while let Ok(n @ 1..) = tls.read(&mut buf).await {
                        received.fetch_add(n, Ordering::SeqCst);
                    }
                });
            }
        });
    }
    let original = nodes.get("second").await.unwrap().spec.runtime_endpoint;
    let point_second_at = |url: String| {
        let nodes = nodes.clone();
        async move {
            let patch = json!({"spec": {"runtimeEndpoint": url}});
            nodes.patch("second", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
        }
    };
    point_second_at(impostor_url.clone()).await;
    let refusal = eventually("the api to try second's new address", MINUTE, || async {
        let r = rest.post("/api/v1/machines/default/pinned/exec", json!({"command": ["echo", "hi"]})).await;
        (r.status == 502).then_some(r.body)
    })
    .await;
    let message = refusal["message"].as_str().unwrap_or_default().to_string();
    assert!(message.contains(&impostor_url), "{message}");
    assert!(message.contains(&format!("presented certificate sha256:{}", pins[1])), "{message}");
    assert!(message.contains(&format!("not sha256:{}", pins[0])), "{message}");
    let console = rest.websocket("/api/v1/machines/default/pinned/console").await;
    assert!(console.is_err(), "the relay is refused as well");
    assert!(connections.load(Ordering::SeqCst) >= 1, "the api did reach the impostor");
    assert_eq!(received.load(Ordering::SeqCst), 0, "and sent it not one byte of a request");

    // Its real address again: the api reaches second as before.
    point_second_at(original).await;
    eventually("second to answer again", MINUTE, || async {
        let r = rest.post("/api/v1/machines/default/pinned/exec", json!({"command": ["echo", "back"]})).await;
        (r.status == 200 && r.body["stdout"].as_str() == Some("back\n")).then_some(())
    })
    .await;
    assert_eq!(received.load(Ordering::SeqCst), 0);
}
