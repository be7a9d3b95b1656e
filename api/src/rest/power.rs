//! Power operations on a Machine, fork and clone, filesystem freeze, and sandbox snapshots.
//! Power changes are `spec.powerState` patches (the node agent makes them so), each with
//! `dryRun=All`; `start` and `resume` clear `kairon.zyvor.dev/idle-suspended`.

use axum::Json;
use axum::extract::{Path, Query};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use kairon_model::keys::annotations;
use kairon_model::power::{self, Refusal};
use kairon_model::{KaironNode, Machine, PowerState};
use kairon_runtime_api::types::PowerAction;

use super::objects::{DryRunQuery, ObjectPath, check_name, get_object};
use super::{Caller, ErrorBody, JsonBody, RestError, RestResult, schema};
use crate::auth::{self, Verb};
use crate::state::AppState;

#[derive(Deserialize, IntoParams, Default)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase")]
pub struct StartQuery {
    /// `All`: answer the result without storing it.
    pub dry_run: Option<String>,
    /// Boot, then pause at once (the guest runs briefly first; not QEMU's `-S`).
    pub paused: Option<bool>,
}

/// Sets `spec.powerState` (after checking the transition), optionally clearing
/// `idle-suspended`.
async fn set_power(c: &Caller, p: &ObjectPath, to: PowerState, clear_idle: bool, dry_run: bool) -> RestResult<Value> {
    let m: Machine = get_object(c, &p.namespace, &p.name).await?;
    c.check(auth::may_access(&c.id, Verb::Write, Some(&p.namespace), false))?;
    if m.metadata.deletion_timestamp.is_some() {
        return Err(RestError::conflict("Terminating", format!("Machine {}/{} is being deleted", p.namespace, p.name)));
    }
    let from = m.spec.desired_power_state();
    if let Err(refusal) = power::plan(to, from, m.spec.track()) {
        let advice = match refusal {
            Refusal::Invalid { .. } => "resume it first (POST .../resume)",
            Refusal::NeedsVm { .. } => "a template sandbox can pause or stop instead",
        };
        return Err(RestError::conflict(
            refusal.reason(),
            format!("Machine {}/{}: {refusal}; {advice}", p.namespace, p.name),
        ));
    }
    let mut patch = json!({ "spec": { "powerState": to } });
    if clear_idle && m.annotations().contains_key(annotations::IDLE_SUSPENDED) {
        patch["metadata"] = json!({ "annotations": { annotations::IDLE_SUSPENDED: null } });
    }
    let pp = PatchParams { dry_run, field_manager: Some("kairon-api".into()), ..Default::default() };
    let api: Api<Machine> = Api::namespaced(c.ctx.kube.clone(), &p.namespace);
    Ok(serde_json::to_value(api.patch(&p.name, &pp, &Patch::Merge(&patch)).await?).unwrap_or_default())
}

macro_rules! power_route {
    ($fn:ident, $path:literal, $to:expr, $clear:expr, $doc:literal) => {
        #[doc = $doc]
        #[utoipa::path(post, path = $path, tag = "Power", params(ObjectPath, DryRunQuery),
            responses((status = 200, description = "The Machine with its new spec.powerState", body = schema::Machine),
                      (status = 404, description = "No such Machine", body = ErrorBody),
                      (status = 409, description = "Not possible from the current state", body = ErrorBody)))]
        async fn $fn(c: Caller, Path(p): Path<ObjectPath>, Query(d): Query<DryRunQuery>) -> RestResult<Json<Value>> {
            Ok(Json(set_power(&c, &p, $to, $clear, d.is_dry_run()?).await?))
        }
    };
}

power_route!(
    machine_stop,
    "/api/v1/machines/{namespace}/{name}/stop",
    PowerState::Stopped,
    false,
    "Stop: the next start boots from the image (the disk is lost unless on spec.volumes)."
);
power_route!(
    machine_halt,
    "/api/v1/machines/{namespace}/{name}/halt",
    PowerState::Halted,
    false,
    "Halt: power the guest off, keeping the VM defined; resume boots it (VMs only)."
);
power_route!(
    machine_pause,
    "/api/v1/machines/{namespace}/{name}/pause",
    PowerState::Paused,
    false,
    "Pause: keep memory, use no CPU; resume takes milliseconds."
);
power_route!(
    machine_hibernate,
    "/api/v1/machines/{namespace}/{name}/hibernate",
    PowerState::Hibernated,
    false,
    "Hibernate: save memory to disk and free it; resume restores it (VMs only)."
);
power_route!(
    machine_resume,
    "/api/v1/machines/{namespace}/{name}/resume",
    PowerState::Running,
    true,
    "Resume to Running from any suspended state; clears kairon.zyvor.dev/idle-suspended."
);

