//! Placement: what a Machine asks of a node, what each node offers, and which node fits. Pure
//! functions over registered nodes and placed Machines: the scheduler places new Machines with
//! them, the pool controller counts the room left, and a migration plan says per node why it
//! fits or not.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use kube::ResourceExt;

use crate::{KaironNode, Machine, MachineSpec, NodeBackend};

/// What a template sandbox reserves on its node. Its limits are the template's (1 CPU, 512 MiB)
/// but it idles most of its life (a paused one uses no CPU and well under 1 MiB), so it is
/// placed by this request, as Kubernetes places pods by requests rather than limits.
pub const TEMPLATE_CPU_MILLIS: i64 = 100;
pub const TEMPLATE_MEMORY_BYTES: u64 = 64 * 1024 * 1024;
// What a template sandbox may use is `kairon_model::quota::resources_of`: what quota counts
// and usage bills.

/// A node is considered gone when its heartbeat is older than this.
pub const NODE_STALE_AFTER: Duration = Duration::from_secs(60);

/// What a Machine asks of a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Demand {
    pub backend: NodeBackend,
    pub cpu_millis: i64,
    pub memory_bytes: u64,
}

pub fn demand(spec: &MachineSpec) -> Demand {
    let template_sandbox = spec.sandbox.as_ref().is_some_and(|s| s.template_name.is_some());
    let backend = if template_sandbox { NodeBackend::Sandbox } else { NodeBackend::Vm };
    let r = spec.resources.as_ref().filter(|_| !template_sandbox);
    Demand {
        backend,
        cpu_millis: r.and_then(|r| r.cpu.as_ref()).and_then(|q| q.to_milli().ok()).unwrap_or(TEMPLATE_CPU_MILLIS),
        memory_bytes: r
            .and_then(|r| r.memory.as_ref())
            .and_then(|q| q.to_bytes().ok())
            .unwrap_or(TEMPLATE_MEMORY_BYTES),
    }
}

/// What a placed Machine holds on its node: its demand, or more while its node still runs it at
/// a larger size than a shrunk spec asks (`status.resources`). A template sandbox's size is its
/// template's, whatever its spec says, so its demand is what it holds.
fn held(m: &Machine) -> Demand {
    let d = demand(&m.spec);
    if d.backend == NodeBackend::Sandbox {
        return d;
    }
    let Some(started) = m.status.as_ref().and_then(|s| s.resources.as_ref()) else { return d };
    let cpu = started.cpu.as_ref().and_then(|q| q.to_milli().ok()).unwrap_or(0);
    let memory = started.memory.as_ref().and_then(|q| q.to_bytes().ok()).unwrap_or(0);
    Demand { cpu_millis: d.cpu_millis.max(cpu), memory_bytes: d.memory_bytes.max(memory), ..d }
}

/// A node as the scheduler sees it: what it offers and what is already placed on it.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeView {
    pub name: String,
    pub backends: Vec<NodeBackend>,
    pub cpu_millis: i64,
    pub memory_bytes: u64,
    pub max_machines: Option<i32>,
    pub used_cpu_millis: i64,
    pub used_memory_bytes: u64,
    pub machines: i32,
    pub fresh: bool,
    /// The templates the node reported built; None before it reported.
    pub templates: Option<Vec<String>>,
}

impl NodeView {
    fn has_template(&self, name: &str) -> bool {
        self.templates.as_ref().is_some_and(|ts| ts.iter().any(|t| t == name))
    }
}

/// Picks the node with the most free memory among those that fit (ties: by name), or explains
/// for every node why it does not. A template sandbox (`template`) goes to a node that has its
/// template built when any fresh node has; when none has, it is placed as any other and its
/// node says the template is missing (or builds `python` on first use).
pub fn choose(nodes: &[NodeView], d: Demand, pinned: Option<&str>, template: Option<&str>) -> Result<String, String> {
    let template = needed_template(nodes, template);
    let mut why = Vec::new();
    let mut best: Option<&NodeView> = None;
    for n in nodes {
        if pinned.is_some_and(|p| p != n.name) {
            continue;
        }
        match unfit(n, d, template) {
            Some(r) => why.push(format!("{}: {r}", n.name)),
            None => {
                let free = |n: &NodeView| n.memory_bytes.saturating_sub(n.used_memory_bytes);
                if best.is_none_or(|b| free(n) > free(b)) {
                    best = Some(n);
                }
            }
        }
    }
    if let Some(b) = best {
        return Ok(b.name.clone());
    }
    if let Some(p) = pinned
        && !nodes.iter().any(|n| n.name == p)
    {
        return Err(format!("spec.nodeName {p:?} is not a registered node"));
    }
    if nodes.is_empty() {
        return Err("no node is registered: start a node agent (kairon up or kairon node)".into());
    }
    Err(format!("no node fits: {}", why.join("; ")))
}

