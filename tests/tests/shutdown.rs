//! Ctrl-C / SIGTERM on a busy `kairon up` (issue 14, item 4): with claims racing and a watch
//! open, the process stops in order (controllers and node agent first, then the server drains,
//! then the store closes), exits 0 quickly, logs no warning or error, answers no 5xx, and leaves
//! its sandboxes running for the next `kairon up` on the same data dir to adopt.

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::ResourceExt;
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;

use kairon_e2e::{Flags, Kairon, eventually, phase};
use kairon_model::{ClaimPhase, Machine, MachineClaim, MachinePhase, MachinePool};
use kairon_runtime_api::InstanceId;

const NS: &str = "agents";
const CLAIM: &str = "kairon.zyvor.dev/claim";

fn pool(name: &str, replicas: i32) -> MachinePool {
    serde_json::from_value(json!({
        "apiVersion": "kairon.zyvor.dev/v1", "kind": "MachinePool",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "replicas": replicas, "warmPowerState": "Paused", "warmupSeconds": 1,
            "template": {
                "metadata": {"labels": {"kairon.zyvor.dev/sandbox": "true"}},
                "spec": {"sandbox": {"templateName": "busybox"}}
            }
        }
    }))
    .unwrap()
}

fn claim(name: &str, pool: &str) -> MachineClaim {
    serde_json::from_value(json!({
        "apiVersion": "kairon.zyvor.dev/v1", "kind": "MachineClaim",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"poolName": pool}
    }))
    .unwrap()
}

fn runtime_id(m: &Machine) -> Option<String> {
    m.status.as_ref().and_then(|s| s.runtime_id.clone())
}

fn bound(c: &MachineClaim) -> bool {
    c.status.as_ref().and_then(|s| s.phase) == Some(ClaimPhase::Bound)
}

/// What a client saw: an answer's status code, or a connection error (the server going away).
#[derive(Debug)]
enum Seen {
    Ok,
    Status(u16, String),
    Connection(String),
}

fn seen<T>(r: &kube::Result<T>) -> Seen {
    match r {
        Ok(_) => Seen::Ok,
        Err(kube::Error::Api(s)) => Seen::Status(s.code, format!("{} {}", s.reason, s.message)),
        Err(e) => Seen::Connection(e.to_string()),
    }
}

/// Log lines at WARN or ERROR in tracing's format (`<time>  WARN <target>: ...`), ANSI colours
/// stripped.
fn warnings_and_errors(log: &str) -> Vec<String> {
    let mut plain = String::with_capacity(log.len());
    let mut chars = log.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI: ESC [ ... final byte in @..~
            if chars.next() == Some('[') {
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
            continue;
        }
        plain.push(c);
    }
    plain.lines().filter(|l| l.contains(" WARN ") || l.contains(" ERROR ")).map(String::from).collect()
}