/// Start the Machine (`paused=true`: boot, then pause at once); clears `idle-suspended`.
#[utoipa::path(post, path = "/api/v1/machines/{namespace}/{name}/start", tag = "Power", params(ObjectPath, StartQuery),
    responses((status = 200, description = "The Machine with its new spec.powerState", body = schema::Machine),
              (status = 404, description = "No such Machine", body = ErrorBody),
              (status = 409, description = "Not possible from the current state", body = ErrorBody)))]
async fn machine_start(c: Caller, Path(p): Path<ObjectPath>, Query(q): Query<StartQuery>) -> RestResult<Json<Value>> {
    let dry = DryRunQuery { dry_run: q.dry_run }.is_dry_run()?;
    let to = if q.paused == Some(true) { PowerState::Paused } else { PowerState::Running };
    Ok(Json(set_power(&c, &p, to, true, dry).await?))
}

/// Restart a Running Machine's guest (a reboot on its node; the Machine keeps its identity).
#[utoipa::path(post, path = "/api/v1/machines/{namespace}/{name}/restart", tag = "Power", params(ObjectPath, DryRunQuery),
    responses((status = 200, description = "The Machine", body = schema::Machine),
              (status = 409, description = "Not Running, or not provisioned yet", body = ErrorBody)))]
async fn machine_restart(
    c: Caller,
    Path(p): Path<ObjectPath>,
    Query(d): Query<DryRunQuery>,
) -> RestResult<Json<Value>> {
    let m: Machine = get_object(&c, &p.namespace, &p.name).await?;
    c.check(auth::may_access(&c.id, Verb::Write, Some(&p.namespace), false))?;
    if m.spec.desired_power_state() != PowerState::Running {
        return Err(RestError::conflict(
            "InvalidTransition",
            format!(
                "Machine {}/{} is {}: start it instead of restarting",
                p.namespace,
                p.name,
                m.spec.desired_power_state()
            ),
        ));
    }
    let (rt, id) = c.ctx.machine_runtime(&m).await?;
    if !d.is_dry_run()? {
        rt.power(&id, PowerAction::Restart, false).await?;
    }
    Ok(Json(serde_json::to_value(m).unwrap_or_default()))
}

#[derive(Deserialize, Serialize, IntoParams, Default)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase")]
pub struct MigrateQuery {
    /// `All`: check without doing it.
    pub dry_run: Option<String>,
    /// The node to move to; any other node with the backend when unset.
    pub target_node: Option<String>,
}

/// Migrate the Machine to another node.
#[utoipa::path(post, path = "/api/v1/machines/{namespace}/{name}/migrate", tag = "Power", params(ObjectPath, MigrateQuery),
    responses((status = 200, description = "The Machine", body = schema::Machine),
              (status = 409, description = "No node to move to, or live migration is not available", body = ErrorBody)))]
async fn machine_migrate(
    c: Caller,
    Path(p): Path<ObjectPath>,
    Query(q): Query<MigrateQuery>,
) -> RestResult<Json<Value>> {
    let m: Machine = get_object(&c, &p.namespace, &p.name).await?;
    c.check(auth::may_access(&c.id, Verb::Write, Some(&p.namespace), false))?;
    DryRunQuery { dry_run: q.dry_run.clone() }.is_dry_run()?;
    let here = m.status.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default();
    let nodes: Api<KaironNode> = Api::all(c.ctx.kube.clone());
    let others: Vec<String> =
        nodes.list(&Default::default()).await?.items.iter().map(|n| n.name_any()).filter(|n| *n != here).collect();
    let target = match &q.target_node {
        Some(t) if !others.contains(t) => {
            return Err(RestError::conflict(
                "NoTargetNode",
                format!("node {t:?} is not another registered node (others: {})", list_or_none(&others)),
            ));
        }
        Some(t) => t.clone(),
        None => others.first().cloned().ok_or_else(|| {
            RestError::conflict(
                "NoTargetNode",
                format!(
                    "Machine {}/{} runs on {here:?}, the only node: there is nowhere to migrate it",
                    p.namespace, p.name
                ),
            )
        })?,
    };
    Err(RestError::conflict(
        "MigrationUnsupported",
        format!(
            "live migration to {target:?} is not available in this runtime; stop the Machine and start a clone there instead"
        ),
    ))
}

fn list_or_none(v: &[String]) -> String {
    if v.is_empty() { "none".into() } else { v.join(", ") }
}

#[derive(Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CopyRequest {
    /// The new Machine's name (same namespace).
    pub name: String,
}

