//! The Kairon REST API under `/api/v1`: Machines, MachinePools and MachineClaims mirrored as the
//! same JSON as the Kubernetes objects (read and written through kube-rs, so it mirrors a real
//! cluster unchanged), power operations, guest relays with wake-on-connect, node-scoped runtime
//! routes and usage queries. The router and the OpenAPI document come from one route list.

pub mod body;
pub mod contract;
pub mod error;
pub mod guest;
mod nodes;
mod objects;
mod power;
pub mod schema;
mod usage;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use kube::runtime::events::{Event as KubeEvent, EventType, Recorder, Reporter};
use kube::{Api, Resource};
use utoipa::OpenApi;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa_axum::router::OpenApiRouter;

use kairon_model::{KaironNode, Machine};
use kairon_runtime_api::{InstanceId, RuntimeClient, RuntimeConnector};

use crate::auth::Identity;
use crate::state::AppState;
pub use body::JsonBody;
pub use error::{ErrorBody, RestError, RestResult};

/// What the REST layer needs beyond the Kubernetes-compatible API.
pub struct RestContext {
    /// The Kubernetes API (the embedded one, or a real cluster), with the server's own rights:
    /// every route checks the caller itself before using it.
    pub kube: kube::Client,
    /// The bearer token of the nodes' runtimes (one secret shared by the api and node agents).
    pub runtime_token: String,
    /// `KAIRON_UI_SANDBOX_OPERATOR_EXEC`: named operators may use guest routes on sandboxes.
    pub sandbox_operator_exec: bool,
    /// Relay sessions stamp `kairon.zyvor.dev/last-activity` at most this often per Machine.
    pub activity_stamp_interval: Duration,
    stamps: Mutex<HashMap<(String, String), Instant>>,
    reporter: Reporter,
    /// One set of connection pools for every node's runtime, made on first use.
    runtimes: tokio::sync::OnceCell<RuntimeConnector>,
    /// Each node's runtime endpoint as last read from its KaironNode, and when: guest routes
    /// reuse it for [`ENDPOINT_TTL`] instead of reading the node on every request.
    endpoints: Mutex<HashMap<String, (String, Instant)>>,
}

/// How long a node's runtime endpoint is reused. A stale one can only send a request to where
/// the node was: the instance's owner check (`machine_runtime`) still decides what is reached.
const ENDPOINT_TTL: Duration = Duration::from_secs(5);

impl RestContext {
    pub fn new(kube: kube::Client, runtime_token: String) -> Self {
        RestContext {
            kube,
            runtime_token,
            sandbox_operator_exec: false,
            activity_stamp_interval: Duration::from_secs(10),
            stamps: Mutex::new(HashMap::new()),
            reporter: Reporter { controller: "kairon-api".into(), instance: None },
            runtimes: tokio::sync::OnceCell::new(),
            endpoints: Mutex::new(HashMap::new()),
        }
    }

    /// The runtime of a node, from its registration.
    pub async fn runtime(&self, node: &str) -> RestResult<RuntimeClient> {
        let cached = {
            let endpoints = self.endpoints.lock().unwrap_or_else(|p| p.into_inner());
            endpoints.get(node).filter(|(_, at)| at.elapsed() < ENDPOINT_TTL).map(|(e, _)| e.clone())
        };
        let endpoint = match cached {
            Some(e) => e,
            None => {
                let nodes: Api<KaironNode> = Api::all(self.kube.clone());
                let n = nodes.get_opt(node).await?.ok_or_else(|| {
                    RestError::not_found(format!("node {node:?} is not registered (GET /api/v1/nodes lists the nodes)"))
                })?;
                let mut endpoints = self.endpoints.lock().unwrap_or_else(|p| p.into_inner());
                // Bounded by the nodes there are; entries of nodes gone expire unused.
                endpoints.retain(|_, (_, at)| at.elapsed() < ENDPOINT_TTL);
                endpoints.insert(node.to_string(), (n.spec.runtime_endpoint.clone(), Instant::now()));
                n.spec.runtime_endpoint
            }
        };
        let conn = self.runtimes.get_or_try_init(|| async { RuntimeConnector::new(&self.runtime_token) }).await?;
        conn.client(&endpoint).map_err(RestError::from)
    }

