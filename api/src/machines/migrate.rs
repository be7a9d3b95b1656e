//! Moving a Machine to another node. The plan says, for every node, whether it could take the
//! Machine and why not (the scheduler's own rules, `model::placement`); `--dry-run` answers it
//! alone. The target's runtime is told first what is to arrive, and refuses what it cannot
//! take, before anything changes. A template sandbox moves cold: it is stopped on its node, its
//! writable layer is relayed through this server into a fresh sandbox on the target, which
//! starts. A VM moves live: this server joins a WebSocket to each runtime, and QEMU's migration
//! stream (memory, and the disk blocks that differ from the base image both nodes hold) flows
//! from one to the other while the VM runs; QEMU pauses it for the last pass. Only once the
//! target runs it does the Machine point at the new instance and the old one go. Any failure
//! before that leaves it running where it was (a cold one is started again), with a
//! `MigrationFailed` Event.
//!
//! While it runs, `status.migration` tells the source's node agent to leave the Machine alone
//! (and the lifecycle controller not to suspend it); a migration whose server died is given
//! back to the node agent after `MigrationStatus::DEADLINE_SECONDS`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use futures::{SinkExt, StreamExt};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{ListParams, Patch};
use kube::{Api, ResourceExt};
use serde::Serialize;
use serde_json::json;
use utoipa::ToSchema;

use kairon_model::keys::reasons;
use kairon_model::placement::{self, NodeView};
use kairon_model::power::Track;
use kairon_model::{KaironNode, Machine, MachinePhase, MigrationMode, MigrationStatus, PowerState};
use kairon_runtime_api::types::{LiveMessage, LiveStats, PowerAction, Vm, VmState};
use kairon_runtime_api::{InstanceId, RuntimeClient};

use super::power::field_manager;
use super::{Error, Machines, Reason, Result};
use crate::auth::Identity;

/// How many times a migration reads and plans its Machine when a status write races its start.
const MIGRATION_STARTS: usize = 3;

/// What `POST .../migrate` answers: the plan, and with it done, the Machine where it now runs.
#[derive(Serialize, ToSchema, Debug)]
#[serde(rename_all = "camelCase")]
pub struct Migration {
    /// The Machine: as it is (a dry run), or on its new node.
    #[schema(value_type = crate::rest::schema::Machine)]
    pub machine: Machine,
    pub plan: MigrationPlan,
    /// Bytes of files copied (a cold migration that ran).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub copied_bytes: Option<u64>,
    /// How long the migration took, from its start to the Machine running on its new node.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
    /// How long a live-migrated VM was paused for the switch-over, in milliseconds (a cold
    /// migration is down throughout).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub downtime_ms: Option<u64>,
}

/// Where a Machine would move, how, and why each node fits or not.
#[derive(Serialize, ToSchema, Debug, Clone)]
#[serde(rename_all = "camelCase")]
pub struct MigrationPlan {
    /// The node it runs on.
    pub source: String,
    /// The node it moves to.
    pub target: String,
    pub mode: MigrationMode,
    /// Every node, in name order, and whether it could take the Machine.
    pub nodes: Vec<NodeFit>,
    /// What the migration does, in order.
    pub steps: Vec<String>,
}

/// One node's answer to a migration.
#[derive(Serialize, ToSchema, Debug, Clone, PartialEq)]
pub struct NodeFit {
    pub node: String,
    pub fits: bool,
    /// Why it does not fit (or, for the source, that the Machine runs there); empty when it fits.
    pub reason: String,
}

/// A migration under way: the Machine, its plan, both runtimes, its instance on the source and
/// the import announced on the target.
#[derive(Clone, Copy)]
struct Moving<'a> {
    m: &'a Machine,
    plan: &'a MigrationPlan,
    source: &'a RuntimeClient,
    target: &'a RuntimeClient,
    instance: &'a InstanceId,
    import: &'a str,
}

