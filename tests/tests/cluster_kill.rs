//! Kill -9 of each of Kairon's components on its own, on a real Kubernetes control plane
//! (`kairon_e2e::testbed::Install`), while 100 claims race for a Paused pool of 10: the api (and
//! with it the admission webhook every write of Kairon's kinds waits for), the leading
//! controller, one node agent, one node runtime. Each comes back on its own, as a Deployment or
//! DaemonSet would bring it back, and every claim ends Bound to a Machine of its own: no double
//! binds, no sandbox without its Machine (or two for one), no usage row without its claim, and
//! no two usage intervals of one claim overlapping.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use kube::ResourceExt;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

use kairon_e2e::testbed::Install;
use kairon_e2e::wait::{MINUTE, eventually, wait_for};
use kairon_model::machine::runtime_name;
use kairon_model::{ClaimPhase, Machine, MachineClaim, MachinePool};

const CLAIMS: usize = 100;
const WARM: i32 = 10;
const POOL: &str = "kairon.zyvor.dev/pool";
const CLAIM: &str = "kairon.zyvor.dev/claim";

#[derive(Clone, Copy, Debug)]
enum Victim {
    Api,
    LeadingController,
    NodeAgent,
    Runtime,
}

impl Victim {
    fn namespace(self) -> &'static str {
        match self {
            Victim::Api => "kill-api",
            Victim::LeadingController => "kill-leader",
            Victim::NodeAgent => "kill-agent",
            Victim::Runtime => "kill-runtime",
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn each_component_killed_under_a_hundred_racing_claims_loses_nothing_and_binds_nothing_twice() {
    let mut install = Install::start(&["a", "b"]).unwrap();
    install.wait_for_nodes();
    let admin = kairon_e2e::testbed::client(&install.testbed.kubeconfig).await;
    for victim in [Victim::Api, Victim::LeadingController, Victim::NodeAgent, Victim::Runtime] {
        round(&mut install, &admin, victim).await;
    }
}

async fn round(install: &mut Install, admin: &kube::Client, victim: Victim) {
    let ns = victim.namespace();
    let started = Instant::now();
    install.testbed.kubectl(&["create", "namespace", ns]).unwrap();
    let pools: Api<MachinePool> = Api::namespaced(admin.clone(), ns);
    let claims: Api<MachineClaim> = Api::namespaced(admin.clone(), ns);
    let machines: Api<Machine> = Api::namespaced(admin.clone(), ns);
    pools.create(&PostParams::default(), &pool(ns)).await.unwrap();
    eventually("the pool warm", 3 * MINUTE, || async {
        let warm = pools.get("warm").await.ok()?.status?.warm;
        (warm == WARM).then_some(())
    })
    .await;

    // 100 clients, each creating its claim until the cluster takes it (while the api is down its
    // webhook refuses every write; a create whose answer was lost is a 409 on the retry).
    let mut racing = tokio::task::JoinSet::new();
    for i in 0..CLAIMS {
        let claims = claims.clone();
        racing.spawn(async move {
            let deadline = Instant::now() + 3 * MINUTE;
            loop {
                match claims.create(&PostParams::default(), &claim(&format!("c{i}"))).await {
                    Ok(_) => return,
                    Err(kube::Error::Api(s)) if s.code == 409 => return,
                    Err(e) if Instant::now() > deadline => panic!("claim c{i} never created: {e}"),
                    Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
                }
            }
        });
    }
    // Killed in the middle of the binding: once a few claims are Bound.
    eventually("the first claims bound", MINUTE, || async { (bound(&claims).await.len() >= 5).then_some(()) }).await;
    if matches!(victim, Victim::NodeAgent | Victim::Runtime) {
        let node = install.nodes[0].name.as_str();
        let ms = machines.list(&ListParams::default()).await.unwrap().items;
        let on_it = ms.iter().filter(|m| m.status.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node)).count();
        assert!(on_it > 0, "{victim:?}: the node killed holds members of the pool");
    }
    let pause = Duration::from_secs(2);
    match victim {
        Victim::Api => install.restart_api(pause).unwrap(),
        Victim::LeadingController => {
            let leader = install.leading_controller().unwrap();
            install.restart_controller(leader, pause).unwrap();
        }
        Victim::NodeAgent => {
            install.nodes[0].kill_agent();
            std::thread::sleep(pause);
            install.nodes[0].start_agent().unwrap();
        }
        Victim::Runtime => install.nodes[0].restart_runtime(pause).unwrap(),
    }
    let restarted = Instant::now();
    racing.join_all().await;

    let bound = eventually("every claim Bound", 2 * MINUTE, || async {
        let bound = bound(&claims).await;
        (bound.len() == CLAIMS).then_some(bound)
    })
    .await;
    let all_bound = restarted.elapsed();
    let distinct: BTreeSet<&String> = bound.values().collect();
    assert_eq!(distinct.len(), CLAIMS, "{victim:?}: each claim has a Machine of its own: {bound:?}");
    let ms = machines.list(&ListParams::default().labels(&format!("{POOL}=warm"))).await.unwrap().items;
    let labelled: BTreeMap<String, String> =
        ms.iter().filter_map(|m| Some((m.name_any(), m.labels().get(CLAIM)?.clone()))).collect();
    for (claim, machine) in &bound {
        assert_eq!(labelled.get(machine), Some(claim), "{victim:?}: {machine} carries the label of its claim {claim}");
    }
    assert_eq!(labelled.len(), CLAIMS, "{victim:?}: no Machine carries a claim it was not bound by: {labelled:?}");

    // Every claimed member runs, and the pool is warm again.
    eventually("every claimed Machine Running, the pool warm again", 2 * MINUTE, || async {
        let ms = machines.list(&ListParams::default()).await.ok()?.items;
        let running = ms.iter().filter(|m| labelled.contains_key(&m.name_any()) && phase(m) == "Running").count();
        let warm = pools.get("warm").await.ok()?.status?.warm;
        (running == CLAIMS && warm == WARM).then_some(())
    })
    .await;

    // Each node runs exactly the sandboxes of the Machines placed on it: none orphaned, none twice.
    let settled = wait_for("each node's sandboxes those of its Machines", MINUTE, || async {
        let ms = machines.list(&ListParams::default()).await.map_err(|e| e.to_string())?.items;
        let mut all = Vec::new();
        for node in &install.nodes {
            let want: BTreeSet<(String, String)> = ms
                .iter()
                .filter(|m| m.status.as_ref().and_then(|s| s.node_name.as_deref()) == Some(&node.name))
                .map(|m| (runtime_name(ns, &m.name_any()), runtime_id(m)))
                .collect();
            let prefix = format!("kairon-{ns}-");
            let client = node.runtime_client().map_err(|e| e.to_string())?;
            let sandboxes = client.list_sandboxes().await.map_err(|e| e.to_string())?;
            let have: Vec<(String, String)> = sandboxes
                .iter()
                .filter(|s| s.name.starts_with(&prefix))
                .map(|s| (s.name.clone(), s.id.as_str().to_string()))
                .collect();
            let have_set: BTreeSet<(String, String)> = have.iter().cloned().collect();
            if have.len() != want.len() || have_set != want {
                let described = |names: Vec<&(String, String)>| {
                    names
                        .iter()
                        .map(|(n, id)| {
                            let m = ms.iter().find(|m| runtime_name(ns, &m.name_any()) == *n);
                            format!("{n} ({id}): {:?}", m.map(|m| (&m.status, &m.metadata.deletion_timestamp)))
                        })
                        .collect::<Vec<_>>()
                };
                return Err(format!(
                    "node {}: {} sandboxes for {} Machines; sandboxes without their Machine: {:#?}; Machines \
                     without their sandbox: {:#?}",
                    node.name,
                    have.len(),
                    want.len(),
                    described(have_set.difference(&want).collect()),
                    described(want.difference(&have_set).collect()),
                ));
            }
            all.extend(have);
        }
        Ok(all.len())
    })
    .await;
    assert_eq!(settled, CLAIMS + WARM as usize, "{victim:?}: the claimed members and the warm ones");

    // PostgreSQL: usage rows only of these claims, and no claim's intervals overlapping.
    let uids: BTreeSet<String> =
        claims.list(&ListParams::default()).await.unwrap().items.iter().map(|c| c.uid().unwrap()).collect();
    let db = &install.database.url;
    let rows = kairon_e2e::psql_query(
        db,
        &format!("SELECT DISTINCT claim_uid FROM claim_usage_intervals WHERE namespace = '{ns}'"),
    )
    .unwrap();
    for uid in rows.lines().filter(|l| !l.is_empty()) {
        assert!(uids.contains(uid), "{victim:?}: usage of claim {uid}, which never existed here");
    }
    let overlaps = kairon_e2e::psql_query(
        db,
        &format!(
            "SELECT count(*) FROM (SELECT interval_start, lag(interval_end) OVER (PARTITION BY claim_uid \
             ORDER BY interval_start) AS previous_end FROM claim_usage_intervals WHERE namespace = '{ns}') i \
             WHERE interval_start < previous_end"
        ),
    )
    .unwrap();
    assert_eq!(overlaps.trim(), "0", "{victim:?}: usage intervals of one claim overlap");
    eprintln!(
        "{victim:?}: {CLAIMS} claims Bound {all_bound:?} after the restart ({} claims with usage rows); \
         round {:?}",
        rows.lines().filter(|l| !l.is_empty()).count(),
        started.elapsed()
    );

    // The namespace goes with its Machines and their sandboxes before the next victim.
    install.testbed.kubectl(&["delete", "namespace", ns, "--wait=false"]).unwrap();
    eventually("the namespace gone", 3 * MINUTE, || async {
        let names = install.testbed.kubectl(&["get", "namespaces", "-o", "name"]).ok()?;
        (!names.lines().any(|l| l == format!("namespace/{ns}"))).then_some(())
    })
    .await;
}

fn pool(ns: &str) -> MachinePool {
    serde_json::from_value(json!({
        "apiVersion": "kairon.zyvor.dev/v1", "kind": "MachinePool",
        "metadata": {"name": "warm", "namespace": ns},
        "spec": {
            "replicas": WARM, "warmPowerState": "Paused", "warmupSeconds": 0,
            "template": {
                "metadata": {"labels": {"kairon.zyvor.dev/sandbox": "true"}},
                "spec": {"sandbox": {"templateName": "busybox"}}
            }
        }
    }))
    .unwrap()
}

fn claim(name: &str) -> MachineClaim {
    serde_json::from_value(json!({
        "apiVersion": "kairon.zyvor.dev/v1", "kind": "MachineClaim",
        "metadata": {"name": name},
        "spec": {"poolName": "warm"}
    }))
    .unwrap()
}

/// The Bound claims and their Machines.
async fn bound(claims: &Api<MachineClaim>) -> BTreeMap<String, String> {
    let Ok(list) = claims.list(&ListParams::default()).await else { return BTreeMap::new() };
    list.items
        .iter()
        .filter_map(|c| {
            let s = c.status.as_ref()?;
            (s.phase == Some(ClaimPhase::Bound)).then(|| Some((c.name_any(), s.machine_name.clone()?)))?
        })
        .collect()
}

fn phase(m: &Machine) -> String {
    m.status.as_ref().and_then(|s| s.phase).map(|p| format!("{p:?}")).unwrap_or_default()
}

fn runtime_id(m: &Machine) -> String {
    m.status.as_ref().and_then(|s| s.runtime_id.clone()).unwrap_or_default()
}
