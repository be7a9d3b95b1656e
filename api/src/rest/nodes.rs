//! Node-scoped routes over each node's runtime: the nodes themselves, templates, sandboxes,
//! node pools with claims (optionally creating a Machine the node adopts), and the egress check.
//! Reads are open to any authenticated caller; writes are admin-only.

use axum::Json;
use axum::extract::Path;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use kairon_model::KaironNode;
use kairon_runtime_api::types::{CreatePoolRequest, CreateTemplateRequest, Pool, Template};

use super::{Caller, ErrorBody, JsonBody, schema};
use crate::machines::Result;
use crate::machines::nodes::{PoolClaim, PoolClaimRequest, SandboxItem};
use crate::state::AppState;

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct NodePath {
    /// The node's name (`GET /api/v1/nodes`).
    pub node: String,
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct NodeItemPath {
    pub node: String,
    /// The template's or pool's name.
    pub item: String,
}

/// A list of nodes, or with `watch=true` a watch of them.
#[derive(serde::Deserialize, utoipa::IntoParams, Default)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase")]
pub struct NodeListQuery {
    /// `true`: answer a stream of watch events (`application/x-ndjson`, one JSON object a line)
    /// instead of a list, as on `GET /api/v1/machines?watch=true`.
    pub watch: Option<bool>,
    /// With `watch=true`: send only the changes after this version.
    pub resource_version: Option<String>,
}

/// The registered nodes: runtime endpoint, capacity, backends, acceleration, heartbeat; or a
/// watch of them (`watch=true`).
#[utoipa::path(get, path = "/api/v1/nodes", tag = "Nodes", params(NodeListQuery),
    responses((status = 200, description = "The nodes; with `watch=true`, a stream of watch events, one a line",
               content((schema::KaironNodeList = "application/json"), (schema::KaironNodeWatchEvent = "application/x-ndjson"))),
              (status = 400, description = "A parameter is invalid", body = ErrorBody),
              (status = 429, description = "The caller holds as many long-lived connections as it may", body = ErrorBody)))]
async fn node_list(
    c: Caller,
    axum::extract::Query(q): axum::extract::Query<NodeListQuery>,
) -> Result<axum::response::Response> {
    use axum::response::IntoResponse;
    if q.watch == Some(true) {
        let slot = c.connection_slot()?;
        let lines = c
            .machines
            .watch_nodes(q.resource_version.as_deref(), std::time::Duration::from_secs(super::objects::WATCH_SECONDS))
            .await?;
        return super::objects::stream_response(&c, lines, slot);
    }
    Ok(Json(c.machines.nodes().await?).into_response())
}

/// One node.
#[utoipa::path(get, path = "/api/v1/nodes/{node}", tag = "Nodes", params(NodePath),
    responses((status = 200, description = "The node", body = schema::KaironNode),
              (status = 404, description = "Not registered", body = ErrorBody)))]
async fn node_get(c: Caller, Path(p): Path<NodePath>) -> Result<Json<KaironNode>> {
    Ok(Json(c.machines.node(&p.node).await?))
}

/// Templates built on this node (templates are per node).
#[utoipa::path(get, path = "/api/v1/nodes/{node}/templates", tag = "Nodes", params(NodePath),
    responses((status = 200, description = "The templates with their build state", body = Vec<Template>)))]
async fn template_list(c: Caller, Path(p): Path<NodePath>) -> Result<Json<Vec<Template>>> {
    Ok(Json(c.machines.templates(&p.node).await?))
}

/// Build a template from an OCI image on this node (admin-only). Answers at once; follow the
/// build's progress with GET .../templates/{item}.
#[utoipa::path(post, path = "/api/v1/nodes/{node}/templates", tag = "Nodes", params(NodePath), request_body = CreateTemplateRequest,
    responses((status = 202, description = "Building", body = Template),
              (status = 403, description = "Admin-only", body = ErrorBody),
              (status = 409, description = "A template of that name exists", body = ErrorBody)))]
async fn template_build(
    c: Caller,
    Path(p): Path<NodePath>,
    body: JsonBody<CreateTemplateRequest>,
) -> Result<(StatusCode, Json<Template>)> {
    Ok((StatusCode::ACCEPTED, Json(c.machines.build_template(&c.id, &p.node, || body.parse()).await?)))
}

/// One template and its build progress.
#[utoipa::path(get, path = "/api/v1/nodes/{node}/templates/{item}", tag = "Nodes", params(NodeItemPath),
    responses((status = 200, description = "The template", body = Template), (status = 404, description = "Not on this node", body = ErrorBody)))]
async fn template_get(c: Caller, Path(p): Path<NodeItemPath>) -> Result<Json<Template>> {
    Ok(Json(c.machines.template(&p.node, &p.item).await?))
}

/// Every sandbox on this node as its runtime sees it (including ones made outside Kairon).
/// Sandboxes of Machines outside the caller's namespaces show only ID, state and backend; which
/// Machine owns one is told by the owner UID the node agent or the api stamped on it, never by
/// its name.
#[utoipa::path(get, path = "/api/v1/nodes/{node}/sandboxes", tag = "Nodes", params(NodePath),
    responses((status = 200, description = "The sandboxes", body = Vec<SandboxItem>)))]