impl Machines {
    /// Moves a Machine to `target` (the fitting node with the most free memory when unset), or
    /// with `dry_run`, only says how it would and why each node fits or not.
    pub async fn migrate(
        &self,
        id: &Identity,
        ns: &str,
        name: &str,
        target: Option<&str>,
        dry_run: bool,
    ) -> Result<Migration> {
        // A status write landing between the read and the start (an exec's activity stamp) makes
        // the start stale: the Machine is read and planned again, a few times before giving up.
        for _ in 0..MIGRATION_STARTS {
            let m = self.writable(id, ns, name).await?;
            let plan = self.migration_plan(&m, target).await?;
            if dry_run {
                return Ok(Migration { machine: m, plan, copied_bytes: None, seconds: None, downtime_ms: None });
            }
            if let Some(moved) = self.move_machine(m, plan).await? {
                return Ok(moved);
            }
        }
        Err(Error::conflict(
            Reason::Conflict,
            format!(
                "Machine {ns}/{name} kept changing while the migration began ({MIGRATION_STARTS} tries): try again"
            ),
        ))
    }

    /// The plan: checks that the Machine can move at all, and which node takes it.
    async fn migration_plan(&self, m: &Machine, target: Option<&str>) -> Result<MigrationPlan> {
        let (ns, name) = (m.namespace().unwrap_or_default(), m.name_any());
        if m.metadata.deletion_timestamp.is_some() {
            return Err(Error::conflict(Reason::Terminating, format!("Machine {ns}/{name} is being deleted")));
        }
        let status = m.status.clone().unwrap_or_default();
        let source = status.node_name.clone().ok_or_else(|| {
            Error::conflict(
                Reason::NotScheduled,
                format!("Machine {ns}/{name} is not on a node yet: there is nothing to move"),
            )
        })?;
        if let Some(mig) = status.migration.as_ref().filter(|g| g.in_progress(k8s_openapi::jiff::Timestamp::now())) {
            return Err(Error::conflict(
                Reason::MigrationInProgress,
                format!("Machine {ns}/{name} is already moving to {:?}; wait for that to end", mig.target_node),
            ));
        }
        if !m.spec.volumes.is_empty() {
            return Err(Error::conflict(
                Reason::MigrationUnsupported,
                format!(
                    "Machine {ns}/{name} has volumes, which are disks on node {source:?}: they do not move with it"
                ),
            ));
        }
        let mode = if m.spec.track() == Track::TemplateSandbox { MigrationMode::Cold } else { MigrationMode::Live };
        let nodes: Api<KaironNode> = Api::all(self.kube.clone());
        let machines: Api<Machine> = Api::all(self.kube.clone());
        let now = k8s_openapi::jiff::Timestamp::now();
        let mut views: Vec<NodeView> =
            nodes.list(&ListParams::default()).await?.iter().map(|n| placement::node_view(n, now)).collect();
        views.sort_by(|a, b| a.name.cmp(&b.name));
        let placed: Vec<Arc<Machine>> =
            machines.list(&ListParams::default()).await?.items.into_iter().map(Arc::new).collect();
        placement::tally(&mut views, &placed, &mut Default::default());
        let demand = placement::demand(&m.spec);
        let template = m.spec.sandbox.as_ref().and_then(|s| s.template_name.as_deref());
        let needed = placement::needed_template(&views, template);
        let fits: Vec<NodeFit> = views
            .iter()
            .map(|v| {
                let reason = if v.name == source {
                    Some("the Machine runs here".to_string())
                } else {
                    placement::unfit(v, demand, needed)
                };
                NodeFit { node: v.name.clone(), fits: reason.is_none(), reason: reason.unwrap_or_default() }
            })
            .collect();
        let others: Vec<&str> = fits.iter().filter(|f| f.node != source).map(|f| f.node.as_str()).collect();
        let target = match target {
            Some(t) => match fits.iter().find(|f| f.node == t) {
                None => {
                    return Err(Error::conflict(
                        Reason::NoTargetNode,
                        format!("node {t:?} is not a registered node (others: {})", list_or_none(&others)),
                    ));
                }
                Some(f) if !f.fits => {
                    return Err(Error::conflict(
                        Reason::NoTargetNode,
                        format!("node {t:?} cannot take Machine {ns}/{name}: {}", f.reason),
                    ));
                }
                Some(f) => f.node.clone(),
            },
            None => {
                let free = |v: &NodeView| v.memory_bytes.saturating_sub(v.used_memory_bytes);
                let best = views
                    .iter()
                    .filter(|v| fits.iter().any(|f| f.fits && f.node == v.name))
                    .max_by(|a, b| free(a).cmp(&free(b)).then_with(|| b.name.cmp(&a.name)));
                match best {
                    Some(v) => v.name.clone(),
                    None if others.is_empty() => {
                        return Err(Error::conflict(
                            Reason::NoTargetNode,
                            format!(
                                "Machine {ns}/{name} runs on {source:?}, the only node: there is nowhere to migrate it"
                            ),
                        ));
                    }
                    None => {
                        let why: Vec<String> = fits
                            .iter()
                            .filter(|f| f.node != source)
                            .map(|f| format!("{}: {}", f.node, f.reason))
                            .collect();
                        return Err(Error::conflict(
                            Reason::NoTargetNode,
                            format!("no other node fits: {}", why.join("; ")),
                        ));
                    }
                }
            }
        };
        let steps = match mode {
            MigrationMode::Cold => vec![
                format!("check that {target} can start it (its template is built there)"),
                format!("stop the sandbox on {source}: its processes end"),
                format!("copy its writable layer (its changed files) to {target} and start it there"),
                format!("point the Machine at the new instance (a new guest IP) and remove the one on {source}"),
            ],
            MigrationMode::Live => vec![
                format!("check that {target} can start it (its image is there)"),
                format!("start QEMU on {target} with the same devices, waiting for the VM's state"),
                format!(
                    "copy the VM's memory and the disk blocks it changed to {target} while it runs; pause it for the last pass"
                ),
                format!("run it on {target}, point the Machine at it, and remove the copy on {source}"),
            ],
        };
        Ok(MigrationPlan { source, target, mode, nodes: fits, steps })
    }