/// Copies a Machine's instance on its node into a new Machine pinned there; the node agent adopts
/// the copy by its runtime name. If the Machine cannot be created, the copy is removed again.
async fn copy(c: &Caller, p: &ObjectPath, body: JsonBody<CopyRequest>, live: bool) -> RestResult<Value> {
    c.check(auth::may_access(&c.id, Verb::Write, Some(&p.namespace), false))?;
    let m: Machine = get_object(c, &p.namespace, &p.name).await?;
    if m.spec.sandbox.is_some() {
        c.check(auth::admin_only(&c.id, "creating a sandbox-track (spec.sandbox) Machine"))?;
    }
    let req = body.parse()?;
    check_name("name", &req.name)?;
    let api: Api<Machine> = Api::namespaced(c.ctx.kube.clone(), &p.namespace);
    if api.get_opt(&req.name).await?.is_some() {
        return Err(RestError::conflict(
            "AlreadyExists",
            format!("Machine {}/{} already exists", p.namespace, req.name),
        ));
    }
    let (rt, id) = c.ctx.machine_runtime(&m).await?;
    let node = m.status.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default();
    let runtime_name = kairon_model::machine::runtime_name(&p.namespace, &req.name);
    let is_vm = m.spec.sandbox.as_ref().is_none_or(|sb| sb.template_name.is_none());
    // A sandbox's fork copies its filesystem only, which is what a clone is; a VM's clone is a
    // disk copy that boots fresh.
    let copied = if live || !is_vm {
        rt.fork(&id, &runtime_name).await?
    } else {
        kairon_runtime_api::types::ForkResult { vm: rt.clone_vm(&id, &runtime_name).await?, live: false }
    };
    let mut spec = m.spec.clone();
    spec.node_name = Some(node);
    if !live {
        spec.power_state = None;
    }
    let mut child = Machine::new(&req.name, spec);
    child.metadata.namespace = Some(p.namespace.clone());
    child.metadata.labels = m.metadata.labels.clone().map(|mut l| {
        // A copy is nobody's pool member or claim.
        l.remove(kairon_model::keys::labels::POOL);
        l.remove(kairon_model::keys::labels::CLAIM);
        l
    });
    match api.create(&PostParams { field_manager: Some("kairon-api".into()), ..Default::default() }, &child).await {
        Ok(created) => {
            // The copy was unowned until now: the new Machine's UID makes it that Machine's,
            // and only then does the node agent adopt it.
            let uid = created.metadata.uid.clone().unwrap_or_default();
            rt.set_owner(&copied.vm.id, None, &uid).await?;
            Ok(json!({ "machine": created, "live": copied.live }))
        }
        Err(e) => {
            if let Err(cleanup) = rt.delete(&copied.vm.id).await {
                tracing::warn!(error = %cleanup, "removing a copy whose Machine could not be created");
            }
            Err(e.into())
        }
    }
}

#[derive(Serialize, ToSchema)]
pub struct CopyResult {
    /// The new Machine.
    pub machine: schema::Machine,
    /// Whether memory and processes were copied too (a QEMU VM) or only the filesystem.
    pub live: bool,
}

/// Fork: a live copy of the Machine (memory and disk on a VM; the filesystem of a sandbox) into a
/// new Machine with its own identity.
#[utoipa::path(post, path = "/api/v1/machines/{namespace}/{name}/fork", tag = "Power", params(ObjectPath), request_body = CopyRequest,
    responses((status = 201, description = "The new Machine", body = CopyResult),
              (status = 409, description = "The name is taken, or the Machine has no instance yet", body = ErrorBody)))]
async fn machine_fork(
    c: Caller,
    Path(p): Path<ObjectPath>,
    body: JsonBody<CopyRequest>,
) -> RestResult<(axum::http::StatusCode, Json<Value>)> {
    Ok((axum::http::StatusCode::CREATED, Json(copy(&c, &p, body, true).await?)))
}

/// Clone: copy the Machine's disk into a new Machine that boots fresh.
#[utoipa::path(post, path = "/api/v1/machines/{namespace}/{name}/clone", tag = "Power", params(ObjectPath), request_body = CopyRequest,
    responses((status = 201, description = "The new Machine", body = CopyResult),
              (status = 409, description = "The name is taken, or the Machine has no instance yet", body = ErrorBody)))]
async fn machine_clone(
    c: Caller,
    Path(p): Path<ObjectPath>,
    body: JsonBody<CopyRequest>,
) -> RestResult<(axum::http::StatusCode, Json<Value>)> {
    Ok((axum::http::StatusCode::CREATED, Json(copy(&c, &p, body, false).await?)))
}

#[derive(Deserialize, IntoParams, Default)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase")]
pub struct FreezeQuery {
    /// Thaw on its own after this long (`5m`, `90s`; default 5m).
    pub unfreeze_timeout: Option<String>,
}

