//! Preview links of a Machine (`crate::previews`): made, listed and revoked by whoever may use
//! its guest; opened by anyone holding the link, in a browser, with no header.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::objects::ObjectPath;
use super::{Caller, ErrorBody, JsonBody};
use crate::machines::{Error, Needs, Result};
use crate::previews::Preview;
use crate::state::AppState;

#[derive(Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PreviewRequest {
    /// The guest port a browser reaches through the link.
    #[schema(minimum = 1, maximum = 65535)]
    pub port: u16,
    /// How long the link lives, in seconds (default 3600, at most 604800); it dies sooner with
    /// its Machine or when revoked.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 604800)]
    pub ttl_seconds: Option<u64>,
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct PreviewPath {
    pub namespace: String,
    pub name: String,
    /// The link's id (not its capability).
    pub id: String,
}

impl Caller {
    /// The UID of a Machine whose guest the caller may use.
    async fn machine_uid(&self, ns: &str, name: &str) -> Result<String> {
        let m = self.machines.authorize(&self.id, ns, name, Needs::Instance).await?;
        m.metadata.uid.ok_or_else(|| Error::internal(format!("Machine {ns}/{name} has no uid")))
    }
}

/// Make a preview link: a URL a browser opens with no header, on a host of its own, that reaches
/// the guest's server on `port` as the caller (waking a Machine with wake-on-connect).
#[utoipa::path(post, path = "/api/v1/machines/{namespace}/{name}/previews", tag = "Guest", params(ObjectPath),
    request_body = PreviewRequest,
    responses((status = 201, description = "The link; its `url` is given here only", body = Preview),
              (status = 403, description = "Not allowed to use this guest", body = ErrorBody),
              (status = 409, description = "The Machine holds the most live links it may", body = ErrorBody),
              (status = 422, description = "The port or ttl is out of range", body = ErrorBody),
              (status = 501, description = "This server serves no preview links (no --preview-domain)", body = ErrorBody)))]
async fn preview_create(
    State(st): State<AppState>,
    c: Caller,
    Path(p): Path<ObjectPath>,
    body: JsonBody<PreviewRequest>,
) -> Result<(StatusCode, Json<Preview>)> {
    // What this server can do comes first: without a preview domain no link is ever made.
    if st.previews.domain().is_none() {
        return Err(crate::previews::CreateError::Disabled.into());
    }
    let req = body.parse()?;
    let machines = &c.machines;
    let made = st.previews.make(machines, &c.id, (&p.namespace, &p.name), req.port, req.ttl_seconds).await?;
    Ok((StatusCode::CREATED, Json(made)))
}

/// The Machine's live preview links (their URLs are not shown again).
#[utoipa::path(get, path = "/api/v1/machines/{namespace}/{name}/previews", tag = "Guest", params(ObjectPath),
    responses((status = 200, description = "The live links, newest first", body = Vec<Preview>),
              (status = 403, description = "Not allowed to use this guest", body = ErrorBody)))]
async fn preview_list(State(st): State<AppState>, c: Caller, Path(p): Path<ObjectPath>) -> Result<Json<Vec<Preview>>> {
    let uid = c.machine_uid(&p.namespace, &p.name).await?;
    Ok(Json(st.previews.list(&uid).await?))
}

/// Revoke a preview link: it answers 404 from now on.
#[utoipa::path(delete, path = "/api/v1/machines/{namespace}/{name}/previews/{id}", tag = "Guest", params(PreviewPath),
    responses((status = 204, description = "Revoked"),
              (status = 403, description = "Not allowed to use this guest", body = ErrorBody),
              (status = 404, description = "No live link of this Machine has that id", body = ErrorBody)))]
async fn preview_revoke(State(st): State<AppState>, c: Caller, Path(p): Path<PreviewPath>) -> Result<StatusCode> {
    let uid = c.machine_uid(&p.namespace, &p.name).await?;
    if !st.previews.revoke(&uid, &p.id).await? {
        return Err(Error::not_found(format!(
            "Machine {}/{} has no preview link {:?}: list them with GET …/previews",
            p.namespace, p.name, p.id
        )));
    }
    Ok(StatusCode::NO_CONTENT)
}

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(preview_create, preview_list)).routes(routes!(preview_revoke))
}
