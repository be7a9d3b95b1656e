//! Node-scoped routes over each node's runtime: the nodes themselves, templates, sandboxes,
//! node pools with claims (optionally creating a Machine the node adopts), and the egress check.
//! Reads are open to any authenticated caller; writes are admin-only.

use axum::Json;
use axum::extract::Path;
use axum::http::StatusCode;
use kube::Api;
use kube::api::PostParams;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use kairon_model::{KaironNode, Machine, MachineSpec, RuntimeSpec};
use kairon_runtime_api::types::{ClaimRequest, CreatePoolRequest, CreateTemplateRequest, Pool, Template, Vm, VmState};
use kairon_runtime_api::{PoolName, TemplateName};

use super::objects::check_name;
use super::{Caller, ErrorBody, JsonBody, RestError, RestResult, schema};
use crate::auth::{self, Verb};
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

/// The registered nodes: runtime endpoint, capacity, backends, acceleration, heartbeat.
#[utoipa::path(get, path = "/api/v1/nodes", tag = "Nodes",
    responses((status = 200, description = "The nodes", body = schema::KaironNodeList)))]
async fn node_list(c: Caller) -> RestResult<Json<Value>> {
    let nodes: Api<KaironNode> = Api::all(c.ctx.kube.clone());
    Ok(Json(json!({ "items": nodes.list(&Default::default()).await?.items })))
}

/// One node.
#[utoipa::path(get, path = "/api/v1/nodes/{node}", tag = "Nodes", params(NodePath),
    responses((status = 200, description = "The node", body = schema::KaironNode),
              (status = 404, description = "Not registered", body = ErrorBody)))]
async fn node_get(c: Caller, Path(p): Path<NodePath>) -> RestResult<Json<Value>> {
    check_name("node", &p.node)?;
    let nodes: Api<KaironNode> = Api::all(c.ctx.kube.clone());
    let n = nodes
        .get_opt(&p.node)
        .await?
        .ok_or_else(|| RestError::not_found(format!("node {:?} is not registered", p.node)))?;
    Ok(Json(serde_json::to_value(n).unwrap_or_default()))
}

/// Templates built on this node (templates are per node).
#[utoipa::path(get, path = "/api/v1/nodes/{node}/templates", tag = "Nodes", params(NodePath),
    responses((status = 200, description = "The templates with their build state", body = Vec<Template>)))]
async fn template_list(c: Caller, Path(p): Path<NodePath>) -> RestResult<Json<Vec<Template>>> {
    check_name("node", &p.node)?;
    Ok(Json(c.ctx.runtime(&p.node).await?.templates().await?))
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
) -> RestResult<(StatusCode, Json<Template>)> {
    c.check(auth::admin_only(&c.id, "building a template"))?;
    check_name("node", &p.node)?;
    let req = body.parse()?;
    check_name("template", &req.name)?;
    if req.image_ref.trim().is_empty() {
        return Err(RestError::bad_request("imageRef must name an OCI image, e.g. docker.io/library/alpine:3.19"));
    }
    let t =
        c.ctx.runtime(&p.node).await?.create_template(&TemplateName::new(req.name.as_str())?, &req.image_ref).await?;
    Ok((StatusCode::ACCEPTED, Json(t)))
}

/// One template and its build progress.
#[utoipa::path(get, path = "/api/v1/nodes/{node}/templates/{item}", tag = "Nodes", params(NodeItemPath),
    responses((status = 200, description = "The template", body = Template), (status = 404, description = "Not on this node", body = ErrorBody)))]
async fn template_get(c: Caller, Path(p): Path<NodeItemPath>) -> RestResult<Json<Template>> {
    check_name("node", &p.node)?;
    Ok(Json(c.ctx.runtime(&p.node).await?.template(&TemplateName::new(p.item.as_str())?).await?))
}

/// A sandbox in the node's list: in full when it belongs to a Machine in one of the caller's
/// namespaces (admins: every one), else only its ID, state and backend.
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
pub enum SandboxItem {
    Full(Box<Vm>),
    Redacted(RedactedSandbox),
}

/// A sandbox outside the caller's namespaces (or owned by no Machine): what it is, not whose.
#[derive(Serialize, ToSchema)]
pub struct RedactedSandbox {
    pub id: String,
    pub state: VmState,
    pub backend: String,
}