/// The template a sandbox must find on its node: only when some fresh node has it built (built
/// nowhere, any node may take it, and its node says it is missing or builds it).
pub fn needed_template<'a>(nodes: &[NodeView], template: Option<&'a str>) -> Option<&'a str> {
    template.filter(|t| nodes.iter().any(|n| n.fresh && n.has_template(t)))
}

/// Why node `n` cannot take a Machine asking `d`; None when it can. `template` is what
/// [`needed_template`] answered.
pub fn unfit(n: &NodeView, d: Demand, template: Option<&str>) -> Option<String> {
    if !n.fresh {
        Some("its node agent has not reported recently".to_string())
    } else if !n.backends.contains(&d.backend) {
        Some(format!("it has no {} backend", backend_name(d.backend)))
    } else if let Some(t) = template.filter(|t| !n.has_template(t)) {
        Some(format!("template {t:?} is not built on it (other nodes have it)"))
    } else if n.max_machines.is_some_and(|max| n.machines >= max) {
        Some(format!("it already runs its maximum of {} Machines", n.machines))
    } else if n.cpu_millis - n.used_cpu_millis < d.cpu_millis {
        Some(format!("{}m CPU free, {}m needed", n.cpu_millis - n.used_cpu_millis, d.cpu_millis))
    } else if n.memory_bytes.saturating_sub(n.used_memory_bytes) < d.memory_bytes {
        Some(format!(
            "{} MiB memory free, {} MiB needed",
            n.memory_bytes.saturating_sub(n.used_memory_bytes) >> 20,
            d.memory_bytes >> 20
        ))
    } else {
        None
    }
}

fn backend_name(b: NodeBackend) -> &'static str {
    match b {
        NodeBackend::Sandbox => "sandbox (runc)",
        NodeBackend::Vm => "vm (QEMU)",
    }
}

/// The cluster's cap on a node's CPU where no admin set `spec.capacity`, in millicores: a node
/// agent reports its own size, so one that lies draws at most this much (1,024 vCPUs, what a
/// 102-core host offers at the node's 10× overcommit). An admin sets it per node with
/// `spec.capacity`.
pub const DEFAULT_NODE_CAP_CPU_MILLIS: i64 = 1024 * 1000;
/// The same for memory, in bytes (2 TiB).
pub const DEFAULT_NODE_CAP_MEMORY_BYTES: u64 = 2 << 40;

/// What the scheduler may place on `n`: what it measured (`status.capacity`), capped by an
/// admin's `spec.capacity` or else by the cluster's default cap. Nothing before it reported.
pub fn effective_capacity(n: &KaironNode) -> (i64, u64, Option<i32>) {
    let Some(measured) = n.status.as_ref().and_then(|s| s.capacity.as_ref()) else {
        return (0, 0, Some(0));
    };
    let cpu = measured.cpu.to_milli().unwrap_or(0);
    let memory = measured.memory.to_bytes().unwrap_or(0);
    let (cap_cpu, cap_memory, cap_machines) = match &n.spec.capacity {
        Some(cap) => (cap.cpu.to_milli().unwrap_or(0), cap.memory.to_bytes().unwrap_or(0), cap.machines),
        None => (DEFAULT_NODE_CAP_CPU_MILLIS, DEFAULT_NODE_CAP_MEMORY_BYTES, None),
    };
    let machines = match (measured.machines, cap_machines) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    (cpu.min(cap_cpu), memory.min(cap_memory), machines)
}