/// Freeze the guest's filesystems through the guest agent until unfreeze or the deadline
/// (writes `kairon.zyvor.dev/fs-frozen-until`; the node confirms with `fs-frozen`). VMs only.
#[utoipa::path(post, path = "/api/v1/machines/{namespace}/{name}/freeze", tag = "Power", params(ObjectPath, FreezeQuery),
    responses((status = 200, description = "The Machine with the freeze deadline", body = schema::Machine),
              (status = 400, description = "The timeout is not a duration", body = ErrorBody),
              (status = 409, description = "A sandbox's filesystems cannot be frozen", body = ErrorBody)))]
async fn machine_freeze(c: Caller, Path(p): Path<ObjectPath>, Query(q): Query<FreezeQuery>) -> RestResult<Json<Value>> {
    let m: Machine = get_object(&c, &p.namespace, &p.name).await?;
    c.check(auth::may_access(&c.id, Verb::Write, Some(&p.namespace), false))?;
    if m.spec.sandbox.as_ref().is_some_and(|s| s.template_name.is_some()) {
        return Err(RestError::conflict(
            "FreezeUnsupported",
            "a template sandbox shares the host's filesystem, so freezing it would freeze the host's: freeze needs a VM",
        ));
    }
    let secs = kairon_model::duration::parse_seconds(q.unfreeze_timeout.as_deref().unwrap_or("5m"))
        .map_err(RestError::bad_request)?;
    if secs <= 0 {
        return Err(RestError::bad_request("unfreezeTimeout must be positive"));
    }
    let until = chrono::Utc::now() + chrono::Duration::seconds(secs);
    let patch = json!({ "metadata": { "annotations": { annotations::FS_FROZEN_UNTIL: until.to_rfc3339_opts(chrono::SecondsFormat::Secs, true) } } });
    let api: Api<Machine> = Api::namespaced(c.ctx.kube.clone(), &p.namespace);
    Ok(Json(
        serde_json::to_value(api.patch(&p.name, &PatchParams::default(), &Patch::Merge(&patch)).await?)
            .unwrap_or_default(),
    ))
}

/// Thaw the guest's filesystems now.
#[utoipa::path(post, path = "/api/v1/machines/{namespace}/{name}/unfreeze", tag = "Power", params(ObjectPath),
    responses((status = 200, description = "The Machine", body = schema::Machine),
              (status = 404, description = "No such Machine", body = ErrorBody)))]
async fn machine_unfreeze(c: Caller, Path(p): Path<ObjectPath>) -> RestResult<Json<Value>> {
    let _: Machine = get_object(&c, &p.namespace, &p.name).await?;
    c.check(auth::may_access(&c.id, Verb::Write, Some(&p.namespace), false))?;
    let patch = json!({ "metadata": { "annotations": { annotations::FS_FROZEN_UNTIL: null } } });
    let api: Api<Machine> = Api::namespaced(c.ctx.kube.clone(), &p.namespace);
    Ok(Json(
        serde_json::to_value(api.patch(&p.name, &PatchParams::default(), &Patch::Merge(&patch)).await?)
            .unwrap_or_default(),
    ))
}

/// Export a sandbox's root filesystem to a tar file on its node (admin-only).
#[utoipa::path(post, path = "/api/v1/machines/{namespace}/{name}/snapshot", tag = "Power", params(ObjectPath),
    request_body = kairon_runtime_api::types::SnapshotRequest,
    responses((status = 200, description = "Where it was written", body = kairon_runtime_api::types::SnapshotResult),
              (status = 403, description = "Admin-only", body = ErrorBody)))]
async fn machine_snapshot(
    c: Caller,
    Path(p): Path<ObjectPath>,
    body: JsonBody<kairon_runtime_api::types::SnapshotRequest>,
) -> RestResult<Json<Value>> {
    c.check(auth::admin_only(&c.id, "snapshotting a sandbox"))?;
    let m: Machine = get_object(&c, &p.namespace, &p.name).await?;
    let req = body.parse()?;
    if !req.path.starts_with('/') {
        return Err(RestError::bad_request("path must be an absolute path on the node"));
    }
    let (rt, id) = c.ctx.machine_runtime(&m).await?;
    Ok(Json(serde_json::to_value(rt.snapshot(&id, &req.path).await?).unwrap_or_default()))
}

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(machine_start))
        .routes(routes!(machine_stop))
        .routes(routes!(machine_halt))
        .routes(routes!(machine_pause))
        .routes(routes!(machine_resume))
        .routes(routes!(machine_hibernate))
        .routes(routes!(machine_restart))
        .routes(routes!(machine_migrate))
        .routes(routes!(machine_fork))
        .routes(routes!(machine_clone))
        .routes(routes!(machine_freeze))
        .routes(routes!(machine_unfreeze))
        .routes(routes!(machine_snapshot))
}
