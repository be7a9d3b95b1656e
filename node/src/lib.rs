//! kairon-node: the node agent. It registers its node, then reconciles every Machine the
//! scheduler placed here onto the node's runtime (through the FluxVM v1 API only), follows
//! `spec.powerState`, reports status, and samples activity for lifecycle Machines.

pub mod activity;
mod templates;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::finalizer::{Event as Finalizer, finalizer};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use serde_json::json;
pub use tokio_util::sync::CancellationToken;

use kairon_model::keys::{annotations, finalizers};
use kairon_model::node::{Acceleration, NodeCapacity};
use kairon_model::power;
use kairon_model::template::node_template_name;
use kairon_model::{
    Condition, KaironNode, KaironNodeSpec, KaironTemplate, Machine, MachinePhase, MachineStatus, NodeBackend,
    PowerState, Quantity,
};
use kairon_runtime_api::types::{CreateVmRequest, PowerAction, Vm, VmState};
use kairon_runtime_api::{CertificatePin, ClientError, InstanceId, RuntimeClient};

use activity::Sample;

#[derive(Clone, Debug)]
pub struct NodeConfig {
    pub node_name: String,
    pub runtime_endpoint: String,
    pub runtime_token: String,
    /// How often lifecycle Machines are sampled.
    pub tick: Duration,
    /// `status.lifecycle.lastActivityTime` is written at most this often.
    pub activity_write_interval: Duration,
    pub heartbeat_interval: Duration,
    /// Capacity to advertise; the host's CPUs and memory when unset.
    pub cpu: Option<Quantity>,
    pub memory: Option<Quantity>,
    pub max_machines: Option<i32>,
    /// The CA (PEM) that signs the runtime's certificate, when it is reached over `https` and
    /// its certificate is not pinned.
    pub runtime_ca: Option<Vec<u8>>,
    /// The certificate the runtime serves (over `https`), registered in the KaironNode: this
    /// agent and the api trust that certificate alone for this node.
    pub runtime_certificate: Option<CertificatePin>,
}

impl NodeConfig {
    pub fn new(node_name: &str, runtime_endpoint: &str, runtime_token: &str) -> Self {
        NodeConfig {
            node_name: node_name.into(),
            runtime_endpoint: runtime_endpoint.into(),
            runtime_token: runtime_token.into(),
            tick: Duration::from_secs(10),
            activity_write_interval: Duration::from_secs(30),
            heartbeat_interval: Duration::from_secs(10),
            cpu: None,
            memory: None,
            max_machines: None,
            runtime_ca: None,
            runtime_certificate: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("runtime: {0}")]
    Runtime(#[from] ClientError),
    #[error("finalizer: {0}")]
    Finalizer(String),
    /// Another writer changed the Machine's finalizers since this agent's cache saw it (the
    /// finalizer helper's JSON patch `test` fails with 422, or a 409): the retry reads it anew.
    #[error("finalizer raced another writer: {0}")]
    FinalizerRaced(String),
    #[error("kubeconfig {0}")]
    Config(String),
}

struct Ctx {
    client: kube::Client,
    runtime: RuntimeClient,
    cfg: NodeConfig,
    recorder: Recorder,
    /// The last counters of each lifecycle Machine (by uid), for the activity check.
    samples: Mutex<HashMap<String, Sample>>,
    started: Instant,
    /// The Machine of each runtime instance this agent has seen (for egress Events).
    machines: Mutex<HashMap<String, ObjectReference>>,
}

/// A node advertises this many vCPUs per host CPU by default: Machines are placed by what they
/// request, and sandboxes idle most of their life (memory is not overcommitted).
pub const CPU_OVERCOMMIT: usize = 10;

fn host_capacity() -> (Quantity, Quantity) {
    let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1) * CPU_OVERCOMMIT;
    let mem_kib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .unwrap_or(1024 * 1024);
    (Quantity(cpus.to_string()), Quantity(format!("{mem_kib}Ki")))
}

/// Creates or updates this node's KaironNode from what its runtime offers.
async fn register(client: &kube::Client, cfg: &NodeConfig, runtime: &RuntimeClient) -> Result<(), NodeError> {
    let info = runtime.node().await?;
    let backends: Vec<NodeBackend> = info["backends"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|b| serde_json::from_value(b.clone()).ok())
        .collect();
    let acceleration: Option<Acceleration> = serde_json::from_value(info["acceleration"].clone()).ok();
    // No spec.capacity: that is an admin's cap; what this node offers goes in its status.
    let spec = KaironNodeSpec {
        runtime_endpoint: cfg.runtime_endpoint.clone(),
        runtime_certificate_sha256: cfg.runtime_certificate.map(|pin| pin.to_string()),
        capacity: None,
        backends,
        acceleration,
    };
    let api: Api<KaironNode> = Api::all(client.clone());
    // A merge patch of the fields the node owns, so an admin's spec.capacity stays as it is
    // (an apply would drop one this node applied before capacity became the admin's).
    let fields = json!({"spec": {
        "runtimeEndpoint": spec.runtime_endpoint,
        "runtimeCertificateSha256": spec.runtime_certificate_sha256,
        "backends": spec.backends,
        "acceleration": spec.acceleration,
    }});
    match api.patch(&cfg.node_name, &PatchParams::default(), &Patch::Merge(&fields)).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 404 => {
            let node = KaironNode::new(&cfg.node_name, spec);
            match api.create(&Default::default(), &node).await {
                // Another agent of this node registered between the two calls: patch it again.
                Err(kube::Error::Api(e)) if e.code == 409 => {
                    api.patch(&cfg.node_name, &PatchParams::default(), &Patch::Merge(&fields)).await?;
                }
                r => {
                    r?;
                }
            }
        }
        Err(e) => return Err(e.into()),
    }
    heartbeat(client, cfg, runtime).await
}