    /// Runs a migration (see the module's comment).
    /// `None` when the Machine changed after it was read, before anything moved.
    async fn move_machine(&self, m: Machine, plan: MigrationPlan) -> Result<Option<Migration>> {
        let started = Instant::now();
        let (ns, name) = (m.namespace().unwrap_or_default(), m.name_any());
        let uid = m.uid().unwrap_or_default();
        let (source_rt, instance) = self.machine_runtime(&m).await?;
        let target_rt = self.runtime(&plan.target).await?;
        let vm = source_rt.get(&instance).await?;
        let want = m.spec.desired_power_state();
        let mut request = vm.spec.clone();
        request.owner_uid = Some(uid.clone());
        request.start_paused = want == PowerState::Paused;
        // The instance's own deadline stays the Machine's (the node agent never sets one).
        request.ttl_seconds = None;

        // The target says first whether it can take the sandbox (its template, the name): a
        // refusal changes nothing.
        let import = target_rt.begin_import(&request).await?;
        let mark = MigrationStatus {
            target_node: plan.target.clone(),
            mode: plan.mode,
            started_at: Time(k8s_openapi::jiff::Timestamp::now()),
        };
        let status = json!({"phase": MachinePhase::Migrating, "migration": mark});
        let Some(m) = self.patch_status_if_unchanged(&m, status).await? else {
            return Ok(None);
        };
        let how = match plan.mode {
            MigrationMode::Cold => "cold: the sandbox restarts there with its files",
            MigrationMode::Live => "live: the VM runs on while its memory and disk are copied",
        };
        self.record(&m, reasons::MIGRATING, format!("moving from {} to {} ({how})", plan.source, plan.target)).await;

        let mv = Moving {
            m: &m,
            plan: &plan,
            source: &source_rt,
            target: &target_rt,
            instance: &instance,
            import: &import.id,
        };
        let moved = match plan.mode {
            MigrationMode::Cold => self.copy_sandbox(&mv, &vm).await.map(|(v, b)| (v, b, None)),
            MigrationMode::Live => {
                self.relay_live(&mv).await.map(|(v, s)| (v, s.memory_bytes + s.disk_bytes, Some(s.downtime_ms)))
            }
        };
        let (new_vm, bytes, downtime_ms) = match moved {
            Ok(done) => done,
            Err(e) => return Err(self.roll_back(&m, &plan, &source_rt, &instance, &vm, e).await),
        };
        // The Machine now points at the new instance; a failure here removes it again.
        let mut status = json!({
            "nodeName": plan.target, "runtimeID": new_vm.id.to_string(), "guestIP": new_vm.guest_ip,
            "phase": new_vm.state.power_state().map(MachinePhase::for_power_state), "migration": null,
        });
        if let Some(l) = m.status.as_ref().and_then(|s| s.lifecycle.as_ref()) {
            // The new instance's process is not activity.
            status["lifecycle"] = json!({"vmmPid": new_vm.pid, "lastActivityTime": l.last_activity_time});
        }
        let flipped = match self.patch_status(&m, status).await {
            Ok(flipped) => flipped,
            Err(e) => {
                if let Err(cleanup) = target_rt.delete(&new_vm.id).await {
                    tracing::warn!(error = %cleanup, "removing the copy of a migration that could not be recorded");
                }
                return Err(self.roll_back(&m, &plan, &source_rt, &instance, &vm, e).await);
            }
        };
        let flipped = match flipped.spec.node_name.as_deref() {
            // A Machine pinned to its node is pinned to its new one.
            Some(pinned) if pinned != plan.target => {
                let patch = json!({"spec": {"nodeName": plan.target}});
                self.api::<Machine>(&ns).patch(&name, &field_manager(), &Patch::Merge(&patch)).await?
            }
            _ => flipped,
        };
        if let Err(e) = source_rt.delete(&instance).await {
            tracing::warn!(error = %e, machine = %name, "removing the source instance of a migration");
            self.record(
                &flipped,
                reasons::MIGRATING,
                format!("the old instance on {} could not be removed: {e}", plan.source),
            )
            .await;
        }
        let seconds = started.elapsed().as_secs_f64();
        let paused = downtime_ms.map(|d| format!(", paused for {d} ms")).unwrap_or_default();
        self.record(
            &flipped,
            reasons::MIGRATED,
            format!(
                "moved from {} to {} in {seconds:.1}s ({:.1} MiB copied{paused})",
                plan.source,
                plan.target,
                bytes as f64 / 1048576.0
            ),
        )
        .await;
        Ok(Some(Migration { machine: flipped, plan, copied_bytes: Some(bytes), seconds: Some(seconds), downtime_ms }))
    }

