//! kairon-api: the HTTP server in front of Kairon — the Kubernetes-compatible API for its
//! kinds (embedded mode), authentication, and the Kairon REST API with its OpenAPI document.

pub mod auth;
pub mod guard;
pub mod k8s;
pub mod limits;
pub mod linger;
pub mod loopback;
pub mod machines;
pub mod mcp;
pub mod previews;
pub mod requester;
pub mod rest;
pub mod server;
pub mod state;
pub mod tickets;
pub mod ui;
pub mod webhook;

pub use server::{cluster_router, router, webhook_router};
pub use state::AppState;
