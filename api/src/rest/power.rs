//! Power operations on a Machine, fork and clone, filesystem freeze, and sandbox snapshots.
//! Power changes are `spec.powerState` patches (the node agent makes them so), each with
//! `dryRun=All`; `start` and `resume` clear `kairon.zyvor.dev/idle-suspended`.

use axum::Json;
use axum::extract::{Path, Query};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use kairon_model::{Machine, PowerState};
use kairon_runtime_api::types::SnapshotResult;

use super::objects::{DryRunQuery, ObjectPath};
use super::{Caller, ErrorBody, JsonBody, schema};
use crate::machines::Result;
use crate::machines::lifetime::Extended;
use crate::machines::migrate::Migration;
use crate::machines::power::{Copy, CopyResult};
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

macro_rules! power_route {
    ($fn:ident, $path:literal, $to:expr, $clear:expr, $doc:literal) => {
        #[doc = $doc]
        #[utoipa::path(post, path = $path, tag = "Power", params(ObjectPath, DryRunQuery),
            responses((status = 200, description = "The Machine with its new spec.powerState", body = schema::Machine),
                      (status = 404, description = "No such Machine", body = ErrorBody),
                      (status = 409, description = "Not possible from the current state", body = ErrorBody)))]
        async fn $fn(c: Caller, Path(p): Path<ObjectPath>, Query(d): Query<DryRunQuery>) -> Result<Json<Machine>> {
            Ok(Json(c.machines.set_power(&c.id, &p.namespace, &p.name, $to, $clear, d.is_dry_run()?).await?))
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
async fn machine_start(c: Caller, Path(p): Path<ObjectPath>, Query(q): Query<StartQuery>) -> Result<Json<Machine>> {
    let dry = DryRunQuery { dry_run: q.dry_run }.is_dry_run()?;
    let to = if q.paused == Some(true) { PowerState::Paused } else { PowerState::Running };
    Ok(Json(c.machines.set_power(&c.id, &p.namespace, &p.name, to, true, dry).await?))
}

/// Restart a Running Machine's guest (a reboot on its node; the Machine keeps its identity).
#[utoipa::path(post, path = "/api/v1/machines/{namespace}/{name}/restart", tag = "Power", params(ObjectPath, DryRunQuery),
    responses((status = 200, description = "The Machine", body = schema::Machine),
              (status = 409, description = "Not Running, or not provisioned yet", body = ErrorBody)))]
async fn machine_restart(c: Caller, Path(p): Path<ObjectPath>, Query(d): Query<DryRunQuery>) -> Result<Json<Machine>> {
    Ok(Json(c.machines.restart(&c.id, &p.namespace, &p.name, d.is_dry_run()?).await?))
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

/// Migrate the Machine to another node: a template sandbox moves cold (stopped, its changed
/// files copied, started there); with `dryRun=All`, only the plan: the target, the steps, and
/// for every node whether it fits and why not.
#[utoipa::path(post, path = "/api/v1/machines/{namespace}/{name}/migrate", tag = "Power", params(ObjectPath, MigrateQuery),
    responses((status = 200, description = "The plan, and the Machine on its new node (or as it is, on a dry run)", body = Migration),
              (status = 409, description = "No node to move to, a migration under way, or live migration is not available", body = ErrorBody),
              (status = 502, description = "The migration failed part-way: the Machine stays on its node (a MigrationFailed Event says why)", body = ErrorBody)))]
async fn machine_migrate(
    c: Caller,
    Path(p): Path<ObjectPath>,
    Query(q): Query<MigrateQuery>,
) -> Result<Json<Migration>> {
    let dry_run = DryRunQuery { dry_run: q.dry_run.clone() }.is_dry_run()?;
    Ok(Json(c.machines.migrate(&c.id, &p.namespace, &p.name, q.target_node.as_deref(), dry_run).await?))
}

#[derive(Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CopyRequest {
    /// The new Machine's name (same namespace).
    pub name: String,
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
) -> Result<(axum::http::StatusCode, Json<CopyResult>)> {
    let forked = c.machines.copy(&c.id, &p.namespace, &p.name, Copy::Fork, || Ok(body.parse()?.name)).await?;
    Ok((axum::http::StatusCode::CREATED, Json(forked)))
}

/// Clone: copy the Machine's disk into a new Machine that boots fresh.
#[utoipa::path(post, path = "/api/v1/machines/{namespace}/{name}/clone", tag = "Power", params(ObjectPath), request_body = CopyRequest,
    responses((status = 201, description = "The new Machine", body = CopyResult),
              (status = 409, description = "The name is taken, or the Machine has no instance yet", body = ErrorBody)))]