    /// The runtime that runs a Machine, and the Machine's instance id there.
    pub async fn machine_runtime(&self, m: &Machine) -> RestResult<(RuntimeClient, InstanceId)> {
        let status = m.status.clone().unwrap_or_default();
        let name = m.metadata.name.clone().unwrap_or_default();
        let node = status.node_name.ok_or_else(|| {
            RestError::conflict(
                "NotScheduled",
                format!("Machine {name:?} is not on a node yet; wait for it to be scheduled"),
            )
        })?;
        let id = status.runtime_id.ok_or_else(|| {
            RestError::conflict(
                "NotProvisioned",
                format!("Machine {name:?} has no runtime instance yet; wait for it to start"),
            )
        })?;
        let id = InstanceId::new(id).map_err(|e| {
            RestError::conflict("NotProvisioned", format!("Machine {name:?} has no usable runtime instance: {e}"))
        })?;
        let mut rt = self.runtime(&node).await?;
        // The id only says where to look: the instance must carry this Machine's UID, so no
        // status that points elsewhere (even for a moment) reaches another Machine's instance.
        let owner = match rt.get(&id).await {
            // The node may have moved (its runtime restarted elsewhere): read it again, once.
            Err(kairon_runtime_api::ClientError::Unreachable { .. }) => {
                self.endpoints.lock().unwrap_or_else(|p| p.into_inner()).remove(&node);
                rt = self.runtime(&node).await?;
                rt.get(&id).await?
            }
            got => got?,
        }
        .owner_uid;
        if owner.is_none() || owner != m.metadata.uid {
            return Err(RestError::conflict(
                "NotProvisioned",
                format!("Machine {name:?} has no runtime instance of its own yet; wait for it to start"),
            ));
        }
        Ok((rt, id))
    }

    /// Records an Event about an object, as the controllers do. A failure only logs: an Event is
    /// never worth failing the request for.
    pub async fn record<K: Resource<DynamicType = ()>>(&self, obj: &K, reason: &str, note: String) {
        let recorder = Recorder::new(self.kube.clone(), self.reporter.clone());
        let ev = KubeEvent {
            type_: EventType::Normal,
            reason: reason.into(),
            note: Some(note),
            action: reason.into(),
            secondary: None,
        };
        if let Err(e) = recorder.publish(&ev, &obj.object_ref(&())).await {
            tracing::warn!(error = %e, reason, "recording an event failed");
        }
    }

    /// True when this Machine's last-activity stamp is due (and marks it done).
    pub(crate) fn stamp_due(&self, ns: &str, name: &str) -> bool {
        let mut stamps = self.stamps.lock().unwrap_or_else(|p| p.into_inner());
        let key = (ns.to_string(), name.to_string());
        let now = Instant::now();
        match stamps.get(&key) {
            Some(t) if now.duration_since(*t) < self.activity_stamp_interval => false,
            _ => {
                // One entry per Machine ever connected to would grow for as long as the server
                // runs (pool members are new Machines every claim): entries past the interval
                // say no more than a missing one, so they go once the map is large.
                if stamps.len() >= STAMPS_PRUNE_AT {
                    let interval = self.activity_stamp_interval;
                    stamps.retain(|_, t| now.duration_since(*t) < interval);
                }
                stamps.insert(key, now);
                true
            }
        }
    }
}

/// Size of the last-activity stamp map past which stale entries are dropped.
const STAMPS_PRUNE_AT: usize = 1024;

/// The caller of a REST route: who they are, and the REST context.
pub struct Caller {
    pub id: Identity,
    pub ctx: Arc<RestContext>,
    /// Bounded work: the server's limits and its count of long-lived connections.
    pub limits: Arc<crate::limits::Limits>,
    pub connections: Arc<crate::limits::ConnectionLimiter>,
    /// The server is draining (see [`AppState::stopping`]).
    pub stopping: tokio_util::sync::CancellationToken,
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = RestError;

