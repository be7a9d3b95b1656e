//! The scheduler: places each new Machine on a node that has the backend it needs and room
//! for it, or leaves it Pending with a condition that says why no node fits.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use serde_json::json;

use kairon_model::keys::reasons;
use kairon_model::placement::{Demand, NodeView, choose, demand, node_view, tally};
use kairon_model::{Condition, KaironNode, Machine, MachinePhase};

struct Ctx {
    client: kube::Client,
    machines: Store<Machine>,
    nodes: Store<KaironNode>,
    recorder: Recorder,
    /// Placements made but not yet seen in the Machine store (so two binds in quick succession
    /// do not both take the last slot).
    assumed: Mutex<HashMap<String, (String, Demand)>>,
}

#[derive(Debug, thiserror::Error)]
pub enum SchedulerError {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
}

fn views(ctx: &Ctx) -> Vec<NodeView> {
    let now = k8s_openapi::jiff::Timestamp::now();
    let mut views: Vec<NodeView> = ctx.nodes.state().iter().map(|n| node_view(n, now)).collect();
    let mut assumed = ctx.assumed.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    tally(&mut views, &ctx.machines.state(), &mut assumed);
    views.sort_by(|a, b| a.name.cmp(&b.name));
    views
}

async fn reconcile(m: Arc<Machine>, ctx: Arc<Ctx>) -> Result<Action, SchedulerError> {
    if m.status.as_ref().and_then(|s| s.node_name.as_ref()).is_some() || m.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let d = demand(&m.spec);
    let api: Api<Machine> = Api::namespaced(ctx.client.clone(), &m.namespace().unwrap_or_default());
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let template = m.spec.sandbox.as_ref().and_then(|s| s.template_name.as_deref());
    match choose(&views(&ctx), d, m.spec.node_name.as_deref(), template) {
        Ok(node) => {
            let cond = Condition {
                type_: "Scheduled".into(),
                status: "True".into(),
                reason: "Scheduled".into(),
                message: format!("placed on node {node}"),
                last_transition_time: Some(now),
                observed_generation: m.metadata.generation,
            };
            let mut conditions: Vec<Condition> = m
                .status
                .as_ref()
                .map(|s| s.conditions.clone())
                .unwrap_or_default()
                .into_iter()
                .filter(|c| c.type_ != "Scheduled")
                .collect();
            conditions.push(cond);
            // Only over the Machine as read: a reconcile from a cache that had not yet seen an
            // earlier placement would otherwise place it again, on another node, while the first
            // node already runs its sandbox.
            let patch = json!({
                "metadata": {"resourceVersion": m.resource_version()},
                "status": {"nodeName": node, "phase": MachinePhase::Provisioning, "conditions": conditions},
            });
            match api.patch_status(&m.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await {
                // Changed since it was read: the newer version comes through the watch.
                Err(kube::Error::Api(s)) if s.code == 409 => return Ok(Action::await_change()),
                r => r.map(|_| ())?,
            }
            ctx.assumed
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(m.uid().unwrap_or_default(), (node.clone(), d));
            let ev = Event {
                type_: EventType::Normal,
                reason: reasons::SCHEDULED.into(),
                note: Some(format!("placed on node {node}")),
                action: "Schedule".into(),
                secondary: None,
            };
            let _ = ctx.recorder.publish(&ev, &m.object_ref(&())).await;
            Ok(Action::await_change())
        }
        Err(why) => {
            let old = m
                .status
                .as_ref()
                .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Scheduled"))
                .map(|c| c.message.clone());
            if old.as_deref() != Some(why.as_str()) {
                let cond = json!({"type": "Scheduled", "status": "False", "reason": "Unschedulable", "message": why, "lastTransitionTime": now});
                let mut conditions: Vec<serde_json::Value> = m
                    .status
                    .as_ref()
                    .map(|s| s.conditions.iter().filter(|c| c.type_ != "Scheduled").map(|c| json!(c)).collect())
                    .unwrap_or_default();
                conditions.push(cond);
                let patch = json!({
                    "metadata": {"resourceVersion": m.resource_version()},
                    "status": {"phase": MachinePhase::Pending, "conditions": conditions},
                });
                match api.patch_status(&m.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await {
                    Err(kube::Error::Api(s)) if s.code == 409 => return Ok(Action::await_change()),
                    r => r.map(|_| ())?,
                }
                let ev = Event {
                    type_: EventType::Warning,
                    reason: reasons::FAILED_SCHEDULING.into(),
                    note: Some(why),
                    action: "Schedule".into(),
                    secondary: None,
                };
                let _ = ctx.recorder.publish(&ev, &m.object_ref(&())).await;
            }
            // A node joining or changing re-queues it (see `run`); this is only a backstop.
            Ok(Action::requeue(Duration::from_secs(60)))
        }
    }
}

fn error_policy(m: Arc<Machine>, e: &SchedulerError, _: Arc<Ctx>) -> Action {
    tracing::warn!(machine = %m.name_any(), error = %e, "scheduling failed; retrying");
    Action::requeue(Duration::from_secs(2))
}

/// Runs the scheduler until its stream ends. One Machine is placed at a time, so capacity is
/// never promised twice.
pub async fn run(client: kube::Client, shutdown: tokio_util::sync::CancellationToken) {
    let machines: Api<Machine> = Api::all(client.clone());
    let nodes: Api<KaironNode> = Api::all(client.clone());
    let (node_store, node_writer) = kube::runtime::reflector::store();
    // With a backoff: a watcher retries at once after an error, so without one it spins while
    // the API is unreachable (and then never yields, which keeps the process from exiting).
    // Polled below, beside the controller, so it ends with it (e.g. when leadership is lost).
    let node_stream = kube::runtime::reflector(
        node_writer,
        kube::runtime::WatchStreamExt::default_backoff(watcher(nodes.clone(), watcher::Config::default())),
    )
    .for_each(|_| async {});
    let controller = Controller::new(machines, watcher::Config::default());
    let machine_store = controller.store();
    let pending_store = machine_store.clone();
    let reporter = Reporter { controller: "kairon-scheduler".into(), instance: None };
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        machines: machine_store,
        nodes: node_store,
        recorder: Recorder::new(client, reporter),
        assumed: Mutex::new(HashMap::new()),
    });
    // A node that joins, changes capacity or heartbeats can make pending Machines fit: those
    // that may go there. A Machine pinned to another node cannot (1,000 Machines pinned to an
    // absent node were otherwise all reconciled again on every heartbeat, one at a time, and a
    // new Machine waited behind them for minutes).
    let pending = move |n: KaironNode| {
        let node = n.name_any();
        pending_store
            .state()
            .into_iter()
            .filter(|m| m.status.as_ref().and_then(|s| s.node_name.as_ref()).is_none())
            .filter(|m| m.spec.node_name.as_ref().is_none_or(|pinned| *pinned == node))
            .map(|m| ObjectRef::from_obj(&*m))
            .collect::<Vec<_>>()
    };
    let controller = controller
        .with_config(kube::runtime::controller::Config::default().concurrency(1))
        .graceful_shutdown_on(shutdown.cancelled_owned())
        .watches(nodes, watcher::Config::default(), pending)
        .run(reconcile, error_policy, ctx)
        .for_each(|_| async {});
    tokio::select! {
        _ = controller => {}
        _ = node_stream => {}
    }
}