/// Every sandbox on this node as its runtime sees it (including ones made outside Kairon).
/// Sandboxes of Machines outside the caller's namespaces show only ID, state and backend; which
/// Machine owns one is told by the owner UID the node agent or the api stamped on it, never by
/// its name.
#[utoipa::path(get, path = "/api/v1/nodes/{node}/sandboxes", tag = "Nodes", params(NodePath),
    responses((status = 200, description = "The sandboxes", body = Vec<SandboxItem>)))]
async fn sandbox_list(c: Caller, Path(p): Path<NodePath>) -> RestResult<Json<Vec<SandboxItem>>> {
    check_name("node", &p.node)?;
    let vms = c.ctx.runtime(&p.node).await?.list_sandboxes().await?;
    if c.id.all_namespaces() {
        return Ok(Json(vms.into_iter().map(|vm| SandboxItem::Full(Box::new(vm))).collect()));
    }
    let mut mine = std::collections::BTreeSet::new();
    for ns in &c.id.namespaces {
        let machines: Api<Machine> = Api::namespaced(c.ctx.kube.clone(), ns);
        for m in machines.list(&Default::default()).await?.items {
            mine.extend(m.metadata.uid);
        }
    }
    Ok(Json(
        vms.into_iter()
            .map(|vm| match &vm.owner_uid {
                Some(uid) if mine.contains(uid) => SandboxItem::Full(Box::new(vm)),
                _ => SandboxItem::Redacted(RedactedSandbox {
                    id: vm.id.to_string(),
                    state: vm.state,
                    backend: vm.backend,
                }),
            })
            .collect(),
    ))
}

/// The node's pools of Paused members.
#[utoipa::path(get, path = "/api/v1/nodes/{node}/pools", tag = "Nodes", params(NodePath),
    responses((status = 200, description = "The pools", body = Vec<Pool>)))]
async fn pool_list(c: Caller, Path(p): Path<NodePath>) -> RestResult<Json<Vec<Pool>>> {
    check_name("node", &p.node)?;
    Ok(Json(c.ctx.runtime(&p.node).await?.pools().await?))
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
) -> RestResult<(StatusCode, Json<Pool>)> {
    c.check(auth::admin_only(&c.id, "creating a node pool"))?;
    check_name("node", &p.node)?;
    let req = body.parse()?;
    check_name("pool", &req.name)?;
    Ok((StatusCode::CREATED, Json(c.ctx.runtime(&p.node).await?.create_pool(&req).await?)))
}

/// One pool and its members.
#[utoipa::path(get, path = "/api/v1/nodes/{node}/pools/{item}", tag = "Nodes", params(NodeItemPath),
    responses((status = 200, description = "The pool", body = Pool), (status = 404, description = "No such pool", body = ErrorBody)))]
async fn pool_get(c: Caller, Path(p): Path<NodeItemPath>) -> RestResult<Json<Pool>> {
    check_name("node", &p.node)?;
    Ok(Json(c.ctx.runtime(&p.node).await?.pool(&PoolName::new(p.item.as_str())?).await?))
}

/// Delete a pool and every member it holds, claimed or not (admin-only).
#[utoipa::path(delete, path = "/api/v1/nodes/{node}/pools/{item}", tag = "Nodes", params(NodeItemPath),
    responses((status = 204, description = "Deleted"), (status = 403, description = "Admin-only", body = ErrorBody)))]
async fn pool_delete(c: Caller, Path(p): Path<NodeItemPath>) -> RestResult<StatusCode> {
    c.check(auth::admin_only(&c.id, "deleting a node pool"))?;
    check_name("node", &p.node)?;
    c.ctx.runtime(&p.node).await?.delete_pool(&PoolName::new(p.item.as_str())?).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize, Serialize, ToSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct PoolClaimRequest {
    /// The claimed instance's new runtime name (replaced when createMachine is set).
    pub name: Option<String>,
    /// Delete the claimed instance this many seconds after the claim.
    pub ttl_seconds: Option<i64>,
    /// Also create a Machine for the claimed instance, which this node then adopts.
    #[serde(default)]
    pub create_machine: bool,
    /// The Machine's namespace (default `default`).
    pub namespace: Option<String>,
    /// The Machine's name (required with createMachine).
    pub machine_name: Option<String>,
}

/// The answer of a claim with `createMachine`: the Machine, or why it could not be made (the
/// claim happened either way).
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PoolClaimResult {
    pub vm: Vm,
    pub machine: Option<schema::Machine>,
    pub machine_error: Option<String>,
}

/// Take one ready member, resumed (admin-only). Fails at once when none is ready. With
/// `createMachine` it answers `{vm, machine}` (or `{vm, machine: null, machineError}`), else the VM.
#[utoipa::path(post, path = "/api/v1/nodes/{node}/pools/{item}/claim", tag = "Nodes", params(NodeItemPath), request_body = PoolClaimRequest,
    responses((status = 200, description = "The claimed VM, or {vm, machine} with createMachine", body = PoolClaimResult),
              (status = 400, description = "createMachine without machineName", body = ErrorBody),
              (status = 403, description = "Admin-only", body = ErrorBody),
              (status = 409, description = "No ready member right now: retry shortly or grow the pool", body = ErrorBody)))]