    async fn from_request_parts(parts: &mut Parts, st: &AppState) -> Result<Self, RestError> {
        let id =
            parts.extensions.get::<Identity>().cloned().ok_or_else(|| {
                RestError::new(axum::http::StatusCode::UNAUTHORIZED, "Unauthorized", "no bearer token")
            })?;
        let ctx = st.rest.clone().ok_or_else(|| {
            RestError::unavailable("the REST API is not configured on this server (no Kubernetes client)")
        })?;
        Ok(Caller {
            id,
            ctx,
            limits: st.limits.clone(),
            connections: st.connections.clone(),
            stopping: st.stopping.clone(),
        })
    }
}

impl Caller {
    /// A slot for a long-lived connection (a wait, a WebSocket, a log follow), held until the
    /// guard drops; 429 `TooManyConnections` when this subject holds the most it may.
    pub fn connection_slot(&self) -> RestResult<Option<crate::limits::ConnectionGuard>> {
        self.connections.acquire_for(&self.id).map_err(|e| {
            RestError::new(
                axum::http::StatusCode::TOO_MANY_REQUESTS,
                crate::limits::TooManyConnections::REASON,
                e.message(),
            )
        })
    }

    pub fn check(&self, r: Result<(), String>) -> RestResult<()> {
        r.map_err(RestError::forbidden)
    }
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Kairon",
        description = "The Kairon REST API: Machines, pools, claims, power operations, guest relays, nodes and usage. \
                       Every route takes `Authorization: Bearer <token>` (`kairon token` mints one).",
        license(name = "Apache-2.0")
    ),
    modifiers(&BearerAuth),
    security(("bearer" = [])),
    tags(
        (name = "Machines", description = "Machines as Kubernetes objects"),
        (name = "MachinePools", description = "Pools of warm Machines"),
        (name = "MachineClaims", description = "Claims on warm pool members, with usage"),
        (name = "Power", description = "Power operations on a Machine"),
        (name = "Guest", description = "Exec, processes, files and relays into a Machine's guest"),
        (name = "Nodes", description = "Nodes and their runtime: templates, sandboxes, pools, egress"),
        (name = "Usage", description = "Claim usage for billing"),
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
}

/// Adds the operations whose axum routes are not made from the route list (the sandbox proxy's
/// catch-all path), then what every route of a kind can answer ([`contract::complete`]).
pub fn with_unrouted(mut doc: utoipa::openapi::OpenApi) -> utoipa::openapi::OpenApi {
    doc.merge(guest::SandboxHttpDoc::openapi());
    contract::complete(doc)
}

/// The OpenAPI document of the REST API (what `openapi/openapi.json` holds).
pub fn openapi() -> utoipa::openapi::OpenApi {
    with_unrouted(routes().split_for_parts().1)
}

#[cfg(test)]
mod stamp_tests {
    use super::*;

    /// A client that is never called: stamp bookkeeping does no I/O.
    fn offline_client() -> kube::Client {
        let svc = tower::service_fn(|_req: http::Request<kube::client::Body>| async {
            Err::<http::Response<kube::client::Body>, std::io::Error>(std::io::Error::other("offline"))
        });
        kube::Client::new(svc, "default")
    }

    #[tokio::test]
    async fn stale_stamps_are_dropped_once_the_map_is_large() {
        let mut ctx = RestContext::new(offline_client(), String::new());
        ctx.activity_stamp_interval = Duration::from_millis(50);
        for i in 0..STAMPS_PRUNE_AT {
            assert!(ctx.stamp_due("ns", &format!("m-{i}")));
        }
        assert!(!ctx.stamp_due("ns", "m-0"), "a fresh stamp is not due again");
        std::thread::sleep(Duration::from_millis(60));
        assert!(ctx.stamp_due("ns", "new"));
        let stamps = ctx.stamps.lock().unwrap();
        assert_eq!(stamps.len(), 1, "the stale entries went when the map was full");
        assert!(stamps.contains_key(&("ns".to_string(), "new".to_string())));
    }
}