/// The Machines as the database holds them now (the server is down).
fn stored_machines(db_url: &str) -> Vec<Machine> {
    let out = Command::new("psql")
        .arg(db_url)
        .args(["-qAtc", "SELECT object FROM objects WHERE resource = 'machines' ORDER BY name"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigterm_during_twenty_claims_and_a_watch_stops_cleanly_and_the_sandboxes_are_adopted() {
    let k = Kairon::start_with(&Flags::fast_activity("1s").usage_interval("1s")).unwrap();
    let client = k.client().await.unwrap();
    let pools: Api<MachinePool> = Api::namespaced(client.clone(), NS);
    let machines: Api<Machine> = Api::namespaced(client.clone(), NS);
    let claims: Api<MachineClaim> = Api::namespaced(client.clone(), NS);
    pools.create(&PostParams::default(), &pool("agents", 5)).await.unwrap();
    eventually("5 warm members", Duration::from_secs(120), || async {
        pools.get("agents").await.ok().filter(|p| p.status.as_ref().is_some_and(|s| s.warm == 5))
    })
    .await;

    // Three claims bound and Running before the storm: their sandboxes' init processes are
    // the ones that must still be there after the restart.
    for i in 0..3 {
        claims.create(&PostParams::default(), &claim(&format!("early-{i}"), "agents")).await.unwrap();
    }
    let early: Vec<Machine> = eventually("3 early claims Running", Duration::from_secs(60), || async {
        let ms = machines.list(&ListParams::default().labels(CLAIM)).await.ok()?.items;
        (ms.len() == 3 && ms.iter().all(|m| phase(m) == Some(MachinePhase::Running) && runtime_id(m).is_some()))
            .then_some(ms)
    })
    .await;
    let rt = k.runtime().unwrap();
    let mut early_instances = BTreeMap::new();
    for m in &early {
        let id = InstanceId::new(runtime_id(m).unwrap()).unwrap();
        let vm = rt.get(&id).await.unwrap();
        assert_eq!(vm.owner_uid.as_deref(), m.uid().as_deref());
        let pid = vm.pid.expect("a running sandbox has an init process");
        early_instances.insert(m.name_any(), (m.uid().unwrap(), vm.id.to_string(), pid, vm.created_at.clone()));
    }

    // A watch, open across the stop.
    let rv = machines.list(&ListParams::default()).await.unwrap().metadata.resource_version.unwrap();
    let watch = {
        let machines = machines.clone();
        tokio::spawn(async move {
            let mut events = 0usize;
            let mut errors = Vec::new();
            match machines.watch(&WatchParams::default().timeout(290), &rv).await {
                Err(e) => errors.push(format!("opening the watch: {e}")),
                Ok(stream) => {
                    let mut stream = std::pin::pin!(stream);
                    while let Some(ev) = stream.next().await {
                        match ev {
                            Ok(WatchEvent::Error(s)) => errors.push(format!("ERROR event {} {}", s.code, s.message)),
                            Ok(_) => events += 1,
                            Err(e) => errors.push(format!("watch stream: {e}")),
                        }
                    }
                }
            }
            (events, errors)
        })
    };

    // A REST long poll that nothing will satisfy, open across the stop: the draining server must
    // not answer it with a 5xx of its own (its internal watch ends with the server).
    let rest = k.rest().unwrap();
    let long_poll = {
        let url =
            rest.url(&format!("/api/v1/machines/{NS}/{}/wait?phase=Stopped&timeoutSeconds=120", early[0].name_any()));
        let req = rest.http.get(url).bearer_auth(&rest.token);
        tokio::spawn(async move {
            match req.send().await {
                Ok(r) => Some((r.status().as_u16(), r.text().await.unwrap_or_default())),
                Err(_) => None,
            }
        })
    };

    // 20 claims at once; each client then keeps asking after its claim until the server goes.
    let stopping = Arc::new(AtomicBool::new(false));
    let storm: Vec<_> = (0..20)
        .map(|i| {
            let claims = claims.clone();
            let stopping = stopping.clone();
            tokio::spawn(async move {
                let name = format!("job-{i}");
                let mut log = vec![seen(&claims.create(&PostParams::default(), &claim(&name, "agents")).await)];
                while matches!(log.last(), Some(Seen::Ok)) {
                    log.push(seen(&claims.get(&name).await));
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                if let Some(Seen::Connection(e)) = log.last()
                    && !stopping.load(Ordering::SeqCst)
                {
                    panic!("{name}: the connection failed before the stop: {e}");
                }
                (name, log)
            })
        })
        .collect();

    // SIGTERM as soon as the controllers are busy binding the storm's claims.
    eventually("a claim of the storm bound", Duration::from_secs(60), || async {
        let cs = claims.list(&ListParams::default()).await.ok()?.items;
        cs.iter().any(|c| c.name_any().starts_with("job-") && bound(c)).then_some(())
    })
    .await;
    stopping.store(true, Ordering::SeqCst);
    let log_at_stop_start = k.logs().len();
    let (k, status, took) = tokio::task::spawn_blocking(move || {
        let mut k = k;
        let t = Instant::now();
        let status = k.stop();
        (k, status, t.elapsed())
    })
    .await
    .unwrap();
    let status = status.unwrap();
    let log = k.logs();
    eprintln!("kairon up exited with {status:?} {took:?} after SIGTERM");
    assert!(status.success(), "exit status {status:?}\n{log}");
    assert!(took < Duration::from_secs(10), "took {took:?} to stop\n{log}");
    assert!(log.contains("Kairon stopped."), "{log}");
    let noisy = warnings_and_errors(&log);
    assert!(noisy.is_empty(), "WARN/ERROR lines:\n{}\n\nwhole log:\n{log}", noisy.join("\n"));
    let stop_part = &log[log_at_stop_start.min(log.len())..];
    assert!(!stop_part.to_lowercase().contains("warning"), "{stop_part}");

    // No client saw a 5xx: every answer was a success, or the connection went away.
    for task in storm {
        let (name, seen) = task.await.unwrap();
        for s in &seen {
            if let Seen::Status(code, msg) = s {
                assert!(*code < 500, "{name}: {code} {msg} (all: {seen:?})");
            }
        }
        assert!(matches!(seen.first(), Some(Seen::Ok | Seen::Connection(_))), "{name}: {seen:?}");
    }
    match long_poll.await.unwrap() {
        None => {} // the connection went away with the server: the client waits again elsewhere
        Some((code, body)) => assert!(code < 500, "the long poll got {code} {body}"),
    }
    let (events, errors) = tokio::time::timeout(Duration::from_secs(5), watch).await.expect("the watch ended").unwrap();
    assert!(errors.is_empty(), "the watch ended cleanly, saw {events} events: {errors:?}");
    assert!(events > 0, "the watch saw the storm");

    // The sandboxes outlive the process.
    for (name, (_, _, pid, _)) in &early_instances {
        assert!(std::path::Path::new(&format!("/proc/{pid}")).exists(), "{name}'s sandbox init {pid} still runs");
    }
    // Which Machines had an instance when the process stopped.
    let db = k.database_url().unwrap().to_string();
    let at_stop: BTreeMap<String, (String, String)> = stored_machines(&db)
        .into_iter()
        .filter(|m| m.labels().contains_key(CLAIM))
        .filter_map(|m| Some((m.name_any(), (m.uid()?, runtime_id(&m)?))))
        .collect();
    for name in early_instances.keys() {
        assert!(at_stop.contains_key(name), "{name} in {at_stop:?}");
    }

    // The next `kairon up` on the same data dir adopts them: the bound Machines come back
    // Running on the instances they had, the early ones on the very same processes.
    let k = k.restart().unwrap();
    let machines: Api<Machine> = Api::namespaced(k.client().await.unwrap(), NS);
    let rt = k.runtime().unwrap();
    eventually("the bound Machines Running again on their instances", Duration::from_secs(90), || async {
        for (name, (uid, id)) in &at_stop {
            let m = machines.get(name).await.ok()?;
            assert_eq!(m.uid().as_ref(), Some(uid), "{name} is the same Machine");
            assert_eq!(runtime_id(&m).as_ref(), Some(id), "{name} keeps its instance");
            if phase(&m) != Some(MachinePhase::Running) {
                return None;
            }
        }
        Some(())
    })
    .await;
    for (name, (uid, id, pid, created)) in &early_instances {
        let vm = rt.get(&InstanceId::new(id).unwrap()).await.unwrap();
        assert_eq!(vm.owner_uid.as_ref(), Some(uid), "{name}");
        assert_eq!((vm.pid, &vm.created_at), (Some(*pid), created), "{name}: adopted, not re-created");
    }
    let sandboxes = rt.list_sandboxes().await.unwrap();
    let mut by_name: BTreeMap<&str, usize> = BTreeMap::new();
    for v in &sandboxes {
        *by_name.entry(v.name.as_str()).or_default() += 1;
    }
    assert!(by_name.values().all(|n| *n == 1), "one instance per Machine: {by_name:?}");
}
