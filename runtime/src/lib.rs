//! kairon-runtime: a node's runtime behind the FluxVM v1 API. The node agent and the api reach
//! it only through `kairon_runtime_api::RuntimeClient`; `server` serves it; backends run the
//! instances.

/// The wire types, from `kairon-runtime-api` (the crate the api and node agents use).
pub use kairon_runtime_api::types as api;
pub mod backend;
pub mod egress;
pub mod engine;
pub mod files;
pub mod migration;
pub mod net;
pub mod oci;
pub mod pools;
pub mod proxy;
pub mod sandbox;
pub mod server;
pub mod stream;
pub mod tty;
pub mod vm;
