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
    /// The REST API's context (a Kubernetes client and runtime credentials); without it the
    /// REST routes answer 503.
    pub rest: Option<Arc<crate::rest::RestContext>>,
    /// The legacy shared token: authenticates as an operator with no identity.
    pub legacy_token: Option<String>,
}

impl AppState {
    pub fn new(store: Store, keys: TokenKeys, validation: ValidationOptions) -> Self {
        AppState {
            store,
            registry: Arc::new(Registry::new()),
            keys,
            validation,
            metrics: Arc::new(String::new),
            rest: None,
            legacy_token: None,
        }
    }
}
