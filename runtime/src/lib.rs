//! kairon-runtime: a node's runtime behind the FluxVM v1 API. The node agent and the api reach
//! it only through `client::RuntimeClient`; `server` serves it; backends run the instances.

pub mod api;
pub mod client;
pub mod egress;
pub mod engine;
pub mod oci;
pub mod pools;
pub mod proxy;
pub mod sandbox;
pub mod server;
pub mod stream;
pub mod vm;