async fn sandbox_list(c: Caller, Path(p): Path<NodePath>) -> Result<Json<Vec<SandboxItem>>> {
    Ok(Json(c.machines.sandboxes(&c.id, &p.node).await?))
}

/// The node's pools of Paused members.
#[utoipa::path(get, path = "/api/v1/nodes/{node}/pools", tag = "Nodes", params(NodePath),
    responses((status = 200, description = "The pools", body = Vec<Pool>)))]
async fn pool_list(c: Caller, Path(p): Path<NodePath>) -> Result<Json<Vec<Pool>>> {
    Ok(Json(c.machines.pools(&p.node).await?))
}

/// Create a pool (admin-only): the node boots `size` members to Paused in the background; this
/// answers as soon as the pool exists.
#[utoipa::path(post, path = "/api/v1/nodes/{node}/pools", tag = "Nodes", params(NodePath), request_body = CreatePoolRequest,
    responses((status = 201, description = "Created (members still booting)", body = Pool),
              (status = 403, description = "Admin-only", body = ErrorBody),
              (status = 409, description = "A pool of that name exists", body = ErrorBody)))]
async fn pool_create(
    c: Caller,
    Path(p): Path<NodePath>,
    body: JsonBody<CreatePoolRequest>,
) -> Result<(StatusCode, Json<Pool>)> {
    Ok((StatusCode::CREATED, Json(c.machines.create_pool(&c.id, &p.node, || body.parse()).await?)))
}

/// One pool and its members.
#[utoipa::path(get, path = "/api/v1/nodes/{node}/pools/{item}", tag = "Nodes", params(NodeItemPath),
    responses((status = 200, description = "The pool", body = Pool), (status = 404, description = "No such pool", body = ErrorBody)))]
async fn pool_get(c: Caller, Path(p): Path<NodeItemPath>) -> Result<Json<Pool>> {
    Ok(Json(c.machines.pool(&p.node, &p.item).await?))
}

/// Delete a pool and every member it holds, claimed or not (admin-only).
#[utoipa::path(delete, path = "/api/v1/nodes/{node}/pools/{item}", tag = "Nodes", params(NodeItemPath),
    responses((status = 204, description = "Deleted"), (status = 403, description = "Admin-only", body = ErrorBody)))]
async fn pool_delete(c: Caller, Path(p): Path<NodeItemPath>) -> Result<StatusCode> {
    c.machines.delete_pool(&c.id, &p.node, &p.item).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Take one ready member, resumed (admin-only). Fails at once when none is ready. With
/// `createMachine` it answers `{vm, machine}` (or `{vm, machine: null, machineError}`), else the VM.
#[utoipa::path(post, path = "/api/v1/nodes/{node}/pools/{item}/claim", tag = "Nodes", params(NodeItemPath), request_body = PoolClaimRequest,
    responses((status = 200, description = "The claimed VM, or {vm, machine} with createMachine", body = PoolClaim),
              (status = 400, description = "createMachine without machineName", body = ErrorBody),
              (status = 403, description = "Admin-only", body = ErrorBody),
              (status = 409, description = "No ready member right now: retry shortly or grow the pool", body = ErrorBody)))]
async fn pool_claim(
    c: Caller,
    Path(p): Path<NodeItemPath>,
    body: JsonBody<PoolClaimRequest>,
) -> Result<Json<PoolClaim>> {
    Ok(Json(c.machines.claim_from_node_pool(&c.id, &p.node, &p.item, || body.parse_optional()).await?))
}

#[derive(Deserialize, Serialize, ToSchema)]
pub struct EgressCheckBody {
    /// The host a sandbox would connect to.
    pub host: String,
}

/// Whether a sandbox on this node may reach a host; never the credential itself.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EgressCheckResult {
    pub allow: bool,
    pub reason: String,
    /// Whether a credential would be injected for this host (its value is never returned).
    pub would_inject_credential: bool,
}

/// Ask the node whether a sandbox's request to `host` would be allowed (admin-only).
#[utoipa::path(post, path = "/api/v1/nodes/{node}/egress-check", tag = "Nodes", params(NodePath), request_body = EgressCheckBody,
    responses((status = 200, description = "The decision", body = EgressCheckResult),
              (status = 400, description = "No host", body = ErrorBody),
              (status = 403, description = "Admin-only", body = ErrorBody)))]
async fn egress_check(
    c: Caller,
    Path(p): Path<NodePath>,
    body: JsonBody<EgressCheckBody>,
) -> Result<Json<EgressCheckResult>> {
    let d = c.machines.egress_check(&c.id, &p.node, || Ok(body.parse()?.host)).await?;
    Ok(Json(EgressCheckResult { allow: d.allow, reason: d.reason, would_inject_credential: d.credential.is_some() }))
}

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(node_list))
        .routes(routes!(node_get))
        .routes(routes!(template_list, template_build))
        .routes(routes!(template_get))
        .routes(routes!(sandbox_list))
        .routes(routes!(pool_list, pool_create))
        .routes(routes!(pool_get, pool_delete))
        .routes(routes!(pool_claim))
        .routes(routes!(egress_check))
}