async fn heartbeat(client: &kube::Client, cfg: &NodeConfig, runtime: &RuntimeClient) -> Result<(), NodeError> {
    let api: Api<KaironNode> = Api::all(client.clone());
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let (cpu, memory) = host_capacity();
    let capacity = NodeCapacity {
        cpu: cfg.cpu.clone().unwrap_or(cpu),
        memory: cfg.memory.clone().unwrap_or(memory),
        machines: cfg.max_machines,
    };
    let mut status = json!({"status": {"heartbeatTime": now, "capacity": capacity, "conditions": [{
        "type": "Ready", "status": "True", "reason": "RuntimeReachable",
        "message": "the node agent and its runtime are up", "lastTransitionTime": now
    }]}});
    // The templates it can start sandboxes from, for the scheduler; a runtime that cannot say
    // now leaves the last report as it was.
    match ready_templates(runtime).await {
        Ok(names) => status["status"]["templates"] = json!(names),
        Err(e) => tracing::debug!(error = %e, "listing the runtime's templates for the heartbeat"),
    }
    api.patch_status(&cfg.node_name, &PatchParams::default(), &Patch::Merge(&status)).await?;
    Ok(())
}

/// The names of the runtime's Ready templates, sorted.
async fn ready_templates(runtime: &RuntimeClient) -> Result<Vec<String>, NodeError> {
    let mut names: Vec<String> = runtime
        .templates()
        .await?
        .into_iter()
        .filter(|t| t.state == kairon_runtime_api::types::TemplateState::Ready)
        .map(|t| t.name)
        .collect();
    names.sort();
    Ok(names)
}

/// Runs the node agent until the stream of Machines ends, or until `shutdown` is cancelled:
/// it then takes no new work, finishes the reconciles in flight, stops its heartbeat and
/// returns. The runtime's instances are left as they are (a restarted agent adopts them).
pub async fn run(client: kube::Client, cfg: NodeConfig, shutdown: CancellationToken) -> Result<(), NodeError> {
    // One client of the runtime for registering, the heartbeat and the reconciles.
    let runtime = kairon_runtime_api::RuntimeConnector::with_ca(&cfg.runtime_token, cfg.runtime_ca.as_deref())?
        .client_for(&cfg.node_name, &cfg.runtime_endpoint, cfg.runtime_certificate)?;
    tokio::select! {
        r = register(&client, &cfg, &runtime) => r?,
        _ = shutdown.cancelled() => return Ok(()),
    }
    // The heartbeat lives as long as this call (an agent started over gets a new one).
    let beat = shutdown.child_token();
    let _stop_beat = beat.clone().drop_guard();
    {
        let (client, cfg, runtime) = (client.clone(), cfg.clone(), runtime.clone());
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(cfg.heartbeat_interval);
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = beat.cancelled() => return,
                }
                let result = tokio::select! {
                    r = heartbeat(&client, &cfg, &runtime) => r,
                    _ = beat.cancelled() => return,
                };
                if let Err(e) = result {
                    tracing::warn!(error = %e, "node heartbeat failed");
                }
            }
        });
    }
    let reporter = Reporter { controller: "kairon-node".into(), instance: Some(cfg.node_name.clone()) };
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        runtime,
        recorder: Recorder::new(client.clone(), reporter),
        cfg: cfg.clone(),
        samples: Mutex::new(HashMap::new()),
        started: Instant::now(),
        machines: Mutex::new(HashMap::new()),
    });
    tokio::spawn(follow_egress_denials(ctx.clone(), shutdown.child_token()));
    tokio::spawn(templates::run(client.clone(), ctx.runtime.clone(), cfg.node_name.clone(), shutdown.child_token()));
    let machines: Api<Machine> = Api::all(client);
    let mine = watcher::Config::default().fields(&format!("status.nodeName={}", cfg.node_name));
    Controller::new(machines, mine)
        .graceful_shutdown_on(shutdown.cancelled_owned())
        .run(reconcile, error_policy, ctx)
        .for_each(|r| async move {
            if let Err(e) = r {
                tracing::debug!(error = %e, "node reconcile");
            }
        })
        .await;
    Ok(())
}

