//! Power operations on a Machine (as `spec.powerState` changes the node agent carries out, each
//! checked against `model::power::plan`), restart, fork and clone, filesystem freeze,
//! and sandbox snapshots.

use kube::api::{Patch, PatchParams};
use serde::Serialize;
use serde_json::json;
use utoipa::ToSchema;

use kairon_model::keys::{annotations, labels};
use kairon_model::power::{self, Refusal};
use kairon_model::{Machine, PowerState};
use kairon_runtime_api::types::{PowerAction, SnapshotResult};

use super::objects::check_name;
use super::{Error, Machines, Reason, Result, allowed};
use crate::auth::{self, Identity, Verb};

/// The answer of a fork or clone.
#[derive(Serialize, ToSchema)]
pub struct CopyResult {
    /// The new Machine.
    #[schema(value_type = crate::rest::schema::Machine)]
    pub machine: Machine,
    /// Whether memory and processes were copied too (a QEMU VM) or only the filesystem.
    pub live: bool,
}

/// A fork keeps memory and processes where the backend can; a clone boots fresh from a copy of
/// the disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Copy {
    Fork,
    Clone,
}

pub(super) fn field_manager() -> PatchParams {
    PatchParams { field_manager: Some("kairon-api".into()), ..Default::default() }
}

impl Machines {
    /// A Machine the caller may change.
    pub(super) async fn writable(&self, id: &Identity, ns: &str, name: &str) -> Result<Machine> {
        let m: Machine = self.get(id, ns, name).await?;
        allowed(auth::may_access(id, Verb::Write, Some(ns), false))?;
        Ok(m)
    }

    /// Sets `spec.powerState` once the planner says the transition is possible; `clear_idle`
    /// also clears `idle-suspended` (start and resume).
    pub async fn set_power(
        &self,
        id: &Identity,
        ns: &str,
        name: &str,
        to: PowerState,
        clear_idle: bool,
        dry_run: bool,
    ) -> Result<Machine> {
        let m = self.writable(id, ns, name).await?;
        if m.metadata.deletion_timestamp.is_some() {
            return Err(Error::conflict(Reason::Terminating, format!("Machine {ns}/{name} is being deleted")));
        }
        let from = m.spec.desired_power_state();
        if let Err(refusal) = power::plan(to, from, m.spec.track()) {
            // The refusal says what a sandbox can do instead; an invalid step gets the way out.
            let (reason, message) = match refusal {
                Refusal::Invalid { .. } => (
                    Reason::InvalidTransition,
                    format!("Machine {ns}/{name}: {refusal}; resume it first (POST .../resume)"),
                ),
                Refusal::NeedsVm { .. } => (Reason::PowerStateUnsupported, format!("Machine {ns}/{name}: {refusal}")),
            };
            return Err(Error::conflict(reason, message));
        }
        let mut patch = json!({ "spec": { "powerState": to } });
        if clear_idle && m.annotations().contains_key(annotations::IDLE_SUSPENDED) {
            patch["metadata"] = json!({ "annotations": { annotations::IDLE_SUSPENDED: null } });
        }
        let pp = PatchParams { dry_run, ..field_manager() };
        Ok(self.api::<Machine>(ns).patch(name, &pp, &Patch::Merge(&patch)).await?)
    }

    /// Restarts a Running Machine's guest (a reboot on its node; the Machine keeps its identity).
    pub async fn restart(&self, id: &Identity, ns: &str, name: &str, dry_run: bool) -> Result<Machine> {
        let m = self.writable(id, ns, name).await?;
        let desired = m.spec.desired_power_state();
        if desired != PowerState::Running {
            return Err(Error::conflict(
                Reason::InvalidTransition,
                format!("Machine {ns}/{name} is {desired}: start it instead of restarting"),
            ));
        }
        let (rt, instance) = self.machine_runtime(&m).await?;
        if dry_run {
            // What a restart would reach: the Machine's own instance (the runtime checks).
            rt.get(&instance).await?;
        } else {
            rt.power(&instance, PowerAction::Restart, false).await?;
        }
        Ok(m)
    }

