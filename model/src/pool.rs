//! MachinePool: warm members ready to be claimed.

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::machine::MachineSpec;
use crate::meta::Condition;

pub const DEFAULT_WARMUP_SECONDS: i64 = 30;

fn default_warmup_seconds() -> i64 {
    DEFAULT_WARMUP_SECONDS
}

/// Keeps `replicas` warm members, Running or Paused, for MachineClaims to take.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, ToSchema)]
#[kube(
    group = "kairon.zyvor.dev",
    version = "v1",
    kind = "MachinePool",
    namespaced,
    status = "MachinePoolStatus",
    shortname = "mpool",
    category = "kairon",
    doc = "A pool of warm Machines, Running or Paused, ready for a MachineClaim.",
    printcolumn(name = "Replicas", type_ = "integer", json_path = ".spec.replicas"),
    printcolumn(name = "Warm", type_ = "integer", json_path = ".status.warm"),
    printcolumn(name = "Claimed", type_ = "integer", json_path = ".status.claimed"),
    printcolumn(name = "Warm-State", type_ = "string", json_path = ".spec.warmPowerState"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct MachinePoolSpec {
    /// How many unclaimed members to keep.
    pub replicas: i32,
    /// The power state warm members wait in.
    #[serde(default)]
    pub warm_power_state: WarmPowerState,
    /// How long a member runs after booting before it is paused (Paused pools).
    #[serde(default = "default_warmup_seconds")]
    pub warmup_seconds: i64,
    /// What every member is made from.
    pub template: MachineTemplate,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema, ToSchema)]
pub enum WarmPowerState {
    #[default]
    Running,
    Paused,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineTemplate {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<TemplateMeta>,
    pub spec: MachineSpec,
}

/// Labels and annotations copied onto every member.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateMeta {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachinePoolStatus {
    /// Unclaimed members, in any phase.
    #[serde(default)]
    pub replicas: i32,
    /// Unclaimed members that have booted (Running or Paused).
    #[serde(default)]
    pub ready: i32,
    /// Unclaimed members warmed up and in the warm power state: what a claim can take now.
    #[serde(default)]
    pub warm: i32,
    /// Members bound to a claim.
    #[serde(default)]
    pub claimed: i32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}
