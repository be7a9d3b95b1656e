//! kairon-api: the HTTP server in front of Kairon — the Kubernetes-compatible API for its
//! kinds (embedded mode), authentication, and (in later layers) the Kairon REST API.

pub mod auth;
pub mod k8s;
pub mod server;
pub mod state;

pub use server::router;
pub use state::AppState;