    /// Copies a Machine's instance on its node into a new Machine `new_name` pinned there; the
    /// node agent adopts the copy once it carries the new Machine's UID. If the Machine cannot
    /// be created, the copy is removed again. `new_name` is read only once the caller may write.
    pub async fn copy(
        &self,
        id: &Identity,
        ns: &str,
        name: &str,
        how: Copy,
        new_name: impl FnOnce() -> Result<String>,
    ) -> Result<CopyResult> {
        allowed(auth::may_access(id, Verb::Write, Some(ns), false))?;
        let m: Machine = self.get(id, ns, name).await?;
        if m.spec.sandbox.is_some() {
            allowed(auth::admin_only(id, "creating a sandbox-track (spec.sandbox) Machine"))?;
        }
        let new_name = new_name()?;
        check_name("name", &new_name)?;
        let api = self.api::<Machine>(ns);
        if api.get_opt(&new_name).await?.is_some() {
            return Err(Error::conflict(Reason::AlreadyExists, format!("Machine {ns}/{new_name} already exists")));
        }
        let (rt, instance) = self.machine_runtime(&m).await?;
        let node = m.status.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default();
        let runtime_name = kairon_model::machine::runtime_name(ns, &new_name);
        // A sandbox's fork copies its filesystem only, which is what a clone is; a VM's clone
        // is a disk copy that boots fresh.
        let copied = if how == Copy::Fork || m.spec.track() == power::Track::TemplateSandbox {
            rt.fork(&instance, &runtime_name).await?
        } else {
            kairon_runtime_api::types::ForkResult { vm: rt.clone_vm(&instance, &runtime_name).await?, live: false }
        };
        let mut spec = m.spec.clone();
        spec.node_name = Some(node.clone());
        if how == Copy::Clone {
            spec.power_state = None;
        }
        let mut child = Machine::new(&new_name, spec);
        child.metadata.namespace = Some(ns.to_string());
        child.metadata.labels = m.metadata.labels.clone().map(|mut l| {
            // A copy is nobody's pool member or claim.
            l.remove(labels::POOL);
            l.remove(labels::CLAIM);
            l
        });
        let pp = kube::api::PostParams { field_manager: Some("kairon-api".into()), ..Default::default() };
        // The copy is nobody's yet: it is reached as the node's, not as the source Machine's.
        let rt = self.runtime(&node).await?;
        match api.create(&pp, &child).await {
            Ok(created) => {
                // The copy was unowned until now: the new Machine's UID makes it that
                // Machine's, and only then does the node agent adopt it.
                let uid = created.metadata.uid.clone().unwrap_or_default();
                rt.set_owner(&copied.vm.id, None, &uid).await?;
                Ok(CopyResult { machine: created, live: copied.live })
            }
            Err(e) => {
                if let Err(cleanup) = rt.delete(&copied.vm.id).await {
                    tracing::warn!(error = %cleanup, "removing a copy whose Machine could not be created");
                }
                Err(e.into())
            }
        }
    }

    /// Freezes the guest's filesystems until unfreeze or `unfreeze_timeout` (`5m`, `90s`;
    /// default 5m) from now: writes `fs-frozen-until`, which the node confirms with
    /// `fs-frozen`. VMs only.
    pub async fn freeze(&self, id: &Identity, ns: &str, name: &str, unfreeze_timeout: Option<&str>) -> Result<Machine> {
        let m = self.writable(id, ns, name).await?;
        if m.spec.track() == power::Track::TemplateSandbox {
            return Err(Error::conflict(
                Reason::FreezeUnsupported,
                "a template sandbox shares the host's filesystem, so freezing it would freeze the host's: freeze needs a VM",
            ));
        }
        let seconds =
            kairon_model::duration::parse_seconds(unfreeze_timeout.unwrap_or("5m")).map_err(Error::bad_request)?;
        if seconds <= 0 {
            return Err(Error::bad_request("unfreezeTimeout must be positive"));
        }
        let until = chrono::Utc::now() + chrono::Duration::seconds(seconds);
        let until = until.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let patch = json!({ "metadata": { "annotations": { annotations::FS_FROZEN_UNTIL: until } } });
        Ok(self.api::<Machine>(ns).patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await?)
    }

    /// Thaws the guest's filesystems now.
    pub async fn unfreeze(&self, id: &Identity, ns: &str, name: &str) -> Result<Machine> {
        self.writable(id, ns, name).await?;
        let patch = json!({ "metadata": { "annotations": { annotations::FS_FROZEN_UNTIL: null } } });
        Ok(self.api::<Machine>(ns).patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await?)
    }

    /// Exports a sandbox's root filesystem to a tar file at `path` on its node (admin-only).
    pub async fn snapshot(
        &self,
        id: &Identity,
        ns: &str,
        name: &str,
        path: impl FnOnce() -> Result<String>,
    ) -> Result<SnapshotResult> {
        allowed(auth::admin_only(id, "snapshotting a sandbox"))?;
        let m: Machine = self.get(id, ns, name).await?;
        let path = path()?;
        if !path.starts_with('/') {
            return Err(Error::bad_request("path must be an absolute path on the node"));
        }
        let (rt, instance) = self.machine_runtime(&m).await?;
        Ok(rt.snapshot(&instance, &path).await?)
    }
}