    /// Stops the sandbox, relays its layer into the target's announced `import`, and sets the new
    /// instance's power state; the new instance, and the bytes relayed.
    async fn copy_sandbox(&self, mv: &Moving<'_>, vm: &Vm) -> Result<(Vm, u64)> {
        let Moving { m, plan, source: source_rt, target: target_rt, instance, import } = *mv;
        if matches!(vm.state, VmState::Running | VmState::Paused) {
            source_rt.power(instance, PowerAction::Stop, false).await?;
        }
        self.record(m, reasons::MIGRATING, format!("stopped on {}; copying its files to {}", plan.source, plan.target))
            .await;
        let layer = source_rt.export_layer(instance).await?;
        let relayed = Arc::new(AtomicU64::new(0));
        let counter = relayed.clone();
        let body = layer.bytes_stream().map(move |chunk| {
            if let Ok(c) = &chunk {
                counter.fetch_add(c.len() as u64, Ordering::Relaxed);
            }
            chunk
        });
        let mut new_vm = target_rt.import_layer(import, reqwest::Body::wrap_stream(body)).await?;
        if m.spec.desired_power_state() == PowerState::Stopped {
            new_vm = target_rt.power(&new_vm.id, PowerAction::Stop, false).await?;
        }
        Ok((new_vm, relayed.load(Ordering::Relaxed)))
    }