fn error_policy(m: Arc<Machine>, e: &NodeError, _: Arc<Ctx>) -> Action {
    let raced = match e {
        NodeError::FinalizerRaced(_) => true,
        NodeError::Kube(kube::Error::Api(s)) => s.code == 409,
        _ => false,
    };
    if raced {
        // Expected while claims and pools write the same Machine: not a failure to report.
        tracing::debug!(machine = %m.name_any(), error = %e, "reconcile raced another writer; retrying");
        return Action::requeue(Duration::from_millis(500));
    }
    tracing::warn!(machine = %m.name_any(), error = %e, "reconcile failed; retrying");
    Action::requeue(Duration::from_secs(5))
}

async fn reconcile(m: Arc<Machine>, ctx: Arc<Ctx>) -> Result<Action, NodeError> {
    let ns = m.namespace().unwrap_or_else(|| "default".into());
    let api: Api<Machine> = Api::namespaced(ctx.client.clone(), &ns);
    finalizer(&api, finalizers::MACHINE, m, |event| async {
        match event {
            Finalizer::Apply(m) => apply(&m, &ctx).await,
            Finalizer::Cleanup(m) => cleanup(&m, &ctx).await,
        }
    })
    .await
    .or_else(|e| match e {
        kube::runtime::finalizer::Error::ApplyFailed(e) | kube::runtime::finalizer::Error::CleanupFailed(e) => Err(e),
        // A cleanup run again from a cache that had not yet seen the Machine go: done already.
        other if finalizers::gone(&other) => Ok(Action::await_change()),
        other if finalizers::raced(&other) => Err(NodeError::FinalizerRaced(other.to_string())),
        other => Err(NodeError::Finalizer(other.to_string())),
    })
}

/// What holds a Machine's instance on the runtime.
enum Found {
    /// An instance this Machine owns (its UID is on it).
    Mine(Vm),
    /// Nothing: the Machine's instance is to be created.
    Nothing,
    /// An unowned instance holds the runtime name (a pool claim or copy whose owner the api
    /// has not stamped yet): wait, neither adopt nor create.
    Unowned(Vm),
    /// An instance owned by another Machine holds the runtime name: touch nothing.
    Taken(Vm),
}

