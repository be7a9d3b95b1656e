//! What a browser needs besides the resources: who the token is (`whoami`), and single-use
//! tickets to open the exec-stream and console WebSockets (browsers cannot put a header on a
//! WebSocket, and a token never goes in a URL).

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::body::JsonBody;
use super::{Caller, ErrorBody};
use crate::auth::Role;
use crate::machines::{Error, Result, allowed};
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

/// What a ticket is for.
#[derive(Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TicketRequest {
    /// The one WebSocket route the ticket opens, without its query:
    /// `/api/v1/machines/{namespace}/{name}/exec/stream`, `…/console`, `…/vnc` or
    /// `…/portforward/{port}`.
    #[schema(
        example = "/api/v1/machines/agents/shell/exec/stream",
        pattern = r"^/api/v1/machines/[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[a-z0-9]([-a-z0-9.]*[a-z0-9])?/(exec/stream|console|vnc|portforward/[0-9]{1,5})$"
    )]
    pub path: String,
}

/// A single-use ticket for a WebSocket.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Ticket {
    /// Give it as `?ticket=` on the WebSocket route it was minted for; it works once, there only.
    pub ticket: String,
    /// How long it stays valid, from now.
    pub expires_in_seconds: u64,
}

/// Mint a single-use ticket (valid 30 s) that opens one WebSocket route of one Machine as the
/// caller: what a browser sends instead of a token, which never goes in a URL.
#[utoipa::path(post, path = "/api/v1/tickets", tag = "Session", request_body = TicketRequest,
    responses((status = 201, description = "The ticket", body = Ticket),
              (status = 400, description = "The path is not a WebSocket route of a Machine", body = ErrorBody),
              (status = 401, description = "No or a bad token", body = ErrorBody),
              (status = 403, description = "The caller may not use that Machine's namespace", body = ErrorBody)))]
async fn ticket_create(
    State(st): State<AppState>,
    c: Caller,
    body: JsonBody<TicketRequest>,
) -> Result<(axum::http::StatusCode, Json<Ticket>)> {
    let path = body.parse()?.path;
    let Some(namespace) = websocket_route(&path) else {
        return Err(Error::bad_request(format!(
            "{path:?} is not a WebSocket route: give /api/v1/machines/NAMESPACE/NAME/ followed by exec/stream, \
             console, vnc or portforward/PORT, without a query"
        )));
    };
    allowed(crate::auth::may_access(&c.id, crate::auth::Verb::Read, Some(namespace), false))?;
    let ticket = st.tickets.mint(&c.id, &path).await?;
    Ok((axum::http::StatusCode::CREATED, Json(Ticket { ticket, expires_in_seconds: st.tickets.ttl().as_secs() })))
}

/// The namespace of a Machine's WebSocket route (`/api/v1/machines/NS/NAME/exec/stream`,
/// `…/console`, `…/vnc`, `…/portforward/PORT`), or None for any other path.
pub fn websocket_route(path: &str) -> Option<&str> {
    let rest = path.strip_prefix("/api/v1/machines/")?;
    let parts: Vec<&str> = rest.split('/').collect();
    // A Kubernetes name: lowercase letters, digits, '-' and '.', a letter or digit at each end.
    let named = |s: &str| {
        let ends = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
        ends(s.chars().next())
            && ends(s.chars().last())
            && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
    };
    let route = match parts.as_slice() {
        [ns, name, "exec", "stream"] | [ns, name, "console"] | [ns, name, "vnc"] => (ns, name),
        // The port itself is the route's to judge when the WebSocket opens.
        [ns, name, "portforward", port]
            if (1..=5).contains(&port.len()) && port.bytes().all(|b| b.is_ascii_digit()) =>
        {
            (ns, name)
        }
        _ => return None,
    };
    (named(route.0) && named(route.1)).then_some(*route.0)
}

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(whoami)).routes(routes!(ticket_create))
}

#[cfg(test)]
mod tests {
    use super::websocket_route;

    #[test]
    fn a_ticket_is_minted_for_a_machines_websocket_route_only() {
        for (path, ns) in [
            ("/api/v1/machines/team/shell/exec/stream", "team"),
            ("/api/v1/machines/team/shell/console", "team"),
            ("/api/v1/machines/team/vm.1/vnc", "team"),
            ("/api/v1/machines/team/shell/portforward/8080", "team"),
        ] {
            assert_eq!(websocket_route(path), Some(ns), "{path}");
        }
        for path in [
            "/api/v1/machines/team/shell/exec",
            "/api/v1/machines/team/shell/exec/stream?command=x",
            "/api/v1/machines/team/shell/portforward/123456",
            "/api/v1/machines/team/shell/portforward/80a",
            "/api/v1/machines/team/../console",
            "/api/v1/machines//shell/console",
            "/api/v1/machines/team/shell/files",
            "/api/v1/tickets",
            "/apis/kairon.zyvor.dev/v1/machines",
        ] {
            assert_eq!(websocket_route(path), None, "{path}");
        }
    }
}