/// A node as registered, with nothing yet counted on it; `fresh` from its heartbeat.
pub fn node_view(n: &KaironNode, now: k8s_openapi::jiff::Timestamp) -> NodeView {
    let fresh = n
        .status
        .as_ref()
        .and_then(|s| s.heartbeat_time.as_ref())
        .is_some_and(|t| (now.as_second() - t.0.as_second()) < NODE_STALE_AFTER.as_secs() as i64);
    let (cpu_millis, memory_bytes, max_machines) = effective_capacity(n);
    NodeView {
        name: n.name_any(),
        backends: n.spec.backends.clone(),
        cpu_millis,
        memory_bytes,
        max_machines,
        used_cpu_millis: 0,
        used_memory_bytes: 0,
        machines: 0,
        fresh,
        templates: n.status.as_ref().and_then(|s| s.templates.clone()),
    }
}

/// How many more Machines asking `d` the nodes have room for, as [`choose`] would place them.
pub fn room(nodes: &[NodeView], d: Demand) -> i64 {
    nodes
        .iter()
        .filter(|n| n.fresh && n.backends.contains(&d.backend))
        .map(|n| {
            let by_count = n.max_machines.map_or(i64::MAX, |max| i64::from(max - n.machines).max(0));
            let by_cpu = (n.cpu_millis - n.used_cpu_millis).max(0).checked_div(d.cpu_millis).unwrap_or(i64::MAX);
            let free_memory = n.memory_bytes.saturating_sub(n.used_memory_bytes);
            let by_memory = free_memory.checked_div(d.memory_bytes).map_or(i64::MAX, |m| m as i64);
            by_count.min(by_cpu).min(by_memory)
        })
        .fold(0i64, i64::saturating_add)
}

