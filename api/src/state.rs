//! What every handler shares.

use std::sync::Arc;

use kairon_db::Store;
use kairon_model::validate::ValidationOptions;

use crate::auth::TokenKeys;
use crate::k8s::registry::Registry;

#[derive(Clone)]
pub struct AppState {
    pub store: Store,
    pub registry: Arc<Registry>,
    pub keys: TokenKeys,
    pub validation: ValidationOptions,
    /// Renders the process's Prometheus metrics (the controllers count into them).
    pub metrics: Arc<dyn Fn() -> String + Send + Sync>,
    /// The Machines service (a Kubernetes client and runtime credentials) under the REST API
    /// and MCP; without it those routes answer 503.
    pub machines: Option<Arc<crate::machines::Machines>>,
    /// The legacy shared token: authenticates as an operator with no identity.
    pub legacy_token: Option<String>,
    /// Bounded work: body, patch, exec and connection limits.
    pub limits: Arc<crate::limits::Limits>,
    /// Long-lived connections per token subject, under `limits.max_connections_per_subject`.
    pub connections: Arc<crate::limits::ConnectionLimiter>,
    /// Cancelled when the server starts to drain: long polls then leave their answer to the
    /// connection's end rather than answer a failure of their own making.
    pub stopping: tokio_util::sync::CancellationToken,
    /// Single-use WebSocket tickets (`POST /api/v1/tickets`).
    pub tickets: Arc<crate::tickets::Tickets>,
    /// Preview links (`POST …/previews`), and the domain they are served under, if any.
    pub previews: Arc<crate::previews::Previews>,
    /// The admission webhook's quota judgements take turns per namespace.
    pub quota_turns: Arc<crate::webhook::quota::Turns>,
}

impl AppState {
    pub fn new(store: Store, keys: TokenKeys, validation: ValidationOptions) -> Self {
        AppState {
            tickets: Arc::new(crate::tickets::Tickets::new(store.pool().clone())),
            previews: Arc::new(crate::previews::Previews::new(store.pool().clone(), None)),
            store,
            registry: Arc::new(Registry::new()),
            keys,
            validation,
            metrics: Arc::new(String::new),
            machines: None,
            legacy_token: None,
            limits: Arc::new(crate::limits::Limits::default()),
            connections: crate::limits::ConnectionLimiter::new(crate::limits::DEFAULT_MAX_CONNECTIONS_PER_SUBJECT),
            stopping: tokio_util::sync::CancellationToken::new(),
            quota_turns: Arc::default(),
        }
    }

    /// Serves preview links under `domain`.
    pub fn with_previews(mut self, domain: Option<crate::previews::PreviewDomain>) -> Self {
        self.previews = Arc::new(crate::previews::Previews::new(self.store.pool().clone(), domain));
        self
    }

    /// Sets the limits (and sizes the connection counter to them).
    pub fn with_limits(mut self, limits: crate::limits::Limits) -> Self {
        self.connections = crate::limits::ConnectionLimiter::new(limits.max_connections_per_subject);
        self.limits = Arc::new(limits);
        self
    }
}
