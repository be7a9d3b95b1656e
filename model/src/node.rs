//! KaironNode: a node agent's registration (cluster-scoped).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::meta::Condition;
use crate::quantity::Quantity;

/// A node that runs Machines: where its runtime listens, what it holds, which backends it has.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema, ToSchema)]
#[kube(
    group = "kairon.zyvor.dev",
    version = "v1",
    kind = "KaironNode",
    status = "KaironNodeStatus",
    shortname = "knode",
    category = "kairon",
    doc = "A node agent's registration: runtime endpoint, capacity, backends, heartbeat.",
    printcolumn(name = "Backends", type_ = "string", json_path = ".spec.backends"),
    printcolumn(name = "Accel", type_ = "string", json_path = ".spec.acceleration"),
    printcolumn(name = "Heartbeat", type_ = "date", json_path = ".status.heartbeatTime"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct KaironNodeSpec {
    /// The FluxVM v1 API of this node's runtime (a URL or `unix:/path`).
    pub runtime_endpoint: String,
    /// The SHA-256 (64 lowercase hex digits) of the certificate this node's `https` runtime
    /// serves, registered by its node agent: the api trusts that certificate alone for this
    /// node, so no other node's certificate passes for it. Only the node itself (and admins)
    /// may write its KaironNode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_certificate_sha256: Option<String>,
    /// An admin's cap on what the scheduler places here. The scheduler places by what the node
    /// measured (`status.capacity`) capped by this, or by the cluster's default maximum
    /// ([`crate::placement::DEFAULT_NODE_CAP_CPU_MILLIS`] and `_MEMORY_BYTES`) when absent: a node agent cannot write it, so a
    /// node that lies about its size draws no more than an admin allows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<NodeCapacity>,
    /// Backends the runtime offers.
    #[serde(default)]
    pub backends: Vec<NodeBackend>,
    /// How VMs are accelerated here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acceleration: Option<Acceleration>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeCapacity {
    #[schema(value_type = String)]
    pub cpu: Quantity,
    #[schema(value_type = String)]
    pub memory: Quantity,
    /// Most Machines at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machines: Option<i32>,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum NodeBackend {
    /// OCI sandboxes under runc.
    Sandbox,
    /// QEMU VMs.
    Vm,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Acceleration {
    Kvm,
    Tcg,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct KaironNodeStatus {
    #[schema(value_type = Option<String>, format = DateTime)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The templates built on this node (Ready to start sandboxes from), as its agent last
    /// reported them with its heartbeat; absent until it has. The scheduler places a template
    /// sandbox on a node that has its template when one does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub templates: Option<Vec<String>>,
    /// What the node measured (its host's CPUs times the overcommit, its memory) or was told
    /// to offer (`kairon node --node-cpu/--node-memory/--node-max-machines`), as its agent
    /// reports it with each heartbeat.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<NodeCapacity>,
}
