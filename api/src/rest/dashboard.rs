//! What a browser needs besides the resources: who the token is (`whoami`), and single-use
//! tickets to open the exec-stream and console WebSockets (browsers cannot put a header on a
//! WebSocket, and a token never goes in a URL).

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{Caller, ErrorBody};
use crate::auth::Role;
use crate::machines::Result;
use crate::state::AppState;

/// A token's role.
#[derive(Serialize, ToSchema, Clone, Copy, PartialEq, Eq, Debug)]
#[serde(rename_all = "lowercase")]
pub enum WhoamiRole {
    Admin,
    Operator,
    Viewer,
    Node,
    Controller,
    Metrics,
}

impl From<Role> for WhoamiRole {
    fn from(r: Role) -> Self {
        match r {
            Role::Admin => WhoamiRole::Admin,
            Role::Operator => WhoamiRole::Operator,
            Role::Viewer => WhoamiRole::Viewer,
            Role::Node => WhoamiRole::Node,
            Role::Controller => WhoamiRole::Controller,
            Role::Metrics => WhoamiRole::Metrics,
        }
    }
}

/// Who the caller's token says they are, and what the server lets such a caller do.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Whoami {
    /// The token's subject.
    pub subject: String,
    pub role: WhoamiRole,
    /// The namespaces the token may use; `*` is every namespace.
    pub namespaces: Vec<String>,
    /// The legacy shared token (an operator with no identity, no guest access).
    pub legacy: bool,
    /// Whether this server lets operators use the guest routes (exec, files, terminal) on
    /// Machines labelled `kairon.zyvor.dev/sandbox=true` (`KAIRON_UI_SANDBOX_OPERATOR_EXEC`).
    /// Admins always may; viewers never.
    pub operator_exec: bool,
}

/// Who the caller is: subject, role, namespaces, and the server's operator-exec flag.
#[utoipa::path(get, path = "/api/v1/whoami", tag = "Session",
    responses((status = 200, description = "The caller", body = Whoami),
              (status = 401, description = "No or a bad token", body = ErrorBody)))]
async fn whoami(c: Caller) -> Result<Json<Whoami>> {
    Ok(Json(Whoami {
        subject: c.id.sub.clone(),
        role: c.id.role.into(),
        namespaces: c.id.namespaces.clone(),
        legacy: c.id.legacy,
        operator_exec: c.machines.sandbox_operator_exec,
    }))
}

/// A single-use ticket for a WebSocket.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Ticket {
    /// Give it as `?ticket=` on the exec-stream or console WebSocket (or any WebSocket route);
    /// it works once.
    pub ticket: String,
    /// How long it stays valid, from now.
    pub expires_in_seconds: u64,
}

/// Mint a single-use ticket (valid 30 s) that opens one WebSocket as the caller: what a
/// browser sends instead of a token, which never goes in a URL.
#[utoipa::path(post, path = "/api/v1/tickets", tag = "Session",
    responses((status = 201, description = "The ticket", body = Ticket),
              (status = 401, description = "No or a bad token", body = ErrorBody)))]
async fn ticket_create(State(st): State<AppState>, c: Caller) -> Result<(axum::http::StatusCode, Json<Ticket>)> {
    let ticket = st.tickets.mint(&c.id).await?;
    Ok((axum::http::StatusCode::CREATED, Json(Ticket { ticket, expires_in_seconds: st.tickets.ttl().as_secs() })))
}

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(whoami)).routes(routes!(ticket_create))
}