    /// A VM's live migration: joins the source runtime's WebSocket to the target's, relaying
    /// QEMU's state and their words (`LiveMessage`) both ways, until the target says the VM
    /// runs there (then the source's QEMU quits) or either side fails or goes away (then the
    /// other gives up: the source's VM runs on). The new instance, and QEMU's figures.
    async fn relay_live(&self, mv: &Moving<'_>) -> Result<(Vm, LiveStats)> {
        let Moving { m, plan, source: source_rt, target: target_rt, instance, import } = *mv;
        use tokio_tungstenite::tungstenite::Message;
        let gone = |side: &str| Error::new(Reason::RuntimeUnreachable, format!("the {side} node's runtime went away"));
        let word = |m: &Message| match m {
            Message::Text(t) => serde_json::from_str::<LiveMessage>(t).ok(),
            _ => None,
        };
        let mut source = source_rt.live_out(instance).await?;
        let mut target = target_rt.live_in(import).await?;
        let mut stats = None;
        loop {
            tokio::select! {
                msg = source.next() => {
                    let msg = msg.and_then(|r| r.ok()).filter(|m| !m.is_close()).ok_or_else(|| gone("source"))?;
                    match word(&msg) {
                        Some(LiveMessage::Sent { stats: s }) => {
                            stats = Some(s);
                            let note = format!(
                                "state sent to {} ({} ms paused for the last pass); starting it there",
                                plan.target, s.downtime_ms
                            );
                            self.record(m, reasons::MIGRATING, note).await;
                        }
                        Some(LiveMessage::Failed { message }) => return Err(Error::new(Reason::RuntimeError, message)),
                        _ => {}
                    }
                    target.send(msg).await.map_err(|_| gone("target"))?;
                }
                msg = target.next() => {
                    let msg = msg.and_then(|r| r.ok()).filter(|m| !m.is_close()).ok_or_else(|| gone("target"))?;
                    let said = word(&msg);
                    if let Some(LiveMessage::Failed { message }) = said {
                        return Err(Error::new(Reason::RuntimeError, message));
                    }
                    source.send(msg).await.map_err(|_| gone("source"))?;
                    if let Some(LiveMessage::Done { vm }) = said {
                        // The source quits its QEMU and closes: wait for that, briefly.
                        let _ = tokio::time::timeout(std::time::Duration::from_secs(30), async {
                            while let Some(Ok(m)) = source.next().await {
                                if m.is_close() {
                                    break;
                                }
                            }
                        })
                        .await;
                        return Ok((*vm, stats.unwrap_or_default()));
                    }
                }
            }
        }
    }

    /// Puts the Machine back as it was on its node after a failed migration: starts the sandbox
    /// again if it was stopped for the copy, clears the mark, and says why in an Event. Answers
    /// the error to return.
    async fn roll_back(
        &self,
        m: &Machine,
        plan: &MigrationPlan,
        source_rt: &RuntimeClient,
        instance: &InstanceId,
        was: &Vm,
        cause: Error,
    ) -> Error {
        let mut state = was.state;
        if let Ok(now) = source_rt.get(instance).await
            && now.state == VmState::Stopped
            && was.state != VmState::Stopped
        {
            match source_rt.power(instance, PowerAction::Start, was.state == VmState::Paused).await {
                Ok(v) => state = v.state,
                Err(e) => tracing::warn!(error = %e, "starting a sandbox again after a failed migration"),
            }
        }
        let status = json!({"phase": state.power_state().map(MachinePhase::for_power_state), "migration": null});
        if let Err(e) = self.patch_status(m, status).await {
            tracing::warn!(error = %e, "clearing a failed migration's mark; its node agent takes the Machine back at the deadline");
        }
        let why =
            format!("moving to {} failed, and the Machine stays on {}: {}", plan.target, plan.source, cause.message);
        self.record_warning(m, reasons::MIGRATION_FAILED, why.clone()).await;
        Error::new(Reason::MigrationFailed, why)
    }

    /// Merges `status` into the Machine's status.
    async fn patch_status(&self, m: &Machine, status: serde_json::Value) -> Result<Machine> {
        let api = self.api::<Machine>(&m.namespace().unwrap_or_default());
        let patch = json!({"status": status});
        Ok(api.patch_status(&m.name_any(), &field_manager(), &Patch::Merge(&patch)).await?)
    }

    /// [`Self::patch_status`] only if the Machine is still as `m` shows it (a migration starts
    /// from what it checked); `None` if it changed.
    async fn patch_status_if_unchanged(&self, m: &Machine, status: serde_json::Value) -> Result<Option<Machine>> {
        let api = self.api::<Machine>(&m.namespace().unwrap_or_default());
        let patch = json!({"metadata": {"resourceVersion": m.resource_version()}, "status": status});
        match api.patch_status(&m.name_any(), &field_manager(), &Patch::Merge(&patch)).await {
            Ok(m) => Ok(Some(m)),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(None),
            Err(e) => Err(e.into()),
        }
    }
}

fn list_or_none(v: &[&str]) -> String {
    if v.is_empty() { "none".into() } else { v.join(", ") }
}