async fn machine_clone(
    c: Caller,
    Path(p): Path<ObjectPath>,
    body: JsonBody<CopyRequest>,
) -> Result<(axum::http::StatusCode, Json<CopyResult>)> {
    let cloned = c.machines.copy(&c.id, &p.namespace, &p.name, Copy::Clone, || Ok(body.parse()?.name)).await?;
    Ok((axum::http::StatusCode::CREATED, Json(cloned)))
}

#[derive(Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExtendRequest {
    /// How much later the Machine ends: 1 to 31536000 (a year).
    pub seconds: i64,
}

/// Extend: move the Machine's end (`status.lifecycle.expiresAt`) `seconds` later. Each deadline
/// that would end it sooner is lengthened: `spec.lifecycle.maxLifetimeSeconds`,
/// `spec.ttlSeconds`, and the binding MachineClaim's `spec.ttlSeconds`.
#[utoipa::path(post, path = "/api/v1/machines/{namespace}/{name}/extend", tag = "Power", params(ObjectPath, DryRunQuery),
    request_body = ExtendRequest,
    responses((status = 200, description = "The new end and the Machine", body = Extended),
              (status = 404, description = "No such Machine", body = ErrorBody),
              (status = 409, description = "No deadline to extend, or the Machine is being deleted", body = ErrorBody),
              (status = 422, description = "seconds is out of range", body = ErrorBody)))]
async fn machine_extend(
    c: Caller,
    Path(p): Path<ObjectPath>,
    Query(d): Query<DryRunQuery>,
    body: JsonBody<ExtendRequest>,
) -> Result<Json<Extended>> {
    let dry = d.is_dry_run()?;
    Ok(Json(c.machines.extend(&c.id, &p.namespace, &p.name, || Ok(body.parse()?.seconds), dry).await?))
}

#[derive(Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TimeoutRequest {
    /// The Machine ends this many seconds from now: 1 to 31536000 (a year).
    pub seconds: i64,
}

/// Set timeout: the Machine ends `seconds` from now, whether it had a deadline or not, sooner or
/// later than before (`spec.ttlSeconds` becomes what ends it then, counted from creation). Its
/// max lifetime and its claim's TTL stay, and the earliest deadline still wins: the answer's
/// `expiresAt` says when it ends.
#[utoipa::path(post, path = "/api/v1/machines/{namespace}/{name}/timeout", tag = "Power", params(ObjectPath, DryRunQuery),
    request_body = TimeoutRequest,
    responses((status = 200, description = "The new end and the Machine", body = Extended),
              (status = 404, description = "No such Machine", body = ErrorBody),
              (status = 409, description = "A warm pool member (its lifetime starts at its claim), or the Machine is being deleted", body = ErrorBody),
              (status = 422, description = "seconds is out of range", body = ErrorBody)))]
async fn machine_set_timeout(
    c: Caller,
    Path(p): Path<ObjectPath>,
    Query(d): Query<DryRunQuery>,
    body: JsonBody<TimeoutRequest>,
) -> Result<Json<Extended>> {
    let dry = d.is_dry_run()?;
    Ok(Json(c.machines.set_timeout(&c.id, &p.namespace, &p.name, || Ok(body.parse()?.seconds), dry).await?))
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
async fn machine_freeze(c: Caller, Path(p): Path<ObjectPath>, Query(q): Query<FreezeQuery>) -> Result<Json<Machine>> {
    Ok(Json(c.machines.freeze(&c.id, &p.namespace, &p.name, q.unfreeze_timeout.as_deref()).await?))
}

/// Thaw the guest's filesystems now.
#[utoipa::path(post, path = "/api/v1/machines/{namespace}/{name}/unfreeze", tag = "Power", params(ObjectPath),
    responses((status = 200, description = "The Machine", body = schema::Machine),
              (status = 404, description = "No such Machine", body = ErrorBody)))]
async fn machine_unfreeze(c: Caller, Path(p): Path<ObjectPath>) -> Result<Json<Machine>> {
    Ok(Json(c.machines.unfreeze(&c.id, &p.namespace, &p.name).await?))
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
) -> Result<Json<SnapshotResult>> {
    Ok(Json(c.machines.snapshot(&c.id, &p.namespace, &p.name, || Ok(body.parse()?.path)).await?))
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
        .routes(routes!(machine_extend))
        .routes(routes!(machine_set_timeout))
        .routes(routes!(machine_fork))
        .routes(routes!(machine_clone))
        .routes(routes!(machine_freeze))
        .routes(routes!(machine_unfreeze))
        .routes(routes!(machine_snapshot))
}
