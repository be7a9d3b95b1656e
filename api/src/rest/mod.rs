//! The Kairon REST API under `/api/v1`: Machines, MachinePools and MachineClaims mirrored as the
//! same JSON as the Kubernetes objects (read and written through kube-rs, so it mirrors a real
//! cluster unchanged), power operations, guest relays with wake-on-connect, node-scoped runtime
//! routes and usage queries. The router and the OpenAPI document come from one route list.

pub mod body;
pub mod contract;
mod dashboard;
pub mod error;
pub mod guest;
mod nodes;
mod objects;
mod power;
mod previews;
pub mod schema;
pub(crate) mod usage;

use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use utoipa::OpenApi;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa_axum::router::OpenApiRouter;

use crate::auth::Identity;
use crate::machines::{Error, Machines, Reason, Result};
use crate::state::AppState;
pub use body::JsonBody;
pub use error::ErrorBody;

/// The caller of a REST route: who they are, and the Machines service to call as them.
pub struct Caller {
    pub id: Identity,
    pub machines: Arc<Machines>,
    /// Bounded work: the server's limits and its count of long-lived connections.
    pub limits: Arc<crate::limits::Limits>,
    pub connections: Arc<crate::limits::ConnectionLimiter>,
    /// The server is draining (see [`AppState::stopping`]).
    pub stopping: tokio_util::sync::CancellationToken,
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, st: &AppState) -> Result<Self> {
        let id = parts
            .extensions
            .get::<Identity>()
            .cloned()
            .ok_or_else(|| Error::new(Reason::Unauthorized, "no bearer token"))?;
        let machines = st.machines.clone().ok_or_else(|| {
            Error::unavailable("the REST API is not configured on this server (no Kubernetes client)")
        })?;
        Ok(Caller {
            id,
            machines,
            limits: st.limits.clone(),
            connections: st.connections.clone(),
            stopping: st.stopping.clone(),
        })
    }
}

impl Caller {
    /// A slot for a long-lived connection (a wait, a WebSocket, a log follow), held until the
    /// guard drops; 429 `TooManyConnections` when this subject holds the most it may.
    pub fn connection_slot(&self) -> Result<Option<crate::limits::ConnectionGuard>> {
        self.connections.acquire_for(&self.id).map_err(|e| Error::new(Reason::TooManyConnections, e.message()))
    }
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Kairon",
        description = "The Kairon REST API: Machines, pools, claims, power operations, guest relays, nodes and usage. \
                       Every route takes `Authorization: Bearer <token>` (`kairon token` mints one).",
        license(name = "Apache-2.0"),
        version = "0.2.0"
    ),
    modifiers(&BearerAuth),
    security(("bearer" = [])),
    tags(
        (name = "Machines", description = "Machines as Kubernetes objects"),
        (name = "MachinePools", description = "Pools of warm Machines"),
        (name = "MachineClaims", description = "Claims on warm pool members, with usage"),
        (name = "Templates", description = "A namespace's own sandbox templates: an image and build steps, built on the nodes that run them"),
        (name = "Power", description = "Power operations on a Machine"),
        (name = "Guest", description = "Exec, processes, files and relays into a Machine's guest"),
        (name = "Nodes", description = "Nodes and their runtime: templates, sandboxes, pools, egress"),
        (name = "Usage", description = "Claim usage for billing"),
        (name = "Session", description = "Who the caller is, and WebSocket tickets for browsers"),
    )
)]
struct ApiDoc;

struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).bearer_format("JWT").build()),
        );
    }
}

/// The REST routes and their document, from one list.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .merge(objects::routes())
        .merge(power::routes())
        .merge(guest::routes())
        .merge(nodes::routes())
        .merge(usage::routes())
        .merge(dashboard::routes())
        .merge(previews::routes())
}

/// Adds the operations whose axum routes are not made from the route list (the sandbox proxy's
/// catch-all path), then what every route of a kind can answer ([`contract::complete`]).
pub fn with_unrouted(mut doc: utoipa::openapi::OpenApi) -> utoipa::openapi::OpenApi {
    doc.merge(guest::SandboxHttpDoc::openapi());
    contract::complete(doc)
}

/// The OpenAPI document of the REST API (what `openapi/openapi.json` holds).
pub fn openapi() -> serde_json::Value {
    contract::document(with_unrouted(routes().split_for_parts().1))
}

/// The document as `openapi/openapi.json` holds it.
pub fn openapi_text() -> String {
    format!("{}\n", serde_json::to_string_pretty(&openapi()).expect("the OpenAPI document serialises"))
}