async fn pool_claim(
    c: Caller,
    Path(p): Path<NodeItemPath>,
    body: JsonBody<PoolClaimRequest>,
) -> RestResult<Json<Value>> {
    c.check(auth::admin_only(&c.id, "claiming from a node pool"))?;
    check_name("node", &p.node)?;
    let req = body.parse_optional()?.unwrap_or_default();
    let rt = c.ctx.runtime(&p.node).await?;
    if !req.create_machine {
        let vm = rt
            .claim(&PoolName::new(p.item.as_str())?, &ClaimRequest { name: req.name, ttl_seconds: req.ttl_seconds })
            .await?;
        return Ok(Json(serde_json::to_value(vm).unwrap_or_default()));
    }
    let ns = req.namespace.clone().unwrap_or_else(|| "default".into());
    let machine_name =
        req.machine_name.clone().ok_or_else(|| RestError::bad_request("createMachine needs machineName"))?;
    check_name("namespace", &ns)?;
    check_name("machineName", &machine_name)?;
    c.check(auth::may_access(&c.id, Verb::Write, Some(&ns), false))?;
    // Fetched fresh: the spec every member was booted from.
    let pool_name = PoolName::new(p.item.as_str())?;
    let pool = rt.pool(&pool_name).await?;
    let machines: Api<Machine> = Api::namespaced(c.ctx.kube.clone(), &ns);
    // A taken name would also collide with that Machine's own instance on the node: the claim
    // then keeps its pool name and the answer says why no Machine was made.
    let taken = machines.get_opt(&machine_name).await?.is_some();
    let claim_name =
        if taken { req.name.clone() } else { Some(kairon_model::machine::runtime_name(&ns, &machine_name)) };
    let vm = rt.claim(&pool_name, &ClaimRequest { name: claim_name, ttl_seconds: req.ttl_seconds }).await?;
    let failed = |why: String| {
        json!({
            "vm": vm,
            "machine": null,
            "machineError": format!(
                "the claim succeeded, but Machine {ns}/{machine_name} could not be created: {why}. The VM {} runs on node {}: \
                 claim again with another machineName, or delete the VM (DELETE it on the node) if it is not wanted",
                vm.name, p.node
            ),
        })
    };
    if taken {
        return Ok(Json(failed(format!("Machine {ns}/{machine_name} already exists"))));
    }
    let t = pool.template;
    let spec = MachineSpec {
        image: t.image.clone(),
        resources: t.resources.clone(),
        runtime: t.runtime.as_ref().map(|r| RuntimeSpec { backend: r.backend, kernel: None }),
        sandbox: t.sandbox.clone(),
        guest_agent: t.guest_agent.clone(),
        node_name: Some(p.node.clone()),
        ..Default::default()
    };
    let mut m = Machine::new(&machine_name, spec);
    m.metadata.namespace = Some(ns.clone());
    let created =
        match machines.create(&PostParams { field_manager: Some("kairon-api".into()), ..Default::default() }, &m).await
        {
            Ok(created) => created,
            Err(e) => return Ok(Json(failed(RestError::from(e).message))),
        };
    // The member was unowned until now: the new Machine's UID makes it that Machine's, and only
    // then does the node agent adopt it.
    let uid = created.metadata.uid.clone().unwrap_or_default();
    let answer = match rt.set_owner(&vm.id, None, &uid).await {
        Ok(owned) => json!({ "vm": owned, "machine": created }),
        Err(e) => failed(format!("the claimed instance could not be given to the new Machine: {e}")),
    };
    Ok(Json(answer))
}

#[derive(Deserialize, ToSchema)]
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
) -> RestResult<Json<EgressCheckResult>> {
    c.check(auth::admin_only(&c.id, "the egress check"))?;
    check_name("node", &p.node)?;
    let req = body.parse()?;
    if req.host.trim().is_empty() {
        return Err(RestError::bad_request("host must name a host, e.g. api.github.com"));
    }
    let d = c.ctx.runtime(&p.node).await?.egress_check(req.host.trim()).await?;
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
