//! MachineClaim: takes one warm member of a pool, and reports what it used.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::meta::Condition;

/// Binds one warm member of a MachinePool; its usage accrues while bound.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema, ToSchema)]
#[kube(
    group = "kairon.zyvor.dev",
    version = "v1",
    kind = "MachineClaim",
    namespaced,
    status = "MachineClaimStatus",
    shortname = "mclaim",
    category = "kairon",
    doc = "A claim on one warm member of a MachinePool.",
    printcolumn(name = "Pool", type_ = "string", json_path = ".spec.poolName"),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Machine", type_ = "string", json_path = ".status.machineName"),
    printcolumn(name = "Launch", type_ = "string", json_path = ".status.launchType"),
    printcolumn(name = "Active", type_ = "integer", json_path = ".status.usage.activeSeconds"),
    printcolumn(name = "Suspended", type_ = "integer", json_path = ".status.usage.suspendedSeconds"),
    printcolumn(name = "VCPU-S", type_ = "number", json_path = ".status.usage.vcpuSeconds"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct MachineClaimSpec {
    /// The MachinePool (same namespace) to take a member from.
    pub pool_name: String,
    /// Release the claim this many seconds after it binds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds: Option<i64>,
    /// Environment variables for every exec and process in the bound Machine, over its own
    /// `spec.env` (written onto the member when the claim binds, so a warm member gets them
    /// without a cold start; immutable). Not for secrets: every reader of the namespace sees them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Secret keys for every exec and process in the bound Machine, as a Machine's
    /// `spec.secretEnv` (written onto the member when the claim binds, over its own; immutable).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub secret_env: BTreeMap<String, crate::machine::SecretKeyRef>,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema, ToSchema)]
pub enum ClaimPhase {
    #[default]
    Pending,
    Bound,
    Released,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineClaimStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<ClaimPhase>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_name: Option<String>,
    #[schema(value_type = Option<String>, format = DateTime)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound_time: Option<Time>,
    /// How the claim was served: `Warm` when a warm member was there when it arrived, `Cold`
    /// when it had to wait for one (or for its pool). Also the claim's
    /// `kairon.zyvor.dev/launch-type` label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch_type: Option<LaunchType>,
    /// Seconds from the claim's creation to its binding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_seconds: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<ClaimUsage>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// How a claim was served.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema, ToSchema)]
pub enum LaunchType {
    /// A warm member was ready when the claim arrived.
    Warm,
    /// The claim waited for a member to become warm (or for its pool to exist).
    Cold,
}

impl LaunchType {
    pub fn as_str(self) -> &'static str {
        match self {
            LaunchType::Warm => "Warm",
            LaunchType::Cold => "Cold",
        }
    }
}

/// What a claim used. Seconds are whole; the accrual clock carries fractions forward.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClaimUsage {
    /// Seconds the Machine was Running.
    #[serde(default)]
    pub active_seconds: i64,
    /// Seconds the Machine was Stopped, Paused, Hibernated or Halted.
    #[serde(default)]
    pub suspended_seconds: i64,
    /// vCPUs × active seconds.
    #[serde(default)]
    pub vcpu_seconds: f64,
    /// GiB of memory × active seconds.
    #[serde(rename = "memoryGiBSeconds", default)]
    pub memory_gib_seconds: f64,
    /// The instant usage has been accrued up to.
    #[schema(value_type = Option<String>, format = DateTime)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_accrual_time: Option<Time>,
}