/// The runtime instance of a Machine: by `status.runtimeID`, else by runtime name (adoption
/// after a restart, or a pool claim with createMachine), and only ever one that carries this
/// Machine's UID. `status.runtimeID` and the runtime name locate; the owner decides.
async fn find(m: &Machine, ctx: &Ctx) -> Result<Found, NodeError> {
    let uid = m.uid().filter(|u| !u.is_empty()).ok_or_else(|| NodeError::Finalizer("the Machine has no UID".into()))?;
    let id = m.status.as_ref().and_then(|s| s.runtime_id.as_deref()).and_then(|id| InstanceId::new(id).ok());
    if let Some(id) = id {
        match ctx.runtime.get(&id).await {
            Ok(vm) if vm.owner_uid.as_deref() == Some(uid.as_str()) => return Ok(Found::Mine(vm)),
            // Someone else's (or nobody's) instance: the id is not this Machine's to act on.
            Ok(_) => {}
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(match ctx.runtime.find_by_name(&m.runtime_name()).await? {
        None => Found::Nothing,
        Some(vm) if vm.owner_uid.as_deref() == Some(uid.as_str()) => Found::Mine(vm),
        Some(vm) if vm.owner_uid.is_none() => Found::Unowned(vm),
        Some(vm) => Found::Taken(vm),
    })
}

/// The runtime's request for `m`'s instance; `template`: the node-side name of its namespace's
/// own template, in place of the name its spec gives.
fn create_request(m: &Machine, template: Option<String>) -> CreateVmRequest {
    let s = &m.spec;
    let sandbox = match template {
        Some(name) => Some(kairon_model::SandboxSpec { template_name: Some(name) }),
        None => s.sandbox.clone(),
    };
    CreateVmRequest {
        name: m.runtime_name(),
        image: s.image.clone(),
        resources: s.resources.clone(),
        runtime: s.runtime.clone(),
        network: s.network.clone(),
        volumes: s.volumes.clone(),
        guest_agent: s.guest_agent.clone(),
        sandbox,
        // The controller enforces lifetimes on the Machine; the instance lives as long as it.
        ttl_seconds: None,
        start_paused: s.desired_power_state() == PowerState::Paused,
        // The runtime keeps a namespace's volumes in its own `volumes/<namespace>/`.
        labels: [(
            kairon_model::keys::labels::RUNTIME_NAMESPACE.to_string(),
            m.metadata.namespace.clone().unwrap_or_else(|| "default".into()),
        )]
        .into(),
        owner_uid: m.uid(),
    }
}

/// Where a Machine's sandbox template stands on this node.
enum TemplateOnNode {
    /// Create the instance: with the namespace's own template (its node-side name), or, for
    /// `None`, with what the spec names (a shared template, or no template at all).
    Use(Option<String>),
    /// The namespace's template is being built here: its progress.
    Building(String),
    /// Its build here failed: why, and what to do.
    Failed(String),
}

/// A Machine naming a template its namespace has (a KaironTemplate, which shadows a shared
/// template of the same name in that namespace only) gets it built on this node first: pulled
/// under the node's egress policy, its steps run, then Ready under its node-side name.
async fn namespaced_template(m: &Machine, ctx: &Ctx) -> Result<TemplateOnNode, NodeError> {
    use kairon_runtime_api::types::{CreateTemplateRequest, TemplateState};
    let Some(name) = m.spec.sandbox.as_ref().and_then(|s| s.template_name.as_deref()) else {
        return Ok(TemplateOnNode::Use(None));
    };
    let ns = m.namespace().unwrap_or_default();
    let api: Api<KaironTemplate> = Api::namespaced(ctx.client.clone(), &ns);
    let Some(t) = api.get_opt(name).await? else { return Ok(TemplateOnNode::Use(None)) };
    let on_node = node_template_name(&ns, name, &t.uid().unwrap_or_default());
    let id = kairon_runtime_api::TemplateName::new(on_node.as_str())
        .map_err(|e| NodeError::Runtime(ClientError::Decode(e.to_string())))?;
    let built = match ctx.runtime.template(&id).await {
        Ok(built) => built,
        Err(e) if e.is_not_found() => {
            let req = CreateTemplateRequest {
                name: on_node.clone(),
                image_ref: t.spec.image.clone(),
                steps: t.spec.steps.clone(),
                tenant_source: true,
            };
            match ctx.runtime.build_template(&req).await {
                Ok(started) => {
                    tracing::info!(template = %on_node, machine = %m.name_any(), "building a namespace's template");
                    started
                }
                // Another Machine of it started the build first.
                Err(ClientError::Api { status: 409, .. }) => ctx.runtime.template(&id).await?,
                Err(e) => return Err(e.into()),
            }
        }
        Err(e) => return Err(e.into()),
    };
    let node = &ctx.cfg.node_name;
    Ok(match built.state {
        TemplateState::Ready => TemplateOnNode::Use(Some(on_node)),
        TemplateState::Failed => TemplateOnNode::Failed(format!(
            "template {name:?} (KaironTemplate {ns}/{name}) failed to build on node {node}: {}; fix its image or steps, then delete the KaironTemplate and create it again",
            built.message.unwrap_or_default()
        )),
        TemplateState::Pending | TemplateState::Building => {
            TemplateOnNode::Building(format!("building template {name:?} on node {node}: {}", build_progress(&built)))
        }
    })
}

/// A build's progress in words: the pull's bytes, then the step that runs.
pub(crate) fn build_progress(t: &kairon_runtime_api::types::Template) -> String {
    let pulled = t.bytes_total.is_some_and(|total| t.bytes_done >= total);
    if pulled && !t.steps.is_empty() {
        let step = (t.steps_done as usize + 1).min(t.steps.len());
        return format!("running build step {step} of {}: {}", t.steps.len(), t.steps[step - 1]);
    }
    let mb = |b: u64| b as f64 / 1e6;
    match t.bytes_total {
        Some(total) if !pulled => format!("pulling {}: {:.1} of {:.1} MB", t.image_ref, mb(t.bytes_done), mb(total)),
        _ => format!("pulling {}", t.image_ref),
    }
}

fn condition(type_: &str, ok: bool, reason: &str, message: &str) -> Condition {
    Condition {
        type_: type_.into(),
        status: if ok { "True" } else { "False" }.into(),
        reason: reason.into(),
        message: message.into(),
        last_transition_time: Some(Time(k8s_openapi::jiff::Timestamp::now())),
        observed_generation: None,
    }
}

/// Keeps conditions of other types, and the transition time of one whose status is unchanged.
fn merge_conditions(old: &[Condition], new: Vec<Condition>) -> Vec<Condition> {
    let mut out: Vec<Condition> = old.iter().filter(|c| !new.iter().any(|n| n.type_ == c.type_)).cloned().collect();
    for mut c in new {
        if let Some(prev) = old.iter().find(|o| o.type_ == c.type_ && o.status == c.status) {
            c.last_transition_time = prev.last_transition_time.clone();
        }
        out.push(c);
    }
    out
}

fn phase_of(state: VmState) -> MachinePhase {
    match state {
        VmState::Creating => MachinePhase::Provisioning,
        VmState::Running => MachinePhase::Running,
        VmState::Paused => MachinePhase::Paused,
        VmState::Stopped => MachinePhase::Stopped,
        VmState::Hibernated => MachinePhase::Hibernated,
        VmState::Halted => MachinePhase::Halted,
        VmState::Failed => MachinePhase::Failed,
    }
}

async fn warn(ctx: &Ctx, m: &Machine, reason: &str, note: String) {
    let ev = Event {
        type_: EventType::Warning,
        reason: reason.into(),
        note: Some(note),
        action: "Reconcile".into(),
        secondary: None,
    };
    if let Err(e) = ctx.recorder.publish(&ev, &m.object_ref(&())).await {
        tracing::debug!(error = %e, "publishing an event failed");
    }
}

async fn apply(m: &Machine, ctx: &Ctx) -> Result<Action, NodeError> {
    if let Some(wait) = migrating(m, ctx).await? {
        return Ok(Action::requeue(wait));
    }
    let old = m.status.clone().unwrap_or_default();
    let mut status = old.clone();
    let mut conditions = Vec::new();
    let mut requeue = if m.spec.lifecycle.is_some() { ctx.cfg.tick } else { Duration::from_secs(60) };

    let vm = match find(m, ctx).await? {
        Found::Mine(vm) => Some(vm),
        Found::Unowned(vm) => {
            let why = format!(
                "an unowned instance holds the runtime name {}: waiting for the api to stamp this Machine's UID on it (a pool claim or copy); it is neither adopted nor replaced",
                vm.name
            );
            conditions.push(condition("Ready", false, "AdoptionPending", &why));
            requeue = Duration::from_secs(2);
            None
        }
        Found::Taken(vm) => {
            // Not the other instance's id: it is not this Machine's owner's to know.
            let why = format!(
                "the runtime name {} is held by an instance of another Machine: this Machine's instance cannot be created until that one is gone (nothing was created, adopted or deleted)",
                vm.name
            );
            if old.conditions.iter().all(|c| c.reason != "RuntimeNameTaken") {
                warn(ctx, m, "RuntimeNameTaken", why.clone()).await;
            }
            conditions.push(condition("Ready", false, "RuntimeNameTaken", &why));
            requeue = Duration::from_secs(15);
            None
        }
        Found::Nothing => match namespaced_template(m, ctx).await? {
            TemplateOnNode::Building(why) => {
                conditions.push(condition("Ready", false, "TemplateBuilding", &why));
                status.phase = Some(MachinePhase::Provisioning);
                requeue = Duration::from_secs(1);
                None
            }
            TemplateOnNode::Failed(why) => {
                if old.conditions.iter().all(|c| c.reason != "TemplateBuildFailed") {
                    warn(ctx, m, "TemplateBuildFailed", why.clone()).await;
                }
                conditions.push(condition("Ready", false, "TemplateBuildFailed", &why));
                status.phase = Some(MachinePhase::Failed);
                requeue = Duration::from_secs(30);
                None
            }
            TemplateOnNode::Use(template) => match ctx.runtime.create(&create_request(m, template)).await {
                Ok(vm) => Some(vm),
                Err(ClientError::Api { status: code, reason, message }) if code < 500 => {
                    // The user must act (build the template, pick another backend): say so.
                    let why = match reason.as_str() {
                        "NotFound" => "TemplateNotFound",
                        "NotSupported" => "BackendUnsupported",
                        _ => "CreateFailed",
                    };
                    if old.conditions.iter().all(|c| c.reason != why) {
                        warn(ctx, m, why, message.clone()).await;
                    }
                    conditions.push(condition("Ready", false, why, &message));
                    status.phase = Some(MachinePhase::Failed);
                    requeue = Duration::from_secs(30);
                    None
                }
                Err(e) => return Err(e.into()),
            },
        },
    };

    if let Some(mut vm) = vm {
        let want = m.spec.desired_power_state();
        let planned = match vm.state.power_state() {
            Some(have) => power::plan(want, have, m.spec.track()),
            None => Ok(None),
        };
        if let Err(refusal) = planned {
            let message = format!("{refusal}");
            if old.conditions.iter().all(|c| c.reason != refusal.reason()) {
                warn(ctx, m, refusal.reason(), message.clone()).await;
            }
            conditions.push(condition("PowerState", false, refusal.reason(), &message));
        } else if let Ok(Some(step)) = planned {
            let (action, paused) = PowerAction::for_step(step);
            match ctx.runtime.power_at(&vm.id, action, paused, m.metadata.generation).await {
                Ok(v) => vm = v,
                // A newer generation was applied directly (a wake or a claim thawed it): this view
                // is stale, and the watch brings the newer one. Report what the instance is now.
                Err(ClientError::Api { reason, .. }) if reason == "Stale" => {
                    vm = ctx.runtime.get(&vm.id).await?;
                    requeue = requeue.min(Duration::from_secs(1));
                }
                Err(ClientError::Api { status: code, message, .. }) if code < 500 => {
                    if old.conditions.iter().all(|c| c.reason != "PowerStateUnsupported") {
                        warn(ctx, m, "PowerStateUnsupported", message.clone()).await;
                    }
                    conditions.push(condition("PowerState", false, "PowerStateUnsupported", &message));
                }
                Err(e) => return Err(e.into()),
            }
        } else {
            conditions.push(condition("PowerState", true, "AsRequested", &format!("{want}")));
        }
        status.phase = Some(phase_of(vm.state));
        status.runtime_id = Some(vm.id.to_string());
        status.guest_ip = vm.guest_ip.clone();
        status.resources = Some(started_with(&vm));
        ctx.machines
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(vm.id.to_string(), m.object_ref(&()));
        let ready = vm.state == VmState::Running;
        conditions.push(condition(
            "Ready",
            ready,
            if ready { "Running" } else { "NotRunning" },
            &vm.message.clone().unwrap_or_else(|| format!("the instance is {:?}", vm.state)),
        ));
        if let Some(lifecycle) = &m.spec.lifecycle {
            sample(m, &vm, lifecycle.idle_cpu_millicores, &mut status, ctx).await;
        }
        if vm.backend == kairon_runtime_api::types::BACKEND_QEMU {
            if let Some(next) = freeze_step(m, &vm, &old, &mut conditions, ctx).await? {
                requeue = requeue.min(next);
            }
        } else if m.annotations().contains_key(annotations::FS_FROZEN_UNTIL) && vm.backend == "runc" {
            let why = "filesystem freeze needs a VM: in a sandbox, FIFREEZE would freeze the host's filesystem; remove the kairon.zyvor.dev/fs-frozen-until annotation";
            if old.conditions.iter().all(|c| c.reason != "FreezeUnsupported") {
                warn(ctx, m, "FreezeUnsupported", why.into()).await;
            }
            conditions.push(condition("FilesystemFrozen", false, "FreezeUnsupported", why));
        }
    }
    status.conditions = merge_conditions(&old.conditions, conditions);
    status.observed_generation = m.metadata.generation;
    if status != old {
        let api: Api<Machine> = Api::namespaced(ctx.client.clone(), &m.namespace().unwrap_or_default());
        // `lifecycle.expiresAt` is the lifecycle controller's: left out, so a stale copy read
        // here never undoes its write.
        if let Some(l) = status.lifecycle.as_mut() {
            l.expires_at = None;
        }
        api.patch_status(&m.name_any(), &PatchParams::default(), &Patch::Merge(json!({"status": status}))).await?;
    }
    Ok(Action::requeue(requeue))
}

/// The vCPUs and memory the instance was created with (the runtime keeps its request), as
/// quota counts them: a spec changed since takes effect at the next start.
fn started_with(vm: &Vm) -> kairon_model::Resources {
    let spec = kairon_model::MachineSpec {
        resources: vm.spec.resources.clone(),
        sandbox: vm.spec.sandbox.clone(),
        ..Default::default()
    };
    let (cpu_millis, memory_bytes) = kairon_model::quota::resources_of(&spec);
    let cpu = if cpu_millis % 1000 == 0 { format!("{}", cpu_millis / 1000) } else { format!("{cpu_millis}m") };
    let memory = match memory_bytes {
        b if b % (1 << 30) == 0 => format!("{}Gi", b >> 30),
        b if b % (1 << 20) == 0 => format!("{}Mi", b >> 20),
        b => b.to_string(),
    };
    kairon_model::Resources { cpu: Some(kairon_model::Quantity(cpu)), memory: Some(kairon_model::Quantity(memory)) }
}

/// A Machine under migration is the api's until the migration ends: this agent neither
/// starts, stops nor reports it (the api stopped it for the copy, and starts it again if the
/// copy fails). How long to wait before looking again; None when there is no migration, or one
/// past its deadline, whose api is gone: its mark is cleared and the Machine is this node's
/// again.
async fn migrating(m: &Machine, ctx: &Ctx) -> Result<Option<Duration>, NodeError> {
    let Some(mig) = m.status.as_ref().and_then(|s| s.migration.as_ref()) else { return Ok(None) };
    let now = k8s_openapi::jiff::Timestamp::now();
    if mig.in_progress(now) {
        let left = kairon_model::MigrationStatus::DEADLINE_SECONDS - (now.as_second() - mig.started_at.0.as_second());
        return Ok(Some(Duration::from_secs(left.max(1) as u64)));
    }
    let api: Api<Machine> = Api::namespaced(ctx.client.clone(), &m.namespace().unwrap_or_default());
    api.patch_status(&m.name_any(), &PatchParams::default(), &Patch::Merge(json!({"status": {"migration": null}})))
        .await?;
    let note = format!(
        "the migration to {} did not finish within {} s (the api running it stopped): the Machine stays on this node",
        mig.target_node,
        kairon_model::MigrationStatus::DEADLINE_SECONDS
    );
    warn(ctx, m, kairon_model::keys::reasons::MIGRATION_FAILED, note).await;
    Ok(None)
}

/// Sets or removes the `fs-frozen` confirmation annotation.
async fn set_frozen_annotation(m: &Machine, ctx: &Ctx, value: Option<&str>) -> Result<(), NodeError> {
    let api: Api<Machine> = Api::namespaced(ctx.client.clone(), &m.namespace().unwrap_or_default());
    let patch = json!({"metadata": {"annotations": {annotations::FS_FROZEN: value}}});
    api.patch(&m.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await?;
    Ok(())
}

/// `kairon.zyvor.dev/fs-frozen-until` on a VM Machine: freeze the guest's filesystems through
/// its guest agent until the deadline (the runtime thaws them at the deadline by itself too),
/// confirm with `kairon.zyvor.dev/fs-frozen`, and thaw when the deadline passes or the
/// annotation goes. Returns when to look again.
async fn freeze_step(
    m: &Machine,
    vm: &Vm,
    old: &MachineStatus,
    conditions: &mut Vec<Condition>,
    ctx: &Ctx,
) -> Result<Option<Duration>, NodeError> {
    let annotations = m.annotations();
    let confirmed = annotations.contains_key(annotations::FS_FROZEN);
    let until = annotations.get(annotations::FS_FROZEN_UNTIL);
    let running = vm.state == VmState::Running;
    let deadline = match until {
        None => None,
        Some(u) => match chrono_like_parse(u) {
            Some(d) => Some(d),
            None => {
                let why = format!(
                    "{} {u:?} is not an RFC 3339 time (e.g. 2030-01-01T00:00:00Z)",
                    annotations::FS_FROZEN_UNTIL
                );
                if old.conditions.iter().all(|c| c.reason != "InvalidFreezeDeadline") {
                    warn(ctx, m, "InvalidFreezeDeadline", why.clone()).await;
                }
                conditions.push(condition("FilesystemFrozen", false, "InvalidFreezeDeadline", &why));
                None
            }
        },
    };
    let now = k8s_openapi::jiff::Timestamp::now();
    match deadline {
        Some(d) if d > now => {
            let left = Duration::from_millis((d.as_millisecond() - now.as_millisecond()).max(0) as u64);
            if !running {
                return Ok(Some(left));
            }
            let frozen = ctx.runtime.freeze_status(&vm.id).await.map(|s| s.status == "frozen").unwrap_or(false);
            if !frozen {
                match ctx.runtime.freeze(&vm.id, Some(left.max(Duration::from_secs(1)))).await {
                    Ok(r) => {
                        tracing::info!(machine = %m.name_any(), filesystems = ?r.frozen, until = ?until, "froze the guest's filesystems");
                    }
                    Err(ClientError::Api { status: code, message, .. }) if code < 500 => {
                        if old.conditions.iter().all(|c| c.reason != "FreezeFailed") {
                            warn(ctx, m, "FreezeFailed", message.clone()).await;
                        }
                        conditions.push(condition("FilesystemFrozen", false, "FreezeFailed", &message));
                        return Ok(Some(Duration::from_secs(5)));
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            if !confirmed {
                set_frozen_annotation(m, ctx, until.map(String::as_str)).await?;
            }
            let until = until.cloned().unwrap_or_default();
            conditions.push(condition("FilesystemFrozen", true, "Frozen", &format!("frozen until {until}")));
            // Look again right after the deadline, to thaw and drop the confirmation.
            Ok(Some(left + Duration::from_millis(200)))
        }
        _ => {
            // The confirmation goes only after a thaw succeeded, and the Thawed condition is
            // written after it: a reconcile that failed between the two (a status write refused
            // under load, say) finds the confirmation gone and the condition still True, and
            // must finish the report instead of leaving "Frozen" on a thawed guest.
            let reported_frozen = old.conditions.iter().any(|c| c.type_ == "FilesystemFrozen" && c.status == "True");
            if confirmed || reported_frozen {
                if confirmed
                    && running
                    && let Err(e) = ctx.runtime.thaw(&vm.id).await
                {
                    // The guest stays frozen until a thaw succeeds: keep the confirmation and try
                    // again shortly (a guest agent that did not answer this once, say), instead
                    // of reporting Thawed over a guest still frozen.
                    let why = format!("thawing failed, retrying: {e}");
                    tracing::warn!(machine = %m.name_any(), error = %e, "thawing the guest's filesystems failed; retrying");
                    conditions.push(condition("FilesystemFrozen", true, "ThawFailed", &why));
                    return Ok(Some(Duration::from_secs(2)));
                }
                if confirmed {
                    set_frozen_annotation(m, ctx, None).await?;
                    tracing::info!(machine = %m.name_any(), "thawed the guest's filesystems");
                }
                let why = if until.is_some() {
                    "the freeze deadline has passed"
                } else {
                    "the freeze annotation was removed"
                };
                conditions.push(condition("FilesystemFrozen", false, "Thawed", why));
            }
            Ok(None)
        }
    }
}

fn chrono_like_parse(s: &str) -> Option<k8s_openapi::jiff::Timestamp> {
    s.parse::<k8s_openapi::jiff::Timestamp>().ok()
}

/// Samples the instance and, when it was active, moves `lastActivityTime` (throttled).
async fn sample(m: &Machine, vm: &Vm, idle_cpu_millicores: i64, status: &mut MachineStatus, ctx: &Ctx) {
    let Ok(stats) = ctx.runtime.stats(&vm.id).await else { return };
    let cur = Sample {
        at: ctx.started.elapsed().as_secs_f64(),
        cpu_nanos: stats.cpu_time_nanos,
        disk_bytes: stats.disk_read_bytes + stats.disk_write_bytes,
        pid: stats.vmm_pid,
    };
    let uid = m.uid().unwrap_or_default();
    let prev = ctx.samples.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(uid, cur);
    let lifecycle = status.lifecycle.get_or_insert_with(Default::default);
    let recorded_pid = lifecycle.vmm_pid.map(|p| p as u32);
    let active = match prev {
        Some(prev) => activity::activity(&prev, &cur, idle_cpu_millicores).is_some(),
        // First sample since this agent started: only a process it has not seen counts.
        None => recorded_pid != cur.pid,
    };
    lifecycle.vmm_pid = cur.pid.map(i64::from);
    let now = k8s_openapi::jiff::Timestamp::now();
    let last = lifecycle.last_activity_time.as_ref().map(|t| t.0.as_second());
    if active && activity::should_write(last, now.as_second(), ctx.cfg.activity_write_interval.as_secs() as i64) {
        lifecycle.last_activity_time = Some(Time(now));
    }
}

async fn cleanup(m: &Machine, ctx: &Ctx) -> Result<Action, NodeError> {
    // Only an instance this Machine owns: never one its status or runtime name merely points at.
    if let Found::Mine(vm) = find(m, ctx).await? {
        match ctx.runtime.delete(&vm.id).await {
            Ok(()) => {}
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e.into()),
        }
    }
    let uid = m.uid().unwrap_or_default();
    ctx.samples.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&uid);
    ctx.machines
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .retain(|_, r| r.uid.as_deref() != Some(uid.as_str()));
    Ok(Action::await_change())
}

/// Follows the runtime's refused egress: counts every refusal in `kairon_egress_denied_total`
/// and shows each one the runtime keeps (one per sandbox and host a minute) as an Event on its
/// Machine, so a user sees why `pip install` fails. Long polls: nothing is asked while nothing
/// is refused.
async fn follow_egress_denials(ctx: Arc<Ctx>, stop: CancellationToken) {
    use kairon_model::keys::metrics::EGRESS_DENIED_TOTAL;
    let registry = kairon_model::metrics::global();
    registry.describe(
        EGRESS_DENIED_TOTAL,
        "Guest connections and DNS questions the node's egress rules refused, by node and reason.",
    );
    let node = ctx.cfg.node_name.clone();
    let (mut after, mut counted, mut first) = (0u64, HashMap::<String, u64>::new(), true);
    loop {
        // The first answer only says where the runtime stands: refusals from before this
        // agent are not shown again.
        let wait = if first { Duration::ZERO } else { Duration::from_secs(30) };
        let got = tokio::select! {
            r = ctx.runtime.egress_denials(after, wait) => r,
            _ = stop.cancelled() => return,
        };
        let got = match got {
            Ok(got) => got,
            Err(e) => {
                tracing::debug!(error = %e, "following egress denials");
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(5)) => continue,
                    _ = stop.cancelled() => return,
                }
            }
        };
        if got.next < after {
            // The runtime restarted: its count began again.
            counted.clear();
        }
        for (reason, total) in &got.totals {
            let seen = counted.insert(reason.clone(), *total).unwrap_or(0);
            if *total > seen {
                registry.add(EGRESS_DENIED_TOTAL, &[("node", &node), ("reason", reason)], (*total - seen) as f64);
            }
        }
        if !first {
            for d in &got.denials {
                let machine =
                    ctx.machines.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(&d.instance).cloned();
                let Some(machine) = machine else { continue };
                let ev = Event {
                    type_: EventType::Warning,
                    reason: kairon_model::keys::reasons::EGRESS_DENIED.into(),
                    note: Some(format!("egress to {} refused: {}", display_host(&d.host), d.message)),
                    action: "Egress".into(),
                    secondary: None,
                };
                if let Err(e) = ctx.recorder.publish(&ev, &machine).await {
                    tracing::debug!(error = %e, "publishing an egress event failed");
                }
            }
        }
        first = false;
        after = got.next;
    }
}

/// A guest-written host, fit for an Event's note: at most 253 characters, no control
/// characters.
fn display_host(host: &str) -> String {
    let clean: String = host.chars().filter(|c| !c.is_control()).take(253).collect();
    if clean.is_empty() { "(no host)".into() } else { clean }
}

/// A kube client from a kubeconfig file (what `kairon up` writes).
pub async fn client_from_kubeconfig(path: &std::path::Path) -> Result<kube::Client, NodeError> {
    let bad = |e: kube::config::KubeconfigError| NodeError::Config(format!("{}: {e}", path.display()));
    let kc = kube::config::Kubeconfig::read_from(path).map_err(bad)?;
    let cfg =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default()).await.map_err(bad)?;
    Ok(kube::Client::try_from(cfg)?)
}
