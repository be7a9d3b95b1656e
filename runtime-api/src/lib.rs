//! kairon-runtime-api: what crosses the boundary of a node's runtime (the FluxVM v1 API) and
//! the one client that crosses it. The api and the node agent depend on this crate, never on
//! the runtime itself.
//!
//! Every path parameter is a typed ID ([`InstanceId`], [`TemplateName`], [`PoolName`], [`Pid`],
//! [`GuestPath`]) whose constructor refuses what could change a URL's meaning, and every URL is
//! built from percent-encoded segments: no tenant- or guest-chosen string reaches the runtime
//! as a path of its own.

pub mod client;
pub mod grant;
pub mod ids;
pub mod pin;
pub mod types;

pub use client::{ClientError, Credential, OWNER_HEADER, Relay, RelaySocket, RuntimeClient, RuntimeConnector};
pub use ids::{GuestPath, IdError, InstanceId, Pid, PoolName, TemplateName};
pub use pin::CertificatePin;