/// Counts on each node the Machines placed there, and the placements `assumed` not yet seen
/// in `machines`. An assumption ends when its Machine shows its node, or is gone (deleted
/// before the store saw it placed): kept, it would hold its share of the node forever.
pub fn tally(views: &mut [NodeView], machines: &[Arc<Machine>], assumed: &mut HashMap<String, (String, Demand)>) {
    let mut add = |node: &str, d: Demand| {
        if let Some(v) = views.iter_mut().find(|v| v.name == node) {
            v.used_cpu_millis += d.cpu_millis;
            v.used_memory_bytes += d.memory_bytes;
            v.machines += 1;
        }
    };
    let present: std::collections::HashSet<&str> = machines.iter().filter_map(|m| m.metadata.uid.as_deref()).collect();
    assumed.retain(|uid, _| present.contains(uid.as_str()));
    for m in machines {
        if let Some(node) = m.status.as_ref().and_then(|s| s.node_name.as_deref()) {
            assumed.remove(m.metadata.uid.as_deref().unwrap_or_default());
            add(node, held(m));
        }
    }
    for (node, d) in assumed.values() {
        add(node, *d);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn node(name: &str, backends: &[NodeBackend], cpu: i64, mem_gib: u64) -> NodeView {
        NodeView {
            name: name.into(),
            backends: backends.to_vec(),
            cpu_millis: cpu,
            memory_bytes: mem_gib << 30,
            max_machines: None,
            used_cpu_millis: 0,
            used_memory_bytes: 0,
            machines: 0,
            fresh: true,
            templates: Some(vec!["busybox".into()]),
        }
    }

    const SANDBOX: Demand = Demand { backend: NodeBackend::Sandbox, cpu_millis: 100, memory_bytes: 64 << 20 };
    const VM: Demand = Demand { backend: NodeBackend::Vm, cpu_millis: 2000, memory_bytes: 2 << 30 };

    #[test]
    fn a_node_offers_what_it_measured_capped_by_the_admin_or_the_cluster_default() {
        let node = |spec: Value, status: Value| -> KaironNode {
            serde_json::from_value(json!({"apiVersion": "kairon.zyvor.dev/v1", "kind": "KaironNode",
                "metadata": {"name": "n"}, "spec": spec, "status": status}))
            .unwrap()
        };
        let endpoint = json!({"runtimeEndpoint": "https://n:7444"});
        let lying = json!({"capacity": {"cpu": "100000", "memory": "1Pi", "machines": 100000}});
        // No admin cap: the cluster's default maximum.
        assert_eq!(
            effective_capacity(&node(endpoint.clone(), lying.clone())),
            (DEFAULT_NODE_CAP_CPU_MILLIS, DEFAULT_NODE_CAP_MEMORY_BYTES, Some(100000))
        );
        // An admin's cap.
        let mut capped = endpoint.clone();
        capped["capacity"] = json!({"cpu": "4", "memory": "2Gi", "machines": 10});
        assert_eq!(effective_capacity(&node(capped.clone(), lying)), (4000, 2 << 30, Some(10)));
        // A node offering less than its cap offers what it has.
        let small = json!({"capacity": {"cpu": "2", "memory": "1Gi"}});
        assert_eq!(effective_capacity(&node(capped.clone(), small)), (2000, 1 << 30, Some(10)));
        // Nothing before it reported.
        assert_eq!(effective_capacity(&node(capped, json!({}))), (0, 0, Some(0)));
    }

    #[test]
    fn an_assumed_placement_ends_when_its_machine_shows_its_node_or_is_gone() {
        let machine = |uid: &str, node: Option<&str>| -> Arc<Machine> {
            Arc::new(
                serde_json::from_value(json!({
                    "apiVersion": "kairon.zyvor.dev/v1", "kind": "Machine",
                    "metadata": {"name": uid, "namespace": "ns", "uid": uid},
                    "spec": {"sandbox": {"templateName": "busybox"}}, "status": {"nodeName": node},
                }))
                .unwrap(),
            )
        };
        let mut assumed: HashMap<String, (String, Demand)> = [
            ("placed".to_string(), ("a".to_string(), SANDBOX)),
            ("unseen".to_string(), ("a".to_string(), SANDBOX)),
            ("deleted".to_string(), ("a".to_string(), SANDBOX)),
        ]
        .into();
        let machines = [machine("placed", Some("a")), machine("unseen", None), machine("other", Some("a"))];
        let mut views = [node("a", &[NodeBackend::Sandbox], 4000, 8)];
        tally(&mut views, &machines, &mut assumed);
        assert_eq!(assumed.keys().map(String::as_str).collect::<Vec<_>>(), ["unseen"]);
        assert_eq!(views[0].machines, 3, "two placed, one assumed; the deleted one holds nothing");
    }

    #[test]
    fn a_placed_vm_holds_what_its_node_started_and_a_template_sandbox_its_demand() {
        let placed = |spec: Value| -> Arc<Machine> {
            Arc::new(
                serde_json::from_value(json!({
                    "apiVersion": "kairon.zyvor.dev/v1", "kind": "Machine",
                    "metadata": {"name": "m", "namespace": "ns", "uid": "u"}, "spec": spec,
                    "status": {"nodeName": "a", "resources": {"cpu": "2", "memory": "2Gi"}},
                }))
                .unwrap(),
            )
        };
        let shrunk = placed(json!({"image": {"path": "/i"}, "resources": {"cpu": "1", "memory": "512Mi"}}));
        let mut views = [node("a", &[NodeBackend::Vm, NodeBackend::Sandbox], 8000, 8)];
        tally(&mut views, &[shrunk], &mut HashMap::new());
        assert_eq!((views[0].used_cpu_millis, views[0].used_memory_bytes), (2000, 2 << 30));
        let sandbox = placed(json!({"sandbox": {"templateName": "busybox"}}));
        let mut views = [node("a", &[NodeBackend::Sandbox], 8000, 8)];
        tally(&mut views, &[sandbox], &mut HashMap::new());
        assert_eq!((views[0].used_cpu_millis, views[0].used_memory_bytes), (SANDBOX.cpu_millis, SANDBOX.memory_bytes));
    }

    #[test]
    fn room_counts_what_fits_on_fresh_nodes_with_the_backend() {
        let mut a = node("a", &[NodeBackend::Sandbox], 1000, 1);
        a.used_cpu_millis = 500;
        let mut b = node("b", &[NodeBackend::Sandbox, NodeBackend::Vm], 100_000, 1);
        b.max_machines = Some(3);
        b.machines = 1;
        let mut stale = node("c", &[NodeBackend::Sandbox], 100_000, 100);
        stale.fresh = false;
        let nodes = [a, b, stale, node("d", &[NodeBackend::Vm], 100_000, 100)];
        // a: 5 by CPU, 16 by memory; b: 2 by count; c is stale; d has no sandboxes.
        assert_eq!(room(&nodes, SANDBOX), 5 + 2);
        assert_eq!(room(&nodes, VM), 50, "b fits no 2 GiB VM in 1 GiB; d fits 50");
    }

    #[test]
    fn backend_and_room_decide() {
        let nodes =
            [node("a", &[NodeBackend::Sandbox], 4000, 8), node("b", &[NodeBackend::Sandbox, NodeBackend::Vm], 4000, 4)];
        assert_eq!(choose(&nodes, VM, None, None), Ok("b".into()));
        assert_eq!(choose(&nodes, SANDBOX, None, None), Ok("a".into()), "the most free memory wins");
        let err = choose(&nodes[..1], VM, None, None).unwrap_err();
        assert_eq!(err, "no node fits: a: it has no vm (QEMU) backend");
        let mut full = node("c", &[NodeBackend::Sandbox], 1500, 8);
        full.used_cpu_millis = 1450;
        assert_eq!(choose(&[full], SANDBOX, None, None).unwrap_err(), "no node fits: c: 50m CPU free, 100m needed");
    }

    #[test]
    fn a_template_sandbox_goes_where_its_template_is_built() {
        let mut b = node("b", &[NodeBackend::Sandbox], 4000, 1);
        b.templates = Some(vec!["busybox".into(), "only-b".into()]);
        let mut unreported = node("c", &[NodeBackend::Sandbox], 4000, 8);
        unreported.templates = None;
        // a has the most free memory, but only b has the template.
        let nodes = [node("a", &[NodeBackend::Sandbox], 4000, 8), b.clone(), unreported];
        assert_eq!(choose(&nodes, SANDBOX, None, Some("only-b")), Ok("b".into()));
        assert_eq!(
            choose(&nodes, SANDBOX, None, Some("busybox")),
            Ok("a".into()),
            "on both a and b: the most free memory"
        );
        // Built nowhere: placed as any other (the node then says it is missing, or builds python).
        assert_eq!(choose(&nodes, SANDBOX, None, Some("nowhere")), Ok("a".into()));
        // Where it is built but full, the others are not used, and the reasons say so.
        b.used_cpu_millis = 4000;
        let nodes = [node("a", &[NodeBackend::Sandbox], 4000, 8), b];
        let err = choose(&nodes, SANDBOX, None, Some("only-b")).unwrap_err();
        assert_eq!(
            err,
            "no node fits: a: template \"only-b\" is not built on it (other nodes have it); b: 0m CPU free, 100m needed"
        );
        // A stale node's templates do not count.
        let mut stale = node("s", &[NodeBackend::Sandbox], 4000, 1);
        stale.templates = Some(vec!["only-s".into()]);
        stale.fresh = false;
        let nodes = [node("a", &[NodeBackend::Sandbox], 4000, 8), stale];
        assert_eq!(choose(&nodes, SANDBOX, None, Some("only-s")), Ok("a".into()));
    }

    #[test]
    fn pinning_staleness_and_limits() {
        let mut stale = node("old", &[NodeBackend::Sandbox], 4000, 8);
        stale.fresh = false;
        let mut capped = node("capped", &[NodeBackend::Sandbox], 4000, 8);
        capped.max_machines = Some(2);
        capped.machines = 2;
        let nodes = [stale, capped, node("z", &[NodeBackend::Sandbox], 1000, 1)];
        assert_eq!(choose(&nodes, SANDBOX, None, None), Ok("z".into()));
        assert_eq!(choose(&nodes, SANDBOX, Some("z"), None), Ok("z".into()));
        assert!(choose(&nodes, SANDBOX, Some("old"), None).unwrap_err().contains("has not reported recently"));
        assert_eq!(
            choose(&nodes, SANDBOX, Some("nope"), None).unwrap_err(),
            "spec.nodeName \"nope\" is not a registered node"
        );
        assert!(choose(&[], SANDBOX, None, None).unwrap_err().starts_with("no node is registered"));
    }

    #[test]
    fn demand_of_a_template_sandbox_ignores_resources() {
        let spec: MachineSpec = serde_json::from_value(json!({
            "sandbox": {"templateName": "busybox"}, "resources": {"cpu": "8", "memory": "64Gi"}
        }))
        .unwrap();
        assert_eq!(demand(&spec), SANDBOX);
        let vm: MachineSpec =
            serde_json::from_value(json!({"image": {"path": "/i.qcow2"}, "resources": {"cpu": "2", "memory": "2Gi"}}))
                .unwrap();
        assert_eq!(demand(&vm), VM);
    }
}
